"""Protocol arithmetic and records (no GPU needed)."""

import json
import re

import pytest

from gemm_course.measure import bench, records, timing, user_loop
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem

pytestmark = pytest.mark.fast


def test_tflops():
    p = GemmProblem.square(4096)
    assert bench.tflops(p, 1.0) == pytest.approx(2 * 4096**3 / 1e-3 / 1e12)


def test_summarize_median_and_spread():
    s = bench.summarize([3.0, 1.0, 2.0, 10.0, 2.5])
    assert s["median"] == 2.5 and s["min"] == 1.0 and s["max"] == 10.0 and s["n"] == 5


def _record(step="sm90/3", m=4096, tf=300.0, date="2026-11-29T10:00:00+00:00", cfg=None):
    import dataclasses

    return {
        "kind": "bench", "step": step, "shape": {"m": m, "n": m, "k": m}, "gpu": "NVIDIA H200",
        "config": cfg or dataclasses.asdict(ladder.get(step).default), "date": date,
        "tflops": {"median": tf}, "cublas_tflops": {"median": 700.0}, "driver": "x", "cuda": "13.0",
        "torch": "2.11", "cutlass_dsl": "4.8.1", "protocol": {"rounds": 5, "repeats": 100},
    }


def test_records_round_trip_and_latest(tmp_path):
    old, new = _record(tf=100.0), _record(tf=200.0, date="2026-11-30T10:00:00+00:00")
    path = bench.write_records([old, new, _record(step="sm90/2")], "t", out_dir=str(tmp_path / "nvidia-h200"))
    with open(path) as f:
        assert len(json.load(f)["records"]) == 3
    with open(path) as f:  # one compact line per record between the header and the closing line
        assert len(f.read().splitlines()) == 3 + 2
    recs = records.load_records(str(tmp_path))
    assert len(recs) == 3
    best = records.latest(recs, "sm90/3", 4096, 4096, 4096)
    assert best["tflops"]["median"] == 200.0
    assert records.latest(recs, "sm90/3", 8192, 8192, 8192) is None
    assert "NVIDIA H200" in records.provenance(best) and "2026-11-30" in records.provenance(best)


def test_latest_ignores_other_configs(tmp_path):
    r = _record(cfg={"tile_m": 64, "tile_n": 128, "tile_k": 64})
    bench.write_records([r], "t", out_dir=str(tmp_path / "g"))
    assert records.latest(records.load_records(str(tmp_path)), "sm90/3", 4096, 4096, 4096) is None


def test_write_refuses_empty():
    with pytest.raises(ValueError):
        bench.write_records([], "t")


def test_committed_records_have_provenance():
    recs = records.load_records()
    unrecorded = {s.key for s in ladder.steps("sm90")} - {r["step"] for r in recs}
    assert not unrecorded, f"Hopper steps without a record under results/: {sorted(unrecorded)}"
    for r in recs:
        for key in ("gpu", "driver", "cuda", "torch", "cutlass_dsl", "date", "shape", "config", "protocol"):
            assert r.get(key) is not None, f"{r['_file']} lacks {key}"
        assert r["rel_error"] < 1e-2
        assert r["cublas_tflops"]["median"] > 0 and r["tflops"]["median"] > 0
    for r in records.load_records(kind=None):  # every kind: the book's results page prints their commands
        assert not re.search(r"(^|[\s=])/(tmp|work|home|root)/", str(r.get("command", ""))), (r["_file"], r["command"])


def test_a_records_command_names_no_output_folder():
    assert bench.provenance_command("python3 scripts/x.py", ["--out", "/tmp/r6", "--steps", "a b"]) == \
        "python3 scripts/x.py --out $OUT --steps 'a b'"


