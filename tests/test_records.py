"""Record queries (gemm_course.measure.records) on synthetic records written to a temporary directory."""

import dataclasses
import json
import types

import pytest
from synthetic import bench_record, clocks_record, sweep_record, write_runs

from gemm_course.measure import bench, records
from gemm_course.runtime import ladder

pytestmark = pytest.mark.fast


def test_load_records_filters_by_kind_and_sorts_by_date(tmp_path):
    folder = tmp_path / "results" / "gpu"
    folder.mkdir(parents=True)
    docs = {"b.json": [{"kind": "bench", "date": "2030-01-02", "step": "x"}, {"kind": "clocks", "date": "2030-01-01"}],
            "a.json": [{"kind": "bench", "date": "2030-01-03", "step": "y"}]}
    for name, recs in docs.items():
        (folder / name).write_text(json.dumps({"schema": 1, "records": recs}))
    got = records.load_records(str(tmp_path / "results"))
    assert [r["step"] for r in got] == ["x", "y"]  # by date, not by file
    assert [r["_file"] for r in got] == ["results/gpu/b.json", "results/gpu/a.json"]
    assert [r["kind"] for r in records.load_records(str(tmp_path / "results"), kind=None)] == ["clocks", "bench", "bench"]
    assert records.load_records(str(tmp_path / "results"), kind="timeline") == []
    assert bench.load_records is records.load_records and bench.latest is records.latest  # where the chapters look


def test_shape_run_and_newest_run():
    rec = bench_record("sm90/3", 1.0, 2.0, "2030-01-01", shape=(8192, 4096, 512))
    assert records.shape_of(rec) == (8192, 4096, 512)
    assert records.run_of(rec) == "2030-01-01"  # never written: its date stands for the run
    assert records.run_of(dict(rec, _file="results/g/x.json")) == "results/g/x.json"
    runs = [{"_file": "r/20300101T000000Z_a.json", "i": 0}, {"_file": "r/20300102T000000Z_b.json", "i": 1},
            {"_file": "r/20300102T000000Z_b.json", "i": 2}]
    assert [r["i"] for r in records.newest_run(runs)] == [1, 2]
    assert records.newest_run([]) == []


def test_default_config_counts_fields_added_later_at_their_old_value():
    @dataclasses.dataclass
    class Config:
        tile_n: int = 256
        gpc_order: bool = False

    step = types.SimpleNamespace(default=Config())
    assert records.has_default_config({"config": {"tile_n": 256}}, step)  # written before gpc_order existed
    assert records.has_default_config({"config": {"tile_n": 256, "gpc_order": False}}, step)
    assert not records.has_default_config({"config": {"tile_n": 128}}, step)
    assert not records.has_default_config({"config": None}, step)
    final = ladder.get("sm90/11")  # gpc_order defaults to True: a record without the field ran without it
    legacy = {k: v for k, v in dataclasses.asdict(final.default).items() if k != "gpc_order"}
    assert not records.has_default_config({"config": legacy}, final)
    assert records.has_default_config({"config": dict(legacy, gpc_order=True)}, final)


def test_latest_picks_the_newest_matching_record():
    old = bench_record("sm90/3", 100.0, 400.0, "2030-01-01T00:00:00")
    new = bench_record("sm90/3", 200.0, 400.0, "2030-02-01T00:00:00")
    other_gpu = bench_record("sm90/3", 300.0, 400.0, "2030-03-01T00:00:00", gpu="Other GPU")
    tuned = dict(bench_record("sm90/3", 400.0, 400.0, "2030-04-01T00:00:00"), config={"tile_n": 128})
    recs = [new, old, other_gpu, tuned]
    assert records.latest(recs, "sm90/3", 4096, 4096, 4096, gpu="Synthetic GPU") is new
    assert records.latest(recs, "sm90/3", 4096, 4096, 4096) is other_gpu  # newest default config on any GPU
    assert records.latest(recs, "sm90/3", 4096, 4096, 4096, config={"tile_n": 128}) is tuned
    assert records.latest(recs, "sm90/3", 8192, 8192, 8192) is None
    assert records.latest(recs, "sm90/2", 4096, 4096, 4096) is None


def test_latest_per_step_has_every_step_of_the_ladder():
    rec = bench_record("sm90/4", 100.0, 400.0, "2030-01-01T00:00:00")
    per_step = records.latest_per_step([rec], "sm90", (4096, 4096, 4096))
    assert list(per_step) == [s.number for s in ladder.steps("sm90")]
    assert per_step[4] is rec and all(r is None for n, r in per_step.items() if n != 4)
    assert all(r is None for r in records.latest_per_step([rec], "sm90", (8192, 8192, 8192)).values())


