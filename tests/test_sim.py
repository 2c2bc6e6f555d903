"""CPU models (chapter 3: shared-memory banks; chapters 5-8: occupancy, the stage pipeline, the
static persistent schedule; chapters 9-10: L2 reuse of tile orders).

The bank model reads byte offsets from the steps' real layouts; one test checks them against
the addresses the compiler itself emits for stores into the step's swizzled tile."""

import re

import numpy as np
import pytest

from gemm_course.rules import tile_order
from gemm_course.runtime import ladder
from gemm_course.teaching import sim

KEYS = (sim.ROW_MAJOR, "sm90/2", "sm90/3")
CM = "core-matrix column"


@pytest.mark.compile
@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("operand,rows", [("A", 64), ("B", 256)])
def test_offsets_cover_the_stage_buffer_once(key, operand, rows):
    off = sim.offsets(key, operand)
    assert off.shape == (rows, 64)
    assert sorted(off.ravel().tolist()) == list(range(0, rows * 64 * 2, 2))  # a bijection onto the buffer
    assert not off.flags.writeable


@pytest.mark.compile
def test_layouts_are_the_steps_own():
    assert sim.layout_text(sim.ROW_MAJOR) == "(64,64):(64,1)"
    assert sim.layout_text("sm90/2") == "S<0,4,3> o 0 o ((8,8),(8,8)):((8,64),(1,512))"
    assert sim.layout_text("sm90/3") == "S<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))"
    assert sim.layout_text("sm90/3", "B") == "S<3,4,3> o 0 o ((8,32),(64,1)):((64,512),(1,0))"


@pytest.mark.compile
def test_row_major_core_matrix_read_is_an_8_way_conflict():
    off = sim.offsets(sim.ROW_MAJOR)
    w = sim.conflicts(off, CM)
    assert (w.wavefronts, w.ideal, w.words, w.conflicts, w.ways) == (8, 1, 32, 7, 8)
    assert (sim.conflict_table(off, CM) == 8).all()  # every core matrix of the tile
    assert (sim.conflict_table(sim.offsets(sim.ROW_MAJOR, "B"), CM) == 8).all()
    assert (sim.bank_map(off)[:8, 0] == 0).all()  # 128-byte rows: every row starts in bank 0


@pytest.mark.compile
@pytest.mark.parametrize("operand", ["A", "B"])
def test_swizzled_layout_reads_core_matrices_and_rows_conflict_free(operand):
    off = sim.offsets("sm90/3", operand)
    assert sim.conflicts(off, CM) == sim.Wavefronts(1, 1, 32)
    assert (sim.conflict_table(off, CM) == 1).all()
    assert (sim.conflict_table(off, "row") == 1).all()
    assert sim.bank_map(off)[:8, 0].tolist() == [0, 4, 8, 12, 16, 20, 24, 28]  # row r starts in chunk r


LATER = [s.key for s in ladder.steps("sm90") if s.number > 3]


@pytest.mark.compile
@pytest.mark.parametrize("key", LATER)
def test_later_hopper_steps_keep_conflict_free_swizzled_operands(key):
    for operand in "AB":
        off = sim.offsets(key, operand)
        assert (sim.conflict_table(off, CM) == 1).all(), (key, operand)
        assert all(len(sim.segments(off, r)) == 1 for r in range(0, off.shape[0], 7)), (key, operand)


@pytest.mark.compile
@pytest.mark.parametrize("operand", ["A", "B"])
def test_interleaved_layout_reads_core_matrices_conflict_free_but_scatters_rows(operand):
    off = sim.offsets("sm90/2", operand)
    assert (sim.conflict_table(off, CM) == 1).all()  # a core matrix is 128 contiguous bytes
    assert off[:8, :8].ravel().tolist() == list(range(0, 128, 2))
    assert (sim.conflict_table(off, "row") == 8).all()  # a row's 8 chunks all sit in banks 0-3 (+4r)


