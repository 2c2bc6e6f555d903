"""Reading SASS listings and opcode counts (no compiler needed: the listings are written here)."""

import pytest

from gemm_course.teaching import inspect

pytestmark = pytest.mark.fast

SASS = """
        /*0000*/                   MOV R1, RZ ;
.L_x_0:
        /*0010*/                   LDG.E.U16 R2, desc[UR4][R4.64] ;
        /*0020*/                   LDG.E.U16 R3, desc[UR4][R6.64] ;
        /*0030*/                   FFMA R0, R2, R3, R0 ;
        /*0040*/               @P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0050*/                   BRA.U UP0, `(.L_x_1) ;
        /*0060*/                   EXIT ;
"""

NESTED = """
.L_x_0:
        /*0000*/                   LDG.E R2, desc[UR4][R4.64] ;
.L_x_1:
        /*0010*/                   FFMA R0, R2, R3, R0 ;
        /*0020*/                   FFMA R0, R2, R3, R0 ;
        /*0030*/               @P1 BRA `(.L_x_1) ;
        /*0040*/               @P0 BRA `(.L_x_0) ;
.L_x_2:
        /*0050*/                   BRA `(.L_x_3) ;
.L_x_3:
        /*0060*/                   EXIT ;
"""


def test_sass_loops_finds_backward_branches():
    loops = inspect.sass_loops(SASS)
    assert [lp["label"] for lp in loops] == [".L_x_0"]  # the one-instruction self-branch is dropped
    assert loops[0]["opcodes"] == {"LDG.E.U16": 2, "FFMA": 1, "BRA": 1}
    assert len(loops[0]["lines"]) == 4


def test_sass_loops_innermost_first_and_forward_branches_ignored():
    loops = inspect.sass_loops(NESTED)
    assert [lp["label"] for lp in loops] == [".L_x_1", ".L_x_0"]
    assert loops[0]["opcodes"] == {"FFMA": 2, "BRA": 1}
    assert loops[1]["opcodes"] == {"LDG.E": 1, "FFMA": 2, "BRA": 2}
    assert (loops[1]["start"], loops[1]["end"]) == (0, 5)


def test_opcode_family_counts_by_base_opcode():
    ops = {"STG.E": 64, "STSM.16.M88.4": 16, "UTMASTG.2D": 8, "STS": 3}
    counts = inspect.opcode_family_counts(ops, {"global": ("STG",), "stmatrix": ("STSM",), "tma": ("UTMASTG",)})
    assert counts == {"global": 64, "stmatrix": 16, "tma": 8}  # STS is not STSM: whole base opcodes only
    assert inspect.opcode_family_counts(ops, {"shared": ("STS", "STSM")}) == {"shared": 19}
    assert inspect.opcode_family_counts(ops, {"none": ()}) == {"none": 0}


def test_sass_classes_are_readable():
    assert inspect.classify("HGMMA.64x256x16.F32.BF16") == "tensor-core MMA"
    assert inspect.classify("UTCHMMA") == "tensor-core MMA"
    assert inspect.classify("UTMALDG.2D") == "TMA copy"
    assert inspect.classify("LDTM.16dp256bit.x8") == "tensor memory"
    assert inspect.classify("SYNCS.EXCH.64") == "barrier/sync"
    assert inspect.classify("STG.E") == "global load/store"