def test_compare_reverses_the_order_every_other_round(monkeypatch):
    """A block inherits the clock the previous block left, so no provider may always follow the same one."""
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(timing, "host_seconds_per_launch", lambda fn, launches: 1e-5)
    monkeypatch.setattr(timing, "time_block", lambda fn, launches, host: 1.0)
    monkeypatch.setattr(timing, "time_each", lambda fn, repeats, host: calls.append(fn()) or [1.0] * repeats)
    out = bench.compare({"step": lambda: "step", "cublas": lambda: "cublas"}, warmup=0, repeats=3, rounds=4)
    assert calls == ["step", "cublas", "cublas", "step", "step", "cublas", "cublas", "step"]
    assert all(len(v["each"]) == 12 for v in out.values())


@pytest.mark.fast
def test_broad_sweep_covers_the_classes():
    from gemm_course.measure import bench

    classes = bench.broad_sweep_shapes()
    assert {s[0] for s in classes["square"]} >= {2048, 3072, 6144, 7168, 10240, 12288, 16384}
    for m in bench.LLM_MS:  # every N and every K once for each M
        rows = [s for s in classes["llm"] if s[0] == m]
        assert sorted(n for _, n, _ in rows) == sorted(bench.LLM_NKS) == sorted(k for _, _, k in rows)
    few = classes["few-wave long-K"]
    assert {(m, n) for m, n, _ in few} >= {(m, n) for m in bench.FEW_WAVE_MNS for n in bench.FEW_WAVE_MNS}
    assert {k for _, _, k in few} >= set(bench.FEW_WAVE_KS)
    assert bench.shape_class(2304, 2304, 9216) == "few-wave long-K" and bench.shape_class(5, 5, 5) == "other"
    every = [s for group in classes.values() for s in group]
    assert len(every) == len(set(every)) == 46  # no shape in two classes


# ---- as a user's loop sees it: back to back, CUDA graphs, energy (a simulated GPU, tests/fake_gpu.py) ----


def test_b2b_launches_cover_the_seconds_within_bounds():
    assert bench.b2b_launches(0.5, 0.05) == 100
    assert bench.b2b_launches(12.0, 0.05) == bench.B2B_MIN_LAUNCHES  # a long kernel: at least ten
    assert bench.b2b_launches(0.001, 0.05) == bench.B2B_MAX_LAUNCHES


def test_back_to_back_keeps_the_host_in_the_loop(monkeypatch):
    """With no GPU sleep ahead, a launch path slower than the kernel sets the time per launch."""
    from fake_gpu import FakeGPU

    gpu = FakeGPU()
    gpu.install(monkeypatch)
    gpu_bound = bench.back_to_back(gpu.kernel(ms=0.2, watts=600.0, host_us=10.0), 100)
    assert gpu_bound["event_ms"] == pytest.approx(0.2, rel=1e-3)
    assert gpu_bound["wall_ms"] == pytest.approx(0.2 + 0.01 / 100, rel=1e-2)  # the first launch's host time
    host_bound = bench.back_to_back(gpu.kernel(ms=0.02, watts=600.0, host_us=30.0), 1000)
    assert host_bound["wall_ms"] == pytest.approx(0.030, rel=1e-2)
    assert host_bound["event_ms"] == pytest.approx(0.030, rel=2e-2)  # the gaps between kernels count


def test_energy_block_takes_power_between_counter_changes(monkeypatch):
    """The counter moves every 100 ms: reading it only before and after a 0.55 s block would miss up
    to a step's worth; between its changes, the power and the joules per GEMM are the kernel's."""
    from fake_gpu import FakeGPU

    gpu = FakeGPU(update_s=0.1, mhz_of=lambda watts: 1600.0 if watts else 1980.0)
    gpu.install(monkeypatch)
    gpu.now = gpu.free = 0.0371  # not on a counter step
    meter = bench.EnergyMeter(gpu.nvml, 0)
    block = bench.energy_block(gpu.kernel(ms=0.2, watts=650.0), 0.55, chunk=5, meter=meter)
    assert block["method"] == "counter changes" and block["changes"] >= 5
    assert block["power_w"] == pytest.approx(650.0, rel=1e-2)
    assert block["j_per_gemm"] == pytest.approx(650.0 * 0.2e-3, rel=1e-2)
    assert block["event_ms"] == pytest.approx(0.2, rel=1e-3)
    assert 0.25 < block["window_s"] < 0.55 and block["launches"] * 0.2e-3 == pytest.approx(0.55, rel=0.05)
    assert block["clocks_mhz"] and set(block["clocks_mhz"]) == {1600.0}  # sampled while the kernel ran
    # what the counter's readings around the block alone would say: several percent off
    whole = (gpu.counter_mj() - int(gpu.energy_j(0.0) * 1e3)) / 1e3 / block["launches"]
    assert abs(whole / block["j_per_gemm"] - 1) > 0.03


