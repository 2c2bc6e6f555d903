"""The tile explorer's precomputed table (gemm_course.teaching.widgets.explorer_table) and its static page.

The pure tests build small tables and records by hand; the compile tests compile a few steps and
check that each row of the table is what the compiler and gemm_course.teaching.inspect say of that config.
(The book's copy of the whole table, every step and knob combination, is checked in
tests/test_book.py, in the browser.)
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re

import pytest
from synthetic import bench_record

from gemm_course.runtime import arch, ladder
from gemm_course.teaching import explorer_rows, inspect, sim, widgets

# ---------------------------------------------------------------------------------------------
# pure: keys, CTAs per SM, tensor memory, records, the static page
# ---------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_config_key_names_the_step_and_its_knob_values_in_order():
    step = ladder.get("sm90/11")
    assert [n for n, _ in step.knobs] == ["stages", "epi_n", "stream_k"]
    assert widgets.config_key(step, (3, 128, True)) == "sm90/11:3,128,true"
    assert widgets.knob_values(step, step.default) == (3, 128, True)
    assert widgets.config_key("sm100/3", widgets.knob_values("sm100/3", ladder.get("sm100/3").default)) == "sm100/3:256"


@pytest.mark.fast
def test_ctas_per_sm_names_the_limiting_resource():
    # Hopper, step 6's default: 168 registers x 384 threads and 210 KiB of shared memory: one CTA.
    occ = widgets.ctas_per_sm(168, 384, 215040, "sm_90a")
    assert occ["ctas"] == 1 and set(occ["limiter"]) == {"registers", "shared memory"}
    assert occ["limits"] == sim.occupancy(168, 384, 215040)["limits"]
    # step 2 at tile_n=64: registers stop at 8 CTAs before shared memory (20) does
    occ = widgets.ctas_per_sm(58, 128, 10240, "sm_90a")
    assert occ["ctas"] == 8 and occ["limiter"] == ["registers"]
    # Blackwell: each CTA allocating 256 of the 512 tensor-memory columns leaves room for two
    occ = widgets.ctas_per_sm(26, 128, 47104, "sm_100a", tmem=256)
    assert occ["ctas"] == 2 and occ["limiter"] == ["tensor memory"] and occ["limits"]["shared memory"] == 4
    assert widgets.ctas_per_sm(26, 128, 47104, "sm_100a", tmem=512)["ctas"] == 1
    assert "tensor memory" not in widgets.ctas_per_sm(26, 128, 47104, "sm_100a")["limits"]


@pytest.mark.fast
def test_tmem_columns_reads_the_allocation():
    ptx = "mov.b32 %r7, 512;\n\ttcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r3], %r7;\n"
    assert widgets.tmem_columns(ptx) == 512
    assert widgets.tmem_columns("\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 256;\n") == 256
    assert widgets.tmem_columns("\tld.global.u32 %r1, [%rd1];\n") is None


@pytest.mark.fast
def test_measured_takes_the_newest_record_of_exactly_that_config_per_shape():
    step = ladder.get("sm90/10")
    old = bench_record("sm90/10", 500.0, 700.0, "2030-01-01T00:00:00")
    new = bench_record("sm90/10", 600.0, 700.0, "2030-02-01T00:00:00")
    big = bench_record("sm90/10", 650.0, 700.0, "2030-01-15T00:00:00", shape=8192)
    other_config = dict(bench_record("sm90/10", 999.0, 700.0, "2030-03-01T00:00:00"),
                        config=dataclasses.asdict(step.config(stages=3)))
    other_step = bench_record("sm90/9", 998.0, 700.0, "2030-03-01T00:00:00")
    records = [dict(r, _file=f"results/x/{i}.json") for i, r in enumerate([old, new, big, other_config, other_step])]
    got = widgets.measured(records, step, step.default)
    assert [(m["shape"], m["tflops"]) for m in got] == [("4096x4096x4096", 600.0), ("8192x8192x8192", 650.0)]
    assert got[0]["ratio"] == pytest.approx(600 / 700, abs=1e-4) and got[0]["file"] == "results/x/1.json"
    assert [m["tflops"] for m in widgets.measured(records, step, step.config(stages=3))] == [999.0]
    assert widgets.measured(records, step, step.config(stages=3, cluster_n=2)) == []
    # a record written before a config field existed ran at the field's old value
    sk = ladder.get("sm90/11")
    legacy = bench_record("sm90/11", 610.0, 700.0, "2030-01-01T00:00:00")
    del legacy["config"]["gpc_order"]
    assert widgets.measured([legacy], sk, sk.default) == []  # the default now has gpc_order=True
    assert len(widgets.measured([legacy], sk, sk.config(gpc_order=False))) == 1


def _row(step, values, ok=True, **facts):
    step = ladder.get(step)
    config = step.config(**dict(zip((n for n, _ in step.knobs), values)))
    row = {"step": step.key, "target": step.target, "config": dataclasses.asdict(config), "ok": ok,
           "label": explorer_rows._label(config, [n for n, _ in step.knobs]), "reason": "" if ok else "too big </script>"}
    if ok:
        row.update(registers=90, smem_bytes=14336, local_bytes=0, stack_bytes=0, spills=False, threads=128,
                   tmem_columns=None, stages={}, ctas_per_sm=5, limiter=["registers"],
                   ctas_allowed={"registers": 5}, sass_instructions=100, mix={"tensor-core MMA": 8},
                   compile_s=0.5, measured=[], **facts)
    return row


def _table():
    step = ladder.get("sm90/2")
    rows = {widgets.config_key(step, v): _row(step, v, ok=v != (256, 64)) for v in itertools.product((64, 128, 256), (32, 64))}
    naive = ladder.get("sm90/1")
    rows[widgets.config_key(naive, (16, 16))] = _row(naive, (16, 16))
    steps = [{"key": s.key, "title": s.title, "target": s.target,
              "knobs": [{"name": n, "values": list(v), "labels": [str(x) for x in v]} for n, v in s.knobs],
              "default": list(widgets.knob_values(s, s.default))} for s in (naive, step)]
    return {"steps": steps, "rows": rows,
            "compiled": {"configurations": 6, "combinations": 7, "seconds": 1.0, "workers": 1, "records": 0}}


@pytest.mark.fast
def test_table_row_and_table_rows_look_configurations_up():
    table = _table()
    step = ladder.get("sm90/2")
    assert widgets.table_row(table, step, step.config(tile_n=128, tile_k=32))["label"] == "tile_n=128, tile_k=32"
    assert not widgets.table_row(table, step)["ok"]  # the default, 256 x 64, is the invalid one here
    rows = widgets.table_rows(table, "sm90/2")
    assert [r["label"] for r in rows] == [f"tile_n={n}, tile_k={k}" for n in (64, 128, 256) for k in (32, 64)]
    assert "invalid" in widgets.sweep_html(rows)


@pytest.mark.fast
def test_explorer_html_embeds_the_table_and_loads_nothing():
    table = _table()
    step = ladder.get("sm90/2")
    page = widgets.explorer_html(table, step, step.config(tile_n=64, tile_k=32))
    # one select per step of the table; knob selects are built by the script from the table
    options = re.findall(r'<option value="([^"]+)">', page)
    assert options == ["sm90/1", "sm90/2"]
    blob = re.search(r'<script type="application/json" class="gemm-explorer-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(blob) == table  # "</script>" inside a reason is escaped, and reads back
    assert page.count("</script>") == 2 and "<\\/script>" not in blob and "\\u003c/script>" in blob
    start = json.loads(re.search(r'data-start="([^"]+)"', page).group(1).replace("&quot;", '"'))
    assert start == {"step": "sm90/2", "values": [64, 32]}
    assert not re.search(r"https?://|//cdn|\bsrc=", page), "the static explorer must load nothing"
    # a step the table lacks: it starts at the table's first step, with that step's default
    start = json.loads(re.search(r'data-start="([^"]+)"', widgets.explorer_html(table, "sm100/5")).group(1)
                       .replace("&quot;", '"'))
    assert start == {"step": "sm90/1", "values": [16, 16]}


@pytest.mark.fast
def test_every_step_offers_its_knob_grid():
    """Both ladders, as the issue asks: sm90 and sm100 steps 1-12, each with knobs to pick."""
    assert [s.number for s in ladder.steps("sm90")] == list(range(1, 13))
    assert [s.number for s in ladder.steps("sm100")] == list(range(1, 13))
    assert all(s.knobs and list(s.knob_grid()) for s in ladder.steps())


# ---------------------------------------------------------------------------------------------
# compiled: the table's facts are the compiler's
# ---------------------------------------------------------------------------------------------


@pytest.mark.compile
def test_sass_many_is_sass_one_cubin_at_a_time():
    picks = [("sm90/1", {}), ("sm90/2", {"tile_n": 64, "tile_k": 32}), ("sm90/6", {}),
             ("sm100/3", {"tile_n": 128}), ("sm100/8", {})]
    arts = [arch.compile_step(ladder.get(k), ladder.get(k).config(**c)) for k, c in picks]
    for target in ("sm_90a", "sm_100a"):
        mine = [a for a in arts if a.target == target]
        for art, listing in zip(mine, inspect.sass_many([a.cubin for a in mine], target)):
            one = inspect.sass(art.cubin)
            assert inspect.opcodes(listing) == inspect.opcodes(one), art.step_key
            assert list(inspect.instruction_mix(listing).items()) == list(inspect.instruction_mix(one).items())
    assert inspect.sass_many([], "sm_90a") == []
    assert [name.startswith(".text.") for name, _ in inspect.code_sections(arts[0].cubin)] == [True]


STEPS = ("sm90/1", "sm90/3", "sm100/3")  # a SIMT step, a Hopper and a Blackwell tensor-core step


@pytest.fixture(scope="module")
def table():
    step = ladder.get("sm90/3")
    records = [dict(bench_record("sm90/3", 300.0, 600.0, "2030-01-01T00:00:00"), _file="results/x/a.json"),
               dict(bench_record("sm90/3", 310.0, 600.0, "2030-01-01T00:00:00", shape=8192), _file="results/x/a.json",
                    config=dataclasses.asdict(step.config(tile_n=128)))]
    return widgets.explorer_table(STEPS, records=records, workers=2)


@pytest.mark.compile
def test_explorer_table_has_every_knob_combination_of_its_steps(table):
    assert [s["key"] for s in table["steps"]] == list(STEPS)
    for key in STEPS:
        step = ladder.get(key)
        combos = list(itertools.product(*(v for _, v in step.knobs)))
        for values in combos:
            row = table["rows"][widgets.config_key(step, values)]
            config = step.config(**dict(zip((n for n, _ in step.knobs), values)))
            assert row["ok"] == step.check_config(config)[0], row
            assert row["ok"] or row["reason"]
        assert sum(r["ok"] for r in widgets.table_rows(table, step)) == len(list(step.knob_grid()))
    assert len(table["rows"]) == sum(len(list(itertools.product(*(v for _, v in ladder.get(k).knobs)))) for k in STEPS)
    json.dumps(table)  # plain JSON, for the page


@pytest.mark.compile
def test_explorer_table_rows_are_what_the_compiler_made(table):
    for row in table["rows"].values():
        if not row["ok"]:
            continue
        step = ladder.get(row["step"])
        config = step.config(**{n: row["config"][n] for n, _ in step.knobs})
        art = arch.compile_step(step, config, row["target"])
        rep = inspect.report(art)  # one cubin at a time, nvdisasm on the ELF: the chapters' way
        assert row["target"] == step.target
        assert (row["registers"], row["smem_bytes"], row["spills"]) == (rep.resources.registers, rep.smem_bytes,
                                                                        rep.resources.spills)
        assert row["mix"] == dict(rep.mix) and list(row["mix"]) == list(rep.mix)
        assert row["sass_instructions"] == rep.sass_lines
        assert row["threads"] == inspect.threads_per_cta(art.ptx) > 0
        columns = [c for c in inspect.tmem_alloc_columns(art.ptx) if isinstance(c, int)]
        assert row["tmem_columns"] == (max(columns) if step.arch == "sm100" else None)
        occ = sim.occupancy(row["registers"], row["threads"], row["smem_bytes"])
        if row["tmem_columns"]:
            assert row["ctas_per_sm"] == min(occ["ctas"], 512 // row["tmem_columns"])
        else:
            assert row["ctas_per_sm"] == occ["ctas"] and row["limiter"] == occ["limiter"]
        assert row["stages"] == {n: getattr(config, n) for n in ("stages", "acc_stages", "epi_stages", "clc_stages")
                                 if hasattr(config, n)}
    assert widgets.table_row(table, "sm100/3")["tmem_columns"] > 0


@pytest.mark.compile
def test_explorer_table_attaches_the_records_of_each_config(table):
    step = ladder.get("sm90/3")
    default = widgets.table_row(table, step)
    assert [(m["shape"], m["tflops"], m["ratio"]) for m in default["measured"]] == [("4096x4096x4096", 300.0, 0.5)]
    assert [m["shape"] for m in widgets.table_row(table, step, step.config(tile_n=128))["measured"]] == ["8192x8192x8192"]
    assert widgets.table_row(table, step, step.config(tile_n=64))["measured"] == []
    assert table["compiled"]["records"] == 2


@pytest.mark.compile
def test_worker_processes_and_this_process_agree(table):
    here = widgets.compile_rows([("sm100/3", [v], "sm_100a") for v in (64, 128, 256)], workers=1)
    for row in here:
        theirs = table["rows"][widgets.config_key("sm100/3", [row["config"]["tile_n"]])]
        assert {k: v for k, v in row.items() if k != "compile_s"} == \
            {k: v for k, v in theirs.items() if k not in ("compile_s", "measured")}


@pytest.mark.compile
def test_tile_explorer_shows_its_table_where_no_kernel_runs(table):
    e = widgets.TileExplorer("sm90/3", table=table)
    bundle = e._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # Jupyter: the live widget
    assert bundle["text/html"] == widgets.explorer_html(table, "sm90/3", e.config())  # the book: the table
    assert "text/html" not in widgets.TileExplorer("sm90/3")._repr_mimebundle_()
    # the live explorer's facts are the table's
    row = e.select(tile_n=128)
    same = widgets.table_row(table, "sm90/3", e.config())
    assert {k: v for k, v in row.items() if k != "compile_s"} == \
        {k: v for k, v in same.items() if k not in ("compile_s", "measured")}
    assert "CTA(s) per SM" in e.out.value


@pytest.mark.compile
def test_time_it_asks_the_plan_whether_the_size_runs(monkeypatch):
    """"time it" plans the chosen size with the chosen config (plan.for_problem, the rule run.prepare
    applies) and shows the plan's refusal instead of timing; a size the plan takes is timed."""
    from gemm_course.measure import bench
    from gemm_course.runtime import plan
    from gemm_course.runtime.problem import GemmInputError

    e = widgets.TileExplorer("sm90/3")
    monkeypatch.setattr(e, "can_time", lambda: True)  # as on an H100
    asked, timed = [], []

    def for_problem(step, problem, config=None, target=None):
        asked.append((step.key, problem.label, config))
        if problem.m == 8192:
            raise GemmInputError(f"{step.key} cannot compute {problem.label}: <too big>")

    monkeypatch.setattr(plan, "for_problem", for_problem)
    monkeypatch.setattr(bench, "bench_step", lambda step, problem, config, **kw: timed.append(problem) or
                        bench_record("sm90/3", 100.0, 400.0, "2030-01-01T00:00:00"))
    e.size_box.value = 8192
    assert e.time_it() is None and timed == []
    assert "sm90/3 cannot compute 8192x8192x8192: &lt;too big&gt;" in e.time_out.value
    assert asked == [("sm90/3", "8192x8192x8192", e.config())]
    e.size_box.value = 4096
    assert e.time_it() is not None and [p.m for p in timed] == [4096] and len(e.records) == 1

    def wrong(step, problem, config, **kw):
        raise bench.WrongOutput("sm90/3 4096x4096x4096: relative error nan <poison>")

    monkeypatch.setattr(bench, "bench_step", wrong)  # a config computing wrong values: shown, not kept
    assert e.time_it() is None and len(e.records) == 1 and "relative error nan &lt;poison&gt;" in e.time_out.value
