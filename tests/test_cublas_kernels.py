"""Which kernels cuBLAS ran (``gemm_course.measure.cublas_kernels``, ``scripts/cublas_kernels.py``) and
chapter 12's table of the shapes where cuBLAS led (``viz.memory_roofline.cublas_wins``), from
synthetic records (never under results/)."""

from __future__ import annotations

import json

import pytest
from conftest import import_script
from test_viz_roofline import GPU, _bench

from gemm_course.measure import b200_records, cublas_kernels
from gemm_course.viz import memory_roofline as mr

pytestmark = pytest.mark.fast

# names cuBLAS ran on an H100 for decode shapes (scripts/cublas_kernels.py, results/logs/*cublas_kernels*)
SPLIT = "nvjet_sm90_tst_128x16_64x11_4x1_v_bz_splitK_TNT"
REDUCE = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>(cublasLt::cublasSplitKParams<float>)"
WHOLE = "nvjet_sm90_tst_112x128_64x7_2x1_v_bz_TNN"


def test_an_nvjet_name_reads_as_tile_stages_cluster_and_split():
    d = cublas_kernels.describe(WHOLE)
    assert (d["sm"], d["rows"], d["tokens"], d["tile_k"], d["stages"]) == (90, 112, 128, 64, 7)
    assert (d["cluster_rows"], d["cluster_tokens"], d["split_k"]) == (2, 1, False)
    assert cublas_kernels.describe(SPLIT)["split_k"] and cublas_kernels.describe(SPLIT)["cluster_rows"] == 4
    assert cublas_kernels.describe("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT")["tokens"] == 128
    for other in (REDUCE, "Memset (Device)", "sm90_xmma_gemm_bf16bf16_bf16f32"):
        assert cublas_kernels.describe(other) is None
    assert cublas_kernels.main_kernel([REDUCE, SPLIT])["name"] == SPLIT
    assert cublas_kernels.main_kernel(["Memset (Device)"]) is None
    assert cublas_kernels.summary(cublas_kernels.describe(SPLIT)) == "128 x 16, 11 x 64, 4 x 1, split-K"
    assert cublas_kernels.summary(None) == "-"


def _kernels(shape, names, date="2026-12-07T03:00:00", gpu=GPU):
    return {"kind": "cublas_kernels", "shape": dict(zip("mnk", shape)), "kernels": names, "gpu": gpu, "date": date,
            "_file": "results/x/20261207T030000Z_cublas_kernels.json"}


def test_the_newest_record_of_a_shape_on_the_gpu_is_kept():
    old = _kernels((256, 14336, 4096), [SPLIT], date="2026-12-06T00:00:00")
    new = _kernels((256, 14336, 4096), [WHOLE])
    elsewhere = _kernels((256, 14336, 4096), [SPLIT], date="2026-12-08T00:00:00", gpu="NVIDIA H200")
    kept = cublas_kernels.newest_per_shape([new, old, elsewhere], gpu=GPU)
    assert kept == {(256, 14336, 4096): new}


def test_the_table_lists_the_shapes_cublas_led_beyond_the_noise_slowest_first():
    run = [_bench("sm90/12", (256, 14336, 4096), 10.0, 9.0), _bench("sm90/12", (256, 6144, 4096), 10.0, 8.0),
           _bench("sm90/12", (16, 4096, 4096), 10.0, 9.9), _bench("sm90/12", (1, 4096, 4096), 10.0, 11.0)]
    table = mr.cublas_wins(run, [_kernels((256, 14336, 4096), [REDUCE, WHOLE])])
    lines = [line for line in table.splitlines() if line.startswith("| 2")]
    assert [line.split(" | ")[0] for line in lines] == ["| 256x6144x4096", "| 256x14336x4096"]  # 0.8, then 0.9
    assert "112 x 128, 7 x 64, 2 x 1, K whole" in lines[1] and "not listed" in lines[0]
    assert "1 more shapes at 0.97 to 1" in table  # 16 x 4096 x 4096 at 0.99: within the noise
    assert "W rows x tokens" in table.splitlines()[0]
    assert "cuBLAS's kernels: results/x/20261207T030000Z_cublas_kernels.json." in table
    assert "No record yet of cuBLAS's kernels" in mr.cublas_wins(run, [])
    assert "cuBLAS was faster by more than 3% on no shape" in mr.cublas_wins(run[2:], [])
    assert "No record yet" in mr.cublas_wins([], [])


def test_the_script_writes_a_record_per_shape_and_copy_takes_it(monkeypatch, tmp_path):
    script = import_script("cublas_kernels")
    monkeypatch.setattr(script, "kernels_of", lambda m, n, k: [REDUCE, SPLIT] if m < 64 else [WHOLE])
    monkeypatch.setattr(cublas_kernels, "record", lambda m, n, k, names, command: {
        "kind": "cublas_kernels", "shape": {"m": m, "n": n, "k": k}, "kernels": sorted(names), "gpu": "Fake GPU",
        "command": command, "date": "2026-12-07T00:00:00"})
    assert script.main(["--out", str(tmp_path / "out"), "16x4096x4096", "256x14336x4096"]) == 0
    (path,) = (tmp_path / "out").iterdir()
    written = json.loads(path.read_text())["records"]
    assert [r["shape"]["m"] for r in written] == [16, 256] and written[1]["kernels"] == [WHOLE]
    assert "$OUT" in written[0]["command"] and str(tmp_path) not in written[0]["command"]
    done = b200_records.copy_records(str(tmp_path / "out"), results_dir=str(tmp_path / "results"))
    assert [why for _, _, why in done] == ["copied"]  # no output to check, so no rel_error needed
