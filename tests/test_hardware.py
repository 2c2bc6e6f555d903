"""One table of hardware facts (gemm_course.hardware): the kernels, rules, models and widgets read
it, under their old names, with the values they had; and the one stage-count rule."""

import dataclasses
import itertools
import types

import pytest

from gemm_course import hardware
from gemm_course.rules import decode_rule, tile_rule
from gemm_course.runtime import ladder
from gemm_course.teaching import sim, widgets

pytestmark = pytest.mark.fast


def test_the_table_holds_the_documented_facts():
    for t in (hardware.SM90A, hardware.SM100A):
        assert t.smem_per_cta == 232448 == 227 * 1024  # the opt-in maximum per CTA, both targets
        assert t.registers_per_sm == 65536
    assert (hardware.SM100A.tmem_lanes, hardware.SM100A.tmem_columns) == (128, 512)
    assert hardware.SM100A.tmem_bytes == 256 * 1024
    assert hardware.SM90A.tmem_columns == 0
    assert [c.sms for c in (hardware.H100_SXM, hardware.H200, hardware.B200)] == [132, 132, 148]
    assert [c.target for c in hardware.CARDS.values()] == ["sm_90a", "sm_90a", "sm_100a"]
    assert hardware.H200.limits is hardware.SM90A and hardware.B200.limits is hardware.SM100A
    assert hardware.target("sm90") is hardware.target("sm_90a") is hardware.SM90A
    with pytest.raises(KeyError):
        hardware.target("sm_80")


def test_measured_numbers_are_the_notes_and_none_where_nothing_ran():
    """NOTES.md's decode section takes its ceilings from these readings; the B200 has not run here."""
    assert (hardware.H100_SXM.measured_copy_tb_s, hardware.H100_SXM.measured_bf16_tflops) == (3.0, 798.0)
    assert (hardware.H200.measured_copy_tb_s, hardware.H200.measured_bf16_tflops) == (4.3, 788.0)
    assert hardware.B200.measured_copy_tb_s is None and hardware.B200.measured_bf16_tflops is None
    for c in hardware.CARDS.values():
        assert c.datasheet and (c.measured_copy_tb_s is None or c.measured)
        if c.measured_copy_tb_s:  # a reading is below the datasheet's ceiling
            assert c.measured_copy_tb_s < c.hbm_tb_s and c.measured_bf16_tflops < c.bf16_dense_tflops


def test_cards_are_found_by_the_drivers_names():
    assert hardware.card("NVIDIA H100 80GB HBM3") is hardware.H100_SXM
    assert hardware.card("NVIDIA H200") is hardware.H200
    assert hardware.card("NVIDIA B200") is hardware.B200
    assert hardware.card("H200") is hardware.H200
    for other in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA GB200", "NVIDIA A100-SXM4-80GB", "", None):
        assert hardware.card(other) is None


def test_stages_that_fit_counts_as_cutlass_does():
    assert hardware.stages_that_fit(32768, 19456, 232448) == 6  # (232448 - 19456) // 32768
    assert hardware.stages_that_fit(49152, 68608, 232448) == 3
    assert hardware.stages_that_fit(1000, 0, 1000) == 1 and hardware.stages_that_fit(1001, 0, 1000) == 0
    assert hardware.stages_that_fit(1000, 5000, 1000) == 0  # not even the fixed part fits
    assert hardware.stages_that_fit(1000, 100, 4000, occupancy=2) == 1  # (4000 // 2 - 100) // 1000
    with pytest.raises(ValueError):
        hardware.stages_that_fit(0, 0, 1000)