def test_provenance_names_the_gpu_date_and_launches(tmp_path):
    (rec,) = write_runs(tmp_path, {"a": [bench_record("sm90/3", 1.0, 2.0, "2030-01-05T10:00:00")]})
    line = records.provenance(rec)
    assert "Synthetic GPU, 2030-01-05" in line and "median of 20 launches" in line and rec["_file"] in line


def test_geomean():
    assert records.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert records.geomean(iter([0.9, 1.0])) == pytest.approx(0.9 ** 0.5)
    with pytest.raises(ZeroDivisionError):
        records.geomean([])


def test_latest_sweep_is_the_newest_sweep_file_of_the_default_config(tmp_path):
    old = [sweep_record(4096, 4096, 4096, 0.5, "2030-01-01T00:00:00")]
    new = [sweep_record(4096, 4096, 4096, 0.9, "2030-02-01T00:00:00"),
           sweep_record(8192, 4096, 4096, 1.0, "2030-02-01T00:00:01")]
    tuned = [dict(sweep_record(4096, 4096, 4096, 2.0, "2030-03-01T00:00:00"), config={"tile_n": 128})]
    recs = write_runs(tmp_path, {"old_sweep": old, "new_sweep": new, "tuned_sweep": tuned,
                                 "ladder": [bench_record("sm90/10", 1.0, 2.0, "2030-04-01")]})
    sweep = records.latest_sweep(recs, "sm90/10")
    assert sorted(r["ratio_to_cublas"] for r in sweep) == pytest.approx([0.9, 1.0])
    assert len({r["_file"] for r in sweep}) == 1 and "new_sweep" in sweep[0]["_file"]
    assert records.latest_sweep(recs, "sm90/9") == []
    final = [sweep_record(4096, 4096, 4096, 1.1, "2030-05-01T00:00:00", step=ladder.final("sm90").key)]
    assert records.latest_sweep(recs + write_runs(tmp_path / "f", {"final_sweep": final})) != []  # default step


def test_sweep_summary():
    sweep = [sweep_record(4096, 4096, 4096, 0.9, "2030-02-01"), sweep_record(8192, 4096, 4096, 1.0, "2030-02-01")]
    sweep[0]["tflops"]["seed_mean"] = 0.8 * sweep[0]["cublas_tflops"]["seed_mean"]
    summary = records.sweep_summary(sweep)
    assert summary["ratios"] == pytest.approx([0.9, 1.0]) and summary["seed_ratios"] == pytest.approx([0.8, 1.0])
    assert summary["geomean"] == pytest.approx(0.9 ** 0.5) and summary["seed_geomean"] == pytest.approx(0.8 ** 0.5)
    assert (summary["at_or_above"], summary["shapes"]) == (1, 2)


def test_step_table_and_spread_verdict_are_generated_from_records(tmp_path):
    old = bench_record("sm90/6", 100.0, 200.0, "2030-01-01T00:00:00")
    old["tflops"].update(p10=95.0, p90=105.0)
    recs = write_runs(tmp_path, {"a": [old, bench_record("sm90/7", 103.0, 200.0, "2030-01-01T00:00:01"),
                                       bench_record("sm90/7", 120.0, 200.0, "2030-01-01T00:00:02", shape=8192)]})
    table = records.step_table(recs, ("sm90/6", "sm90/7"))
    assert "| sm90/6 | 100 TFLOP/s (95-105), 0.50 of cuBLAS | no record |" in table
    assert "x1.03 vs sm90/6" in table and "| sm90/7 |" in table
    verdict = records.spread_verdict(recs, "sm90/7", "sm90/6")
    assert "4096^3: sm90/7's median is inside sm90/6's p10-p90 range (ratio of medians 1.030)" in verdict
    assert "8192^3: no record of sm90/6 yet" in verdict


def test_power_limit_split_factors_the_ratio_into_clock_and_work_per_clock():
    recs = [clocks_record("sm90/10", 4096, 650.0, 1470.0, 690.0), clocks_record("cublas", 4096, 660.0, 1500.0, 690.0),
            clocks_record("sm90/10", 4096, 652.0, 1470.0, 690.0),
            clocks_record("sm90/10", 4096, 700.0, 1600.0, 600.0, file="run2")]  # no cuBLAS in run2: left out
    rows = records.power_limit_split(recs)
    assert len(rows) == 1
    row = rows[0]
    assert (row["shape"], row["step"], row["file"]) == ("4096x4096x4096", "sm90/10", "run1")
    assert row["step_values"]["tflops"] == pytest.approx(651.0)  # the step's two runs averaged
    assert row["ratio"] == pytest.approx(651.0 / 660.0)
    assert row["clock_ratio"] == pytest.approx(1470.0 / 1500.0)
    assert row["clock_ratio"] * row["per_clock_ratio"] == pytest.approx(row["ratio"])