@pytest.mark.compile
def test_a_tma_row_is_one_line_except_in_the_interleaved_layout():
    for key in (sim.ROW_MAJOR, "sm90/3"):
        for operand in "AB":
            for row in (0, 1, 9, 63):
                ((start, size),) = sim.segments(sim.offsets(key, operand), row)
                assert size == 128 and start == row * 128
    # interleaved: 8 separate 16-byte pieces, one per core matrix, tile_rows * 16 bytes apart
    for operand, gap in (("A", 64 * 16), ("B", 256 * 16)):
        segs = sim.segments(sim.offsets("sm90/2", operand), 9)
        assert [s for _, s in segs] == [16] * 8
        assert [b - a for (a, _), (b, _) in zip(segs, segs[1:])] == [gap] * 7
        assert segs[0][0] == 128 + 16  # row 9: second core matrix down, second row in it


@pytest.mark.compile
def test_xor_pattern_is_row_xor_chunk():
    table = sim.xor_pattern()
    assert table.shape == (8, 8)
    assert table.tolist() == [[r ^ c for c in range(8)] for r in range(8)]


@pytest.mark.compile
def test_bad_requests_are_refused():
    off = sim.offsets("sm90/3")
    with pytest.raises(ValueError, match="operand"):
        sim.offsets("sm90/3", "C")
    with pytest.raises(ValueError, match="no \\(rows, k\\) shared-memory layouts"):
        sim.offsets("sm90/1")
    with pytest.raises(ValueError, match="unknown pattern"):
        sim.conflicts(off, "diagonal")
    with pytest.raises(ValueError, match="leaves"):
        sim.conflicts(off, CM, row=60)


# ---- the offsets are the addresses the compiled kernel uses --------------------------------

COORDS = [(1, 0), (3, 8), (5, 40), (7, 63), (14, 17), (33, 26), (62, 51)]


def _bf16_bits(v: float) -> int:
    return int(np.array(v, dtype=np.float32).view(np.uint32)) >> 16


def _shared_store_addresses(ptx: str) -> dict:
    """Value stored -> shared address, evaluating the straight-line PTX with the buffer base at 0.

    The buffer is 1024-byte aligned, so the XOR/OR/AND on the low 10 bits commute with the base.
    """
    regs: dict = {}
    stores = {}
    ops = {"add": lambda a, b: a + b, "xor": lambda a, b: a ^ b, "or": lambda a, b: a | b, "and": lambda a, b: a & b}

    def val(tok):
        tok = tok.strip()
        if tok.startswith("%"):
            return regs.get(tok)
        return int(tok, 0)

    for line in ptx.splitlines():
        line = line.strip().rstrip(";")
        if m := re.match(r"mov\.\w+\s+(%\w+),\s*__dynamic_shmem__\d+$", line):
            regs[m[1]] = 0
        elif m := re.match(r"shfl\.sync\.idx\.b32\s+(%\w+),\s*(%\w+),", line):
            regs[m[1]] = regs.get(m[2])
        elif m := re.match(r"(add|xor|or|and)\.\w+\s+(%\w+),\s*([^,]+),\s*([^,]+)$", line):
            a, b = val(m[3]), val(m[4])
            regs[m[2]] = None if a is None or b is None else ops[m[1]](a, b)
        elif m := re.match(r"st\.shared\.b16\s+\[(%\w+)(?:\+(\d+))?\],\s*(0x[0-9A-Fa-f]+)$", line):
            stores[int(m[3], 16)] = regs[m[1]] + int(m[2] or 0)
    return stores