def test_energy_block_counts_the_gaps_of_a_slow_host(monkeypatch):
    from fake_gpu import FakeGPU

    gpu = FakeGPU(idle_w=100.0)
    gpu.install(monkeypatch)
    block = bench.energy_block(gpu.kernel(ms=0.02, watts=700.0, host_us=30.0), 0.5, chunk=50,
                               meter=bench.EnergyMeter(gpu.nvml, 0))
    # per 30 us launch: 20 us at 700 W and 10 us idle at 100 W
    assert block["j_per_gemm"] == pytest.approx(700.0 * 20e-6 + 100.0 * 10e-6, rel=2e-2)


def test_energy_block_without_two_counter_changes_reads_the_whole_block(monkeypatch):
    from fake_gpu import FakeGPU

    gpu = FakeGPU(update_s=0.001, idle_w=50.0)
    gpu.install(monkeypatch)
    gpu.update_s = 1e9  # the counter never moves during the block
    block = bench.energy_block(gpu.kernel(ms=0.5, watts=500.0), 0.2, chunk=2, meter=bench.EnergyMeter(gpu.nvml, 0))
    assert block["method"] == "whole block" and block["changes"] == 0 and block["j_per_gemm"] == 0.0
    fields = bench.energy_fields({"step": [block], "cublas": [dict(block, method="counter changes")]})
    assert "1 block(s) (step) saw fewer than two counter changes" in fields["energy_note"]


def test_energy_fields_average_rounds_and_take_the_median_clock():
    def block(j, mhz, window=0.4, launches=100, power=600.0):
        return {"j_per_gemm": j, "clocks_mhz": mhz, "window_s": window, "launches": launches, "power_w": power,
                "method": "counter changes"}

    fields = bench.energy_fields({"step": [block(0.1, [1700.0, 1750.0]), block(0.3, [1800.0])], "cublas": []},
                                 None)
    assert fields["energy_j_per_gemm"] == {"step": pytest.approx(0.2), "cublas": None}
    assert fields["energy_j_per_gemm_rounds"]["step"] == [0.1, 0.3]
    assert fields["sm_clock_mhz_median"]["step"] == 1750.0 and fields["energy_window_s"]["step"] == pytest.approx(0.8)
    assert fields["energy_launches"]["step"] == 200 and fields["energy_note"] is None