def test_order_energy_points_pair_each_steps_order_with_its_joules():
    cfg = {"tile_m": 128, "tile_n": 256, "cluster_m": 2, "cluster_n": 1, "group": 8}
    recs = [dict(clocks_record(step, 8192, tflops, 1400.0, 690.0), config=cfg, sm_count=132)
            for step, tflops in (("sm90/8", 660.0), ("sm90/9", 690.0), ("sm90/10", 688.0), ("cublas", 670.0))]
    points = {p["step"]: p for p in records.order_energy_points(recs)}
    assert set(points) == {"sm90/8", "sm90/9", "sm90/10"}  # cuBLAS has no order of its own
    assert points["sm90/8"]["joule_per_tflop"] == pytest.approx(690.0 / 660.0)
    # the row raster's waves span whole rows of the 32 x 32 cluster-tile grid: more panels than either blocked order
    assert points["sm90/8"]["model_gb"] > points["sm90/10"]["model_gb"] > points["sm90/9"]["model_gb"]


def test_config_changes_names_what_a_record_ran_besides_its_steps_default():
    current = dataclasses.asdict(ladder.get("sm90/8").default)
    assert records.config_changes({"step": "sm90/8", "config": current}) == {}
    old = dict(current, epi_n=128, stages=3, stream_k=True)  # step 8 as recorded before the re-cut
    assert records.config_changes({"step": "sm90/8", "config": old}) == {"epi_n": 128, "stages": 3, "stream_k": True}
    variant = dict(dataclasses.asdict(ladder.get("sm90/10").default), mma_n=128)
    assert records.config_changes({"step": "sm90/10:mma_n=128", "config": variant}) == {"mma_n": 128}
    final = {k: v for k, v in dataclasses.asdict(ladder.get("sm90/11").default).items() if k != "gpc_order"}
    assert records.config_changes({"step": "sm90/11", "config": final}) == {"gpc_order": False}  # a legacy field


def _tuning(tmp_path, rows, name="tune_x"):
    import gzip

    folder = tmp_path / "results" / "tuning"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{name}.json.gz", "wt") as f:
        json.dump({"what": "a synthetic A/B", "command": "none", "rows": rows}, f)
    return str(tmp_path / "results")


def test_ab_changes_and_table_read_an_ab_run(tmp_path):
    rows = [{"shape": "4096x4096x4096", "variant": v, "median_ms": ms}
            for v, ms in (("new", 1.0), ("old", 1.1), ("cublas", 1.0), ("new", 2.0), ("old", 1.9))]
    rows.append({"shape": "8192x8192x8192", "variant": "new", "median_ms": 8.0})  # no "old" here: left out
    where = _tuning(tmp_path, rows)
    tune = records.load_tuning("tune_x", where)
    assert tune["_file"] == "tune_x.json.gz" and records.load_tuning("tune_x.json.gz", where)["what"] == "a synthetic A/B"
    assert records.load_tuning("absent", where) is None
    changes = records.ab_changes(tune, "new", "old")
    assert list(changes) == ["4096x4096x4096"]
    assert changes["4096x4096x4096"] == pytest.approx([0.1, -0.05])  # repetitions in run order
    table = records.ab_table([("tune_x", "new", "old"), ("absent", "new", "old")], where)
    assert "| 4096x4096x4096 | +10.0%, -5.0% |" in table
    assert f"| geometric mean | {(1.1 * 0.95) ** 0.5 - 1:+.1%} |" in table
    assert "a synthetic A/B" in table and "Not found under results/tuning/: absent" in table
    assert records.ab_table([("absent", "new", "old")], where).startswith("No A/B run")