@pytest.mark.compile
@pytest.mark.parametrize("key", ["sm90/2", "sm90/3"])
def test_offsets_match_the_compiled_kernels_addresses(key, tmp_path):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor

    from gemm_course.runtime import arch
    from gemm_course.runtime.ladder import get

    step = get(key)
    gemm = step.load().Gemm(step.default)

    @cute.kernel
    def store_probe(out: cute.Tensor):
        layout, _ = gemm.make_smem_layouts()

        @cute.struct
        class Storage:
            sA: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, cute.cosize(layout)], 1024]

        storage = cutlass.memory.SmemAllocator().allocate(Storage)
        sA = storage.sA.get_tensor(layout.outer, swizzle=layout.inner)  # exactly as the step does
        for i, coord in enumerate(COORDS):
            sA[coord] = cutlass.BFloat16(float(i + 1))
        cute.arch.sync_threads()
        tidx, _, _ = cute.arch.thread_idx()
        out[tidx] = sA[(tidx, 0)]

    @cute.jit
    def host(out: cute.Tensor):
        store_probe(out).launch(grid=[1, 1, 1], block=[64, 1, 1], smem=9216)

    out = make_fake_tensor(cutlass.BFloat16, (64,), stride=(1,), assumed_align=16)
    _, ptx = arch.trace(host, out, target="sm_90a", keep_ptx=True)
    stores = _shared_store_addresses(ptx)
    off = sim.offsets(key)
    assert {_bf16_bits(i + 1.0): int(off[c]) for i, c in enumerate(COORDS)} == stores


@pytest.mark.compile
def test_calling_the_composed_layout_swizzles_elements_not_bytes():
    """Why offsets() recasts to bytes first: the layout's own call gives element 64 for (1, 0),
    while the kernel's swizzled pointer puts that element at byte 144 (element 72)."""
    import cutlass.cute as cute

    from gemm_course.runtime import arch
    from gemm_course.runtime.ladder import get

    step = get("sm90/3")
    gemm = step.load().Gemm(step.default)
    seen = {}

    @cute.jit
    def probe():
        layout, _ = gemm.make_smem_layouts()
        seen["call"] = layout((1, 0))

    arch.trace(probe, target="sm_90a")
    assert seen["call"] == 64
    assert sim.offsets("sm90/3")[1, 0] == 144


# ---- L2 reuse of tile orders ----------------------------------------------------------------


@pytest.mark.fast
def test_grouped_and_gilbert_touch_fewer_panels_than_row_raster():
    res = sim.compare_orders(32, 32, sms=132)
    got = {k: (r.waves, r.a_panels, r.b_panels) for k, r in res.items()}
    assert got == {
        "row": (8, 39, 256),  # each wave: ~4 tile rows, but all 32 B panels
        "column": (8, 256, 39),
        "grouped": (8, 88, 132),  # a wave is 8 rows x ~17 columns
        "gilbert": (8, 114, 106),
    }
    assert res["grouped"].panels < res["row"].panels and res["gilbert"].panels < res["row"].panels
    assert res["gilbert"].bytes < res["grouped"].bytes < res["row"].bytes  # B panels (256 wide) weigh double
    assert all(r.unique_a == r.unique_b == 32 for r in res.values())
    assert res["row"].min_bytes == 32 * (128 + 256) * 4096 * 2


@pytest.mark.fast
def test_l2_model_counts_per_wave():
    order = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2)]
    r = sim.l2_traffic(order, sms=2, tile_m=1, tile_n=1, k=1, elem_bytes=1)
    assert (r.waves, r.a_per_wave, r.b_per_wave) == (3, (1, 1, 1), (2, 2, 1))
    assert r.bytes == 8 and r.min_bytes == 6
    with pytest.raises(ValueError):
        sim.l2_traffic(order, sms=0)


# ---------------------------------------------------------------------------------------------
# shared-memory traffic of the main loop (chapter 10)
# ---------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_smem_traffic_of_the_final_tile_is_the_banks_bandwidth():
    t = sim.smem_traffic(128, 256)  # two warpgroups, wgmma 64 x 256 x 16
    assert (t.wgmma_read, t.tma_write, t.clocks) == (80 * 1024, 48 * 1024, 1024)
    assert t.bytes_per_clock == sim.SMEM_BYTES_PER_CLOCK == 128


@pytest.mark.fast
def test_smem_traffic_counts_a_b_slice_once_per_64_rows():
    one, two = sim.smem_traffic(64, 256), sim.smem_traffic(128, 256)
    assert two.wgmma_read == 2 * one.wgmma_read and two.clocks == 2 * one.clocks
    assert two.tma_write < 2 * one.tma_write  # TMA writes B once per tile, however many rows share it
    assert sim.smem_traffic(64, 256).bytes_per_clock == 160  # ping-pong: one warpgroup per tile
    assert sim.smem_traffic(128, 256, mma_n=128).wgmma_read > two.wgmma_read  # narrower wgmma re-reads A
    assert sim.smem_traffic(192, 256).bytes_per_clock < 128