def test_the_old_names_read_the_table():
    from gemm_course.kernels.sm90 import step05_cluster_multicast, step06_warp_specialized, step08_persistent
    from gemm_course.kernels.sm100 import step02_tcgen05_tma, step05_cta_pair_multicast, step10_gilbert

    assert step05_cluster_multicast.SMEM_CAPACITY == hardware.SM90A.smem_per_cta
    assert step05_cta_pair_multicast.SMEM_CAPACITY == decode_rule.SMEM_CAPACITY == hardware.SM100A.smem_per_cta
    assert step06_warp_specialized.SM_REGISTERS == hardware.SM90A.registers_per_sm
    assert step08_persistent.H200_SMS == hardware.H200.sms == sim.H100_SMS == 132
    assert step10_gilbert.B200_SMS == sim.B200_SMS == hardware.B200.sms == 148
    assert step02_tcgen05_tma.TMEM_COLUMNS_PER_SM == widgets.TMEM_COLUMNS_PER_SM == 512
    assert sim.HOPPER_SM == {  # the table chapter 5's occupancy counts against, as it was typed
        "registers": 65536, "register_unit": 256, "smem_per_sm": 228 * 1024, "smem_per_cta": 227 * 1024,
        "smem_reserved_per_cta": 1024, "warps": 64, "ctas": 32, "source": "CUDA C++ Programming Guide, compute capability 9.0",
    }
    assert widgets.SM_LIMITS["sm_90a"] == sim.HOPPER_SM
    assert widgets.SM_LIMITS["sm_100a"] == dict(sim.HOPPER_SM, source="CUDA C++ Programming Guide, compute capability 10.0")


def test_tile_rule_stages_are_derived_and_unchanged():
    """The stage counts the tile rule used to type by hand, now counted from capacity: the same
    values, and each the most that fits by step 5's own count of shared memory."""
    from gemm_course.kernels.sm90.step05_cluster_multicast import SMEM_CAPACITY, smem_estimate

    assert tile_rule.STAGES == {256: (3, 128, 2), 192: (4, 96, 2), 128: (6, 32, 2)}
    assert tile_rule.LONG_K_STAGES == (4, 32, 2)
    for tile_n, (stages, epi_n, epi_stages) in list(tile_rule.STAGES.items()) + [(256, tile_rule.LONG_K_STAGES)]:
        def smem(s):
            return smem_estimate(types.SimpleNamespace(tile_m=tile_rule.TILE_M, tile_n=tile_n, tile_k=tile_rule.TILE_K,
                                                       stages=s, epi_n=epi_n, epi_stages=epi_stages))
        assert smem(stages) <= SMEM_CAPACITY < smem(stages + 1), tile_n


def test_sm100_max_stages_is_the_old_count():
    """Step 6's max_stages now asks stages_that_fit; the old ``1 + (capacity - one stage) // per stage``
    gives the same over every knob of the step."""
    from gemm_course.kernels.sm100 import step06_warp_specialized as step6
    from gemm_course.kernels.sm100.step05_cta_pair_multicast import SMEM_CAPACITY, smem_estimate

    base = ladder.get("sm100/6").default
    for tile_n, epi_n, epi_stages in itertools.product((64, 128, 256), (16, 32, 64), (1, 2, 4)):
        cfg = dataclasses.replace(base, tile_n=tile_n, epi_n=epi_n, epi_stages=epi_stages)
        one = smem_estimate(dataclasses.replace(cfg, stages=1))
        per_stage = smem_estimate(dataclasses.replace(cfg, stages=2)) - one
        assert step6.max_stages(cfg) == 1 + (SMEM_CAPACITY - one) // per_stage


def test_decode_rule_max_stages_is_the_old_count():
    for tile_m, tile_n in itertools.product((128, 256), decode_rule.TILE_NS):
        epi_n, epi_stages = decode_rule.epilogue(tile_n)
        fixed = decode_rule.smem_estimate(tile_m, tile_n, 0, epi_n, epi_stages)
        old = min(decode_rule.MAX_STAGES, (232448 - fixed) // ((tile_m + tile_n) * decode_rule.TILE_K * 2))
        assert decode_rule.max_stages(tile_m, tile_n, epi_n, epi_stages) == old


def test_the_rooflines_datasheet_reads_the_table():
    from gemm_course import viz

    assert viz.DATASHEET == {
        "H200": {"bf16_dense_tflops": 989.0, "fp32_tflops": 67.0, "hbm_tbs": 4.8, "source": "NVIDIA H200 datasheet (SXM)"},
        "H100": {"bf16_dense_tflops": 989.0, "fp32_tflops": 67.0, "hbm_tbs": 3.35, "source": "NVIDIA H100 datasheet (SXM)"},
        "B200": {"bf16_dense_tflops": 2250.0, "hbm_tbs": 8.0, "source": "NVIDIA B200 datasheet (HGX, per GPU)"},
    }