def test_a_patch_of_results_dir_reaches_every_reader(tmp_path, monkeypatch):
    """records.RESULTS_DIR is read only in records itself (its readers and writer stay there when the
    queries moved beside it): a patch of it, or of the flat name, moves all of them."""
    import os

    import gemm_course
    from gemm_course.measure import ab_runs, hardware_counters, record_queries, sweep_shapes, sweeps

    assert not any(hasattr(m, "RESULTS_DIR") for m in (ab_runs, hardware_counters, record_queries, sweep_shapes, sweeps))
    rows = [{"shape": "4096x4096x4096", "variant": v, "median_ms": ms} for v, ms in (("new", 1.0), ("old", 1.1))]
    where = _tuning(tmp_path, rows)
    for target in (records, "gemm_course.records"):
        monkeypatch.undo()
        if isinstance(target, str):
            monkeypatch.setattr(f"{target}.RESULTS_DIR", where)
        else:
            monkeypatch.setattr(target, "RESULTS_DIR", where)
        path = records.write_records([bench_record("sm90/3", 1.0, 2.0, "2030-01-05T10:00:00")], "t")
        assert path.startswith(where) and gemm_course.records.RESULTS_DIR == where
        assert [r["_file"].split("/")[0] for r in records.load_records()] == ["results"]
        assert records.load_tuning("tune_x")["what"] == "a synthetic A/B"
        assert "| 4096x4096x4096 | +10.0% |" in records.ab_table([("tune_x", "new", "old")])
        os.remove(path)


def test_ncu_readers_take_the_typed_records():
    """The chapters read Nsight Compute results as ``kind: ncu`` records, never the text logs."""
    from gemm_course.measure import bench, records

    recs = bench.load_records(kind="ncu")
    lrc = records.ncu_runs(recs, "ncu_lrc_gpc_order_8192x4096x28672")
    assert len(lrc) == 1
    (k1, v1), (k2, v2), (k3, v3) = records.coalescer_counters(lrc[0])
    assert (k1, k2, k3) == ("step10", "step10", "nvjet (cuBLAS)")
    assert v2["merged"] > v1["merged"] and v3["merged"] > v2["merged"]  # the GPC order merges more; cuBLAS most
    sol = records.ncu_runs(recs, "ncu_sm90-10_cublas_4096_final")
    (kernel, u), (cublas, uc) = records.ncu_utilization(sol[0])
    assert kernel == "step10" and cublas == "nvjet (cuBLAS)" and 0.5 < u["active"] / u["elapsed"] <= 1
    assert records.ncu_utilization({"kernels": [{"kernel": "x", "metrics": {}}]}) == []


def test_roofline_points_come_from_the_newest_records():
    from gemm_course.measure import bench, records

    recs = bench.load_records()
    points = records.roofline_points(recs, "sm90", 4096)
    labels = [p["label"] for p in points]
    assert labels[0] == "sm90/2" and labels[-1] == "cuBLAS" and "sm90/11" in labels
    assert all(p["tflops"] > 0 and p["intensity"] > 1000 for p in points)  # 4096^3 moves each byte ~1365 times
    ratio = records.sustained_clock_ratio([records.latest(recs, "sm90/11", 8192, 8192, 8192)])
    assert ratio is not None and 0.5 < ratio <= 1.0
    assert records.sustained_clock_ratio([]) is None
    mhz = records.sustained_clock_mhz([records.latest(recs, "sm90/11", 8192, 8192, 8192)])
    assert mhz is not None and 1000 < mhz <= 1980 and records.sustained_clock_mhz([]) is None


def _broad(m, n, k, ratio, date, **config):
    step = ladder.final("sm90")
    rec = sweep_record(m, n, k, ratio, date, step=step.key)
    rec["config"].update(config)
    rec["config_source"] = records.CHOSEN_PER_SHAPE
    return rec


def test_broad_sweep_takes_each_shapes_newest_record_of_its_order(tmp_path):
    first = [_broad(2048, 2048, 2048, 0.9, "2030-01-01T00:00:00"), _broad(1024, 1024, 8192, 0.8, "2030-01-01T00:00:01")]
    again = [_broad(1024, 1024, 8192, 0.85, "2030-01-02T00:00:00", tile_n=128, cluster_m=1, cluster_n=2)]
    other = [_broad(2048, 2048, 2048, 0.7, "2030-01-03T00:00:00")]
    given = [dict(_broad(3072, 3072, 3072, 1.5, "2030-01-04T00:00:00", tile_n=64), config_source="given")]
    recs = []
    for i, (tag, rows) in enumerate({"broad_sweep": first, "broad_sweep_reversed": other}.items()):
        recs += write_runs(tmp_path / str(i), {tag: rows})
    recs += write_runs(tmp_path / "2", {"broad_sweep": again + given})
    forward = records.broad_sweep(recs)
    assert [(records.shape_of(r), r["ratio_to_cublas"]) for r in forward] == [
        ((2048, 2048, 2048), pytest.approx(0.9)), ((1024, 1024, 8192), pytest.approx(0.85))]  # sweep order, newest
    assert [r["ratio_to_cublas"] for r in records.broad_sweep(recs, order="reversed")] == [pytest.approx(0.7)]
    assert records.latest_sweep(recs) == forward  # the book's sweep is the broad one
    classes = records.sweep_classes(forward)
    assert classes["square"]["shapes"] == 1 and classes["few-wave long-K"]["lowest"] == pytest.approx(0.85)
    assert classes["all"]["geomean"] == pytest.approx((0.9 * 0.85) ** 0.5) and classes["all"]["triton_geomean"] is None
    assert records.sweep_classes([]) == {} and records.broad_sweep([]) == []