@pytest.mark.fast
def test_smem_traffic_refuses_shapes_wgmma_cannot_tile():
    with pytest.raises(ValueError):
        sim.smem_traffic(96, 256)
    with pytest.raises(ValueError):
        sim.smem_traffic(128, 256, mma_n=96)


# ---------------------------------------------------------------------------------------------
# occupancy, the stage pipeline, the static persistent schedule
# ---------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_occupancy_arithmetic():
    four = sim.occupancy(154, 128, 51200)  # step 4: 160 regs x 32 = 5120 per warp -> 12 warps -> 3 CTAs
    assert four["registers_per_warp"] == 5120 and four["ctas"] == 3 and four["limiter"] == ["registers"]
    assert four["limits"]["shared memory"] == (228 * 1024) // (51200 + 1024)
    five = sim.occupancy(154, 256, 67584)
    assert five["ctas"] == 1 and five["warps_per_sm"] == 8
    six = sim.occupancy(168, 384, 215040, stages=4)
    assert six["ctas"] == 1 and set(six["limiter"]) == {"registers", "shared memory"} and six["k_tiles_in_flight"] == 4
    assert sim.occupancy(32, 128, 228 * 1024)["limits"]["shared memory"] == 0  # more than a CTA may have


@pytest.mark.fast
def test_pipeline_model_follows_the_protocol():
    serial = sim.pipeline_model(1, 4, load=3.0, mma=1.0, epilogue=0.0, issue=0.0)
    loads = [e for e in serial["events"] if e["kind"] == "load"]
    mmas = [e for e in serial["events"] if e["kind"] == "mma"]
    assert [e["start"] for e in loads] == [0.0, 4.0, 8.0, 12.0]  # each load waits for the previous release
    assert [e["start"] for e in mmas] == [e["end"] for e in loads]  # and the MMA waits for its load
    assert serial["mma_busy"] == pytest.approx(4 / 16)
    deep = sim.pipeline_model(4, 8, load=3.0, mma=1.0, epilogue=0.0, issue=0.0)
    assert deep["span"] == pytest.approx(3.0 + 8 * 1.0)  # after the fill the tensor cores never wait
    for e in deep["events"]:
        if e["kind"] == "mma":
            load = next(ld for ld in deep["events"] if ld["kind"] == "load" and ld["label"] == e["label"])
            assert e["start"] >= load["end"]
    two_ctas = sim.pipeline_model(4, 6, tiles_per_cta=1, ctas=2)
    one_cta = sim.pipeline_model(4, 6, tiles_per_cta=2, ctas=1)
    assert one_cta["span"] < two_ctas["span"] and len(two_ctas["cta_ends"]) == 1
    assert sum(e["kind"] == "epilogue" for e in one_cta["events"]) == 2
    with pytest.raises(ValueError):
        sim.pipeline_model(0, 4)


@pytest.mark.fast
def test_persistent_schedule_covers_every_tile_once():
    s = sim.persistent_schedule(4, 5, 6, tile_order.row_tile)
    assert s["tiles"] == 20 and s["clusters"] == 6 and s["waves"] == 4
    assert s["tiles_per_cluster"] == [4, 4, 3, 3, 3, 3] and s["last_wave_tiles"] == 2 and s["idle_in_last_wave"] == 4
    assert s["owner"][0, 0] == 0 and s["owner"][1, 1] == 0 and s["wave"][1, 1] == 1  # tile 6 = cluster 0's second
    small = sim.persistent_schedule(2, 2, 66, tile_order.row_tile)
    assert small["clusters"] == 4 and small["waves"] == 1 and small["idle_in_last_wave"] == 0
    with pytest.raises(ValueError, match="twice"):
        sim.persistent_schedule(2, 2, 2, lambda i, m, n: (0, 0))