def test_open_meter_says_why_there_is_no_energy(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    meter, why = bench.open_meter()
    assert meter is None and "pynvml" in why and "not installed" in why

    class NVMLError(Exception):
        pass

    def not_supported(handle):
        raise NVMLError("Not Supported")

    fake = types.SimpleNamespace(nvmlInit=lambda: None, nvmlDeviceGetHandleByIndex=lambda i: f"gpu{i}",
                                 nvmlDeviceGetHandleByPciBusId=lambda bus: (_ for _ in ()).throw(NVMLError("no bus")),
                                 nvmlDeviceGetTotalEnergyConsumption=not_supported)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    meter, why = bench.open_meter()
    assert meter is None and "total-energy counter is not available" in why and "Not Supported" in why
    fake.nvmlDeviceGetTotalEnergyConsumption = lambda handle: 123456
    meter, why = bench.open_meter()
    assert why is None and meter.handle == "gpu0" and meter.energy_mj() == 123456
    assert meter.sm_clock_mhz() is None  # the fake has no clock query: None, not an error


def test_sustained_alternates_providers_and_records_energy_ratio(monkeypatch):
    """Step at 600 W and cuBLAS at 700 W, 0.5 ms each: the record's energy ratio is 6/7, its clocks
    each provider's, back-to-back times the kernels', and the order swaps every other round."""
    from fake_gpu import FakeGPU

    gpu = FakeGPU(mhz_of=lambda watts: {600.0: 1800.0, 700.0: 1600.0}.get(watts, 1980.0))
    gpu.install(monkeypatch)
    providers = {"step": gpu.kernel(0.5, 600.0, name="step"), "cublas": gpu.kernel(0.5, 700.0, name="cublas")}
    calls = []
    real_b2b = bench.back_to_back
    monkeypatch.setattr(user_loop, "back_to_back", lambda fn, n: calls.append(fn) or real_b2b(fn, n))
    out = bench.sustained(providers, {"step": 0.5, "cublas": 0.5}, b2b_seconds=0.02, b2b_rounds=2,
                          energy_seconds=0.4, energy_rounds=3, meter=bench.EnergyMeter(gpu.nvml, 0))
    assert [next(k for k, f in providers.items() if f is fn) for fn in calls] == ["step", "cublas", "cublas", "step"]
    assert out["b2b_launches"] == {"step": 40, "cublas": 40}
    assert out["b2b_event_ms"]["step"] == pytest.approx(0.5, rel=1e-3)
    assert out["energy_j_per_gemm"]["step"] == pytest.approx(600.0 * 0.5e-3, rel=2e-2)  # 600 W x 0.5 ms
    assert len(out["energy_j_per_gemm_rounds"]["cublas"]) == 3
    assert records.energy_ratio(out) == pytest.approx(600.0 / 700.0, rel=2e-2)
    assert out["sm_clock_mhz_median"] == {"step": 1800.0, "cublas": 1600.0}
    assert records.b2b_ratio(out) == pytest.approx(1.0, rel=2e-2) and out["energy_note"] is None
    assert "b2b_graph_ms" not in out


def test_sustained_without_nvml_records_none_and_why(monkeypatch):
    from fake_gpu import FakeGPU

    gpu = FakeGPU()
    gpu.install(monkeypatch)
    providers = {"step": gpu.kernel(0.1, 600.0), "cublas": gpu.kernel(0.1, 700.0)}

    def refused(fn_on, launches):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(user_loop, "graph_back_to_back",
                        lambda fn_on, launches: 0.09 if fn_on == "cublas" else refused(fn_on, launches))
    out = bench.sustained(providers, {"step": 0.1, "cublas": 0.1}, b2b_seconds=0.01, energy_seconds=0.5,
                          graph_providers={"step": "step", "cublas": "cublas"}, meter=None,
                          meter_note="no NVML: the pynvml module (nvidia-ml-py) is not installed")
    assert out["energy_j_per_gemm"] == {"step": None, "cublas": None} and records.energy_ratio(out) is None
    assert out["sm_clock_mhz_median"] == {"step": None, "cublas": None}
    assert "pynvml" in out["energy_note"]
    assert gpu.launched.count("kernel") == 2 * 2 * 100  # only the back-to-back blocks ran: two rounds of 100 each
    assert out["b2b_graph_ms"] == {"step": None, "cublas": 0.09}
    assert "step: RuntimeError: operation not permitted" in out["b2b_graph_note"]


def test_bench_step_records_the_new_fields_only_when_asked(monkeypatch):
    """bench_step's record on a CPU: inputs, the launcher, the timings and the user's-loop part faked."""
    import types

    import torch

    from gemm_course.runtime import run
    from gemm_course.runtime.problem import GemmProblem as P

    step = ladder.final("sm90")
    problem = P(128, 256, 64)

    def inputs(problem, device, seed):
        a, b = torch.randn(problem.m, problem.k).bfloat16(), torch.randn(problem.n, problem.k).bfloat16()
        return a, b, torch.empty(problem.m, problem.n, dtype=torch.bfloat16)

    class Launcher:
        def __init__(self, a, b, c):
            self.a, self.b, self.c, self.config = a, b, c, step.default

        def __call__(self):
            torch.mm(self.a, self.b.t(), out=self.c)

    seen = {}

    def fake_sustained(providers, per_launch_ms, *args):
        seen.update(providers=sorted(providers), per_launch_ms=per_launch_ms, args=args)
        return {"b2b_ms": {"step": 0.2, "cublas": 0.25}, "energy_j_per_gemm": {"step": None, "cublas": None},
                "energy_note": args[-1]}

    monkeypatch.setattr(bench, "make_inputs", inputs)
    monkeypatch.setattr(run, "prepare", lambda step, a, b, c, config: Launcher(a, b, c))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(bench, "clocks", lambda: None)
    monkeypatch.setattr(bench, "compare", lambda providers, *a: {
        name: {"each": [0.2 if name == "step" else 0.25] * 4, "seed_mean": 0.2, "host_launch_us": 20.0} for name in providers})
    monkeypatch.setattr(bench, "sustained", fake_sustained)
    monkeypatch.setattr(bench, "open_meter", lambda device=0: (None, "no NVML: test"))
    env = {"gpu": "Fake GPU"}
    plain = bench.bench_step(step, problem, env=env)
    assert not {k for k in plain if k.startswith(("b2b", "energy", "sm_clock", "host_launch_breakdown"))}
    assert "energy" not in plain["protocol"] and "b2b" not in plain["protocol"]
    rec = bench.bench_step(step, problem, env=env, b2b_seconds=0.05, energy_seconds=0.5, energy_rounds=3)
    assert seen["providers"] == ["cublas", "step"] and seen["per_launch_ms"] == {"step": 0.2, "cublas": 0.25}
    assert seen["args"][:5] == (0.05, 2, 0.5, 3, None)  # b2b seconds and rounds, energy's, no graph
    assert rec["energy_note"] == "no NVML: test" and rec["b2b_ms"] == {"step": 0.2, "cublas": 0.25}
    assert rec["protocol"]["energy"]["rounds"] == 3 and rec["protocol"]["b2b"]["graph"] is False
    assert rec["protocol"]["version"] == 3 and rec["ratio_to_cublas"] == pytest.approx(1.25)
    assert types.SimpleNamespace(**rec).rel_error < 1e-2


def test_bench_seconds_counts_every_launch():
    plain = bench.bench_seconds(1.0, 1.0, warmup=10, repeats=100, rounds=5, seed_launches=100, overhead_s=0.0)
    assert plain == pytest.approx(2.0 * (10 + 20 + 100 + 500) / 1e3)
    more = bench.bench_seconds(1.0, 1.0, warmup=10, repeats=100, rounds=5, seed_launches=100, overhead_s=0.0,
                               b2b_seconds=0.05, b2b_rounds=2, graph=True, energy_seconds=0.5, energy_rounds=2)
    # each provider: 2 rounds of 50 launches back to back, 2 x 50 in the graph, 2 energy blocks of 0.5 s
    assert more - plain == pytest.approx(2 * (0.1 + 0.1 + 1.0))


def test_host_launch_breakdown_times_each_part_and_checks_the_prebuilt_path(monkeypatch):
    import types

    import torch
    from fake_gpu import FakeGPU

    gpu = FakeGPU()
    gpu.install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    kernel = gpu.kernel(ms=0.01, watts=600.0, host_us=3.0)

    class Executor:
        def generate_execution_args(self, *args):
            gpu.now += 12e-6  # the DSL's Python argument handling
            return list(args), ["adapted"]

        def run_compiled_program(self, exe_args):
            kernel()

    class Compiled:
        def to(self, device):
            return Executor()

    class Launcher:
        operands, stream, artifacts = ("a", "b", "c"), "stream", types.SimpleNamespace(compiled=Compiled())

        def __call__(self):
            gpu.now += 12e-6
            kernel()

    checked = []
    out = bench.host_launch_breakdown(Launcher(), gpu.kernel(ms=0.01, watts=600.0, host_us=6.0),
                                      check=lambda fn: checked.append(fn) or 1e-3, launches=50, repeats=3)
    assert out["launcher"] == pytest.approx(15.0) and out["torch_mm"] == pytest.approx(6.0)
    assert out["execution_args"] == pytest.approx(12.0) and out["prebuilt"] == pytest.approx(3.0)
    assert out["call_arguments"] < 1.0 and out["prebuilt_rel_error"] == 1e-3 and len(checked) == 1
    assert out["note"] is None
    Launcher.artifacts = types.SimpleNamespace(compiled=object())  # a DSL without compiled.to
    out = bench.host_launch_breakdown(Launcher(), kernel, launches=10, repeats=1)
    assert out["prebuilt"] is None and "AttributeError" in out["note"] and out["launcher"] == pytest.approx(15.0)


# ---- the memory roofline (decode-sized GEMMs) ------------------------------------------------


@pytest.mark.fast
def test_datasheet_bandwidth_by_name():
    assert bench.datasheet_tb_s("NVIDIA H100 80GB HBM3") == 3.35
    assert bench.datasheet_tb_s("NVIDIA H100 PCIe") == 2.0
    assert bench.datasheet_tb_s("NVIDIA H200") == 4.8
    assert bench.datasheet_tb_s("NVIDIA B200") == 8.0
    assert bench.datasheet_tb_s("NVIDIA A100-SXM4-80GB") is None
    assert bench.datasheet_tb_s(None) is None


@pytest.mark.fast
def test_rotation_keeps_operands_out_of_l2():
    l2 = 50 * 2**20
    assert bench.rotation_sets(10 * 2**20, l2) == 15  # 3 L2s of 10 MiB sets
    assert bench.rotation_sets(2 * 2**30, l2) == 1  # a 2 GiB weight is its own rotation
    calls = []
    turn = bench.Rotation([lambda i=i: calls.append(i) for i in range(3)])
    for _ in range(7):
        turn()
    assert calls == [0, 1, 2, 0, 1, 2, 0]


@pytest.mark.fast
def test_bandwidth_fields_count_each_operand_once():
    problem = GemmProblem(128, 4096, 4096)
    assert problem.min_bytes == 2 * (128 * 4096 + 4096 * 4096 + 128 * 4096)
    f = bench.bandwidth_fields(problem, 0.0125, 0.01, "NVIDIA H100 80GB HBM3", copy=3.0)
    assert f["tb_s"] == pytest.approx(problem.min_bytes / 12.5e-6 / 1e12)
    assert f["cublas_tb_s"] == pytest.approx(problem.min_bytes / 10e-6 / 1e12)
    assert f["fraction_of_datasheet"] == pytest.approx(f["tb_s"] / 3.35)
    assert f["cublas_fraction_of_copy"] == pytest.approx(f["cublas_tb_s"] / 3.0)
    unknown = bench.bandwidth_fields(problem, 0.0125, 0.01, "some GPU")
    assert unknown["fraction_of_datasheet"] is None and unknown["fraction_of_copy"] is None


@pytest.mark.fast
def test_decode_class():
    from gemm_course.measure import records

    shapes = records.decode_shapes()
    layers = [nk for model in records.DECODE_LAYERS.values() for nk in model.values()]
    assert len(shapes) == 2 * len(layers) == len(set(shapes))
    assert all(m in records.DECODE_MS for m, _, _ in shapes)
    assert {(n, k) for m, n, k in shapes if m == 128} == set(layers)  # every layer at M = 128
    assert {m for m, _, _ in shapes} == set(records.DECODE_MS)  # every M at least once
    assert all(records.shape_class(*s) == "decode" for s in shapes)
    assert not set(shapes) & {s for group in records.broad_sweep_shapes().values() for s in group}
