"""scripts/ncu_records.py: Nsight Compute text logs become typed records (the parsing lives here, not in the book)."""

import importlib.util
import json
import pathlib

import pytest

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ncu_records", ROOT / "scripts" / "ncu_records.py")
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)

LOG = """==PROF== header
  kernel_cutlass_kernel_gemm_coursekernelssm90step11_beyond_the_seedGemm_object_at_x (132, 1, 1)x(384, 1, 1), Context 1
    Section: GPU Speed Of Light Throughput
    Elapsed Cycles                cycle      200,000
    SM Active Cycles              cycle   190,000.50
    OPT   Tensor is the highest-utilized pipeline (91.5%) based on elapsed cycles in the workload
    dram__bytes_read.sum                                     Gbyte         2.74
    lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum   sector   57,178,656
    lts__t_sectors_srcunit_tex_op_read.sum                  sector   406,194,098
  nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT (2, 66, 1)x(384, 1, 1), Context 1
    Elapsed Cycles                cycle      210,000
    SM Active Cycles              cycle      200,000
    OPT   Shared is the highest-utilized pipeline (90.0%) based on elapsed cycles in the workload
    dram__bytes_read.sum                                     Mbyte       148.87
  some_other_kernel (1, 1, 1)x(32, 1, 1)
    lrc__average_xbar2gpc_sectors_op_read.sum                                                        (!) n/a
"""


def test_log_to_record(tmp_path):
    from gemm_course.measure import records

    path = tmp_path / "20261130T0510_ncu_lrc_test.txt"
    path.write_text(LOG)
    rec = tool.to_record(str(path), "NVIDIA H200")
    assert rec["kind"] == "ncu" and rec["date"].startswith("2026-11-30T05:10") and rec["source_log"] == path.name
    assert [k["kernel"] for k in rec["kernels"]] == ["step11", "nvjet (cuBLAS)"]  # a kernel without values is left out
    step, cublas = rec["kernels"]
    assert step["metrics"]["dram__bytes_read.sum"] == [2.74e9, "byte"]
    assert step["metrics"]["lts__t_sectors_srcunit_tex_op_read.sum"] == [406194098.0, "sector"]
    assert cublas["metrics"]["dram__bytes_read.sum"][0] == pytest.approx(148.87e6)
    (kernel, u), (other, v) = records.ncu_utilization(rec)
    assert (kernel, other) == ("step11", "nvjet (cuBLAS)")
    assert u == {"elapsed": 200000.0, "active": 190000.5, "pipe": "Tensor", "pipe_percent": 91.5} and v["pipe"] == "Shared"
    (name, counters), = records.coalescer_counters(rec)  # cuBLAS's block lacks two of the three counters
    assert name == "step11" and counters == {"merged": 57178656.0, "l2_lookups": 406194098.0, "dram": 2.74e9}


def test_committed_records_cover_the_cited_logs():
    logs = sorted(p.name for p in (ROOT / "results" / "logs").glob("*_ncu_*.txt"))
    sources = set()
    for path in (ROOT / "results").glob("*/*_ncu_logs.json"):
        sources |= {r["source_log"] for r in json.loads(path.read_text())["records"]}
    assert logs and set(logs) <= sources, set(logs) - sources