def test_the_committed_broad_sweep_ran_what_the_rule_chooses_today():
    """Every shape of both committed H200 broad sweeps ran the tile, pipeline and cluster that
    ``tile_rule`` picks for it now (66 clusters): a rule change must re-measure the shapes it moves
    (``scripts/gpu_broad_sweep.sh OUT ORDER SHAPE...``)."""
    from gemm_course.rules import tile_rule

    h200 = [r for r in records.load_records() if r.get("gpu") == "NVIDIA H200"]
    for order in records.BROAD_SWEEP_ORDERS:
        sweep = records.broad_sweep(h200, order=order)
        assert len(sweep) == sum(len(v) for v in bench.broad_sweep_shapes().values())
        for r in sweep:
            choice = tile_rule.choose(*records.shape_of(r), 66)
            assert {f: r["config"][f] for f in choice._fields} == choice._asdict(), (order, records.shape_of(r))
            assert r["rel_error"] < 1e-2 and "triton" in r["peers"]


def test_a_b200_broad_sweep_is_shown_for_the_final_blackwell_step(tmp_path):
    """What the B200 kit writes (the final Blackwell step over the broad sweep, both orders) is what
    the results page draws for Blackwell; the Hopper sweep is not mixed in."""
    from gemm_course import viz

    final = ladder.final("sm100").key
    shapes = [s for group in bench.broad_sweep_shapes().values() for s in group][:5]
    forward = [bench_record(final, 1500.0 + i, 1500.0, f"2027-01-01T00:00:0{i}", shape=s, gpu="NVIDIA B200")
               for i, s in enumerate(shapes)]
    backward = [bench_record(final, 1400.0, 1500.0, "2027-01-01T00:01:00", shape=s, gpu="NVIDIA B200") for s in shapes]
    hopper = [bench_record("sm90/11", 700.0, 700.0, "2027-01-01T00:00:00", shape=s) for s in shapes]
    recs = write_runs(tmp_path, {"broad_sweep": forward + hopper, "broad_sweep_reversed": backward})
    assert final == "sm100/11"
    sweep = records.latest_sweep(recs, final)
    assert [records.shape_of(r) for r in sweep] == shapes and {r["step"] for r in sweep} == {final}
    table = records.sweep_class_table(recs, final)
    assert "| forward | all | 5 |" in table and "| reversed | all | 5 | 0.933 |" in table
    fig = viz.sweep_ratios(recs, final)
    assert len(fig.axes[0].collections) >= 1 and "No sweep" not in fig.caption
    assert viz.sweep_ratios(recs[:0], final).caption == "No sweep of sm100/11 recorded."


def _energy(m, n, k, ratio, step_mj, cublas_mj, date, **extra):
    """A broad-sweep record of the final step with energy per GEMM and back-to-back times."""
    rec = _broad(m, n, k, ratio, date)
    rec.update({"energy_j_per_gemm": {"step": step_mj / 1e3, "cublas": cublas_mj / 1e3},
                "sm_clock_mhz_median": {"step": 1700.0, "cublas": 1600.0},
                "b2b_ms": {"step": 0.1, "cublas": 0.1 * ratio}, "b2b_graph_ms": {"step": 0.1, "cublas": 0.12},
                "energy_note": None, "host_launch_us": {"step": 25.0, "cublas": 8.0}, **extra})
    return rec


def test_energy_and_b2b_ratios_of_one_record():
    rec = _energy(2048, 2048, 2048, 0.9, 2.0, 2.5, "2030-01-01")
    assert records.energy_ratio(rec) == pytest.approx(0.8)  # step / cuBLAS: below 1 the step uses less
    assert records.clock_ratio(rec) == pytest.approx(1700.0 / 1600.0)
    assert records.b2b_ratio(rec) == pytest.approx(0.9)  # cuBLAS / step, as ratio_to_cublas
    assert records.b2b_ratio(rec, "b2b_graph_ms") == pytest.approx(1.2)
    old = _broad(2048, 2048, 2048, 0.9, "2030-01-01")  # written before energy existed
    assert records.energy_ratio(old) is None and records.b2b_ratio(old) is None and records.clock_ratio(old) is None
    missing = dict(rec, energy_j_per_gemm={"step": None, "cublas": None}, energy_note="no NVML")
    assert records.energy_ratio(missing) is None and records.b2b_ratio(missing) == pytest.approx(0.9)


def test_energy_classes_are_geometric_means_of_per_shape_ratios():
    sweep = [_energy(2048, 2048, 2048, 0.9, 2.0, 2.5, "2030-01-01"),  # square: 0.8
             _energy(4096, 4096, 4096, 1.0, 10.0, 8.0, "2030-01-01"),  # square: 1.25
             _energy(1024, 1024, 8192, 0.8, 3.0, 2.0, "2030-01-01"),  # few-wave: 1.5
             dict(_energy(2304, 2304, 9216, 0.9, 1.0, 1.0, "2030-01-01"), energy_j_per_gemm=None)]  # no energy
    classes = records.energy_classes(sweep)
    assert set(classes) == {"square", "few-wave long-K", "all"}
    assert classes["square"]["energy_geomean"] == pytest.approx(1.0)  # sqrt(0.8 x 1.25), not their mean 1.025
    assert (classes["square"]["energy_lowest"], classes["square"]["energy_highest"]) == (pytest.approx(0.8), pytest.approx(1.25))
    assert classes["few-wave long-K"]["shapes"] == 1 and classes["few-wave long-K"]["records"] == 2
    assert classes["all"]["energy_geomean"] == pytest.approx((0.8 * 1.25 * 1.5) ** (1 / 3))
    assert classes["square"]["b2b_geomean"] == pytest.approx((0.9 * 1.0) ** 0.5)
    assert classes["square"]["time_geomean"] == pytest.approx((0.9 * 1.0) ** 0.5)
    assert records.energy_classes([]) == {}


def test_energy_sweep_reads_the_energy_files_and_the_class_table_shows_them(tmp_path):
    plain = {"broad_sweep": [_broad(2048, 2048, 2048, 0.9, "2030-01-01T00:00:00")],
             "broad_sweep_reversed": [_broad(2048, 2048, 2048, 0.95, "2030-01-01T00:01:00")]}
    recs = []
    for i, (tag, rows) in enumerate(plain.items()):
        recs += write_runs(tmp_path / str(i), {tag: rows})
    table = records.sweep_class_table(recs)
    assert table.startswith("| order | class |") and "Energy per GEMM" not in table  # old records: no energy table
    assert records.energy_class_table(recs) == "" and records.energy_sweep(recs) == []
    energy = {"broad_sweep_energy": [_energy(2048, 2048, 2048, 0.9, 2.0, 2.5, "2030-01-02T00:00:00"),
                                     _energy(1024, 1024, 8192, 0.8, 3.0, 2.0, "2030-01-02T00:00:01")],
              "broad_sweep_energy_reversed": [_energy(2048, 2048, 2048, 0.9, 2.2, 2.0, "2030-01-02T00:01:00")]}
    for i, (tag, rows) in enumerate(energy.items()):
        recs += write_runs(tmp_path / f"e{i}", {tag: rows})
    assert [records.shape_of(r) for r in records.energy_sweep(recs)] == [(2048, 2048, 2048), (1024, 1024, 8192)]
    assert [records.energy_ratio(r) for r in records.energy_sweep(recs, order="reversed")] == [pytest.approx(1.1)]
    assert [r["ratio_to_cublas"] for r in records.broad_sweep(recs)] == [pytest.approx(0.9)]  # the energy files stay apart
    table = records.sweep_class_table(recs)
    assert "Energy per GEMM from NVML's total-energy counter" in table
    assert "| forward | square | 1 of 1 | 0.800 | 0.800 - 0.800 | 1.062 | 0.900 | 0.900 | 1.200 |" in table
    assert "| forward | few-wave long-K | 1 of 1 | 1.500 |" in table
    assert f"| forward | all | 2 of 2 | {(0.8 * 1.5) ** 0.5:.3f} |" in table and "| reversed | all | 1 of 1 | 1.100 |" in table
