"""Write the chapter notebooks (notebooks/*.ipynb) from this file, without outputs.

    .venv/bin/python scripts/make_notebooks.py            # all chapters
    .venv/bin/python scripts/make_notebooks.py 02         # chapters whose file name starts with 02

Notebooks stay thin: prose, calls into gemm_course, plots. No kernel is defined in a cell
(CuTeDSL reads kernel source from .py files), no measured number is typed: figures and numbers come
from results/ records, the compiled kernels, or the kernels' own CuTe objects.
Cells tagged ``hide-cell`` (solutions) are folded in the book and still run under nbval.
"""

from __future__ import annotations

import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str, tags=()):
    cell = new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


SETUP = """
%matplotlib inline
from IPython.display import HTML, Markdown, display

from gemm_course import arch, bench, ladder, viz

machine = arch.machine()
GPU_ARCH = arch.TARGET_ARCH.get(machine.target)  # 'sm90' / 'sm100' with a course GPU here, else None
print(machine.describe())
"""


def source_cell(expr: str) -> str:
    return f'display(Markdown("```python\\n" + {expr} + "\\n```"))'


# ---------------------------------------------------------------------------------------------
# chapter 0
# ---------------------------------------------------------------------------------------------

CH0 = [
    md("""
# Chapter 0: the CuTe mental model

**Learning objectives.** After this chapter you can

* read a layout `shape:stride` as a function from coordinates to offsets, and evaluate one by hand;
* explain why tiling (`local_tile`, `flat_divide`) makes *views*, and what `None` in a tile coordinate keeps;
* recognise *atoms*, CuTe's objects for one hardware operation (an MMA, a copy), and read their thread-value layouts;
* tell compile-time values (`Constexpr`, static layouts) from run-time values;
* compile a tiny CuTeDSL kernel on a laptop and read its PTX.

**Runs on.** Any machine. Without a GPU every cell runs: CuTe's layout algebra is evaluated while
CuTeDSL *traces* a function, and kernels compile for `sm_90a` and `sm_100a`. On a GPU the last
section also runs the tiny kernel and checks it against torch.

The small `@cute.jit` demo functions live in `gemm_course/cute_basics.py`: CuTeDSL reads a jit
function's source from its file, so notebooks call functions and never define kernels.
"""),
    code(SETUP),
    md("""
## 1. A tensor is an engine and a layout

A CuTe tensor pairs an **engine**, where the data starts (a pointer into global, shared or tensor
memory, a register array, or a counting iterator), with a **layout**, a function from logical
coordinates to offsets. A layout is written `shape:stride`. For a rank-2 layout
`(M, N):(s0, s1)` the element at coordinate `(i, j)` lives at offset `i*s0 + j*s1`.

`cute_basics.layout_table` builds a layout inside a traced function and asks CuTe for the offset of
every coordinate; the figure draws exactly those numbers.
"""),
    code("""
from gemm_course import cute_basics

row_major = cute_basics.layout_table((4, 8), (8, 1))
col_major = cute_basics.layout_table((4, 8), (1, 4))
i, j = 2, 3
assert row_major["offsets"][i][j] == i * 8 + j * 1
assert col_major["offsets"][i][j] == i * 1 + j * 4
print(f"row-major {row_major['text']}: ({i}, {j}) -> {row_major['offsets'][i][j]}")
print(f"col-major {col_major['text']}: ({i}, {j}) -> {col_major['offsets'][i][j]}")
viz.layout_grid(row_major, highlight=[(i, j)])
"""),
    code("""
viz.layout_grid(col_major, highlight=[(i, j)])
"""),
    md("""
**Layouts nest.** A mode can itself be a (shape, stride) pair. In `((2,2),(2,4)):((1,4),(2,8))` the
row coordinate `i` (0..3) splits into `(i % 2, i // 2)` with strides `(1, 4)`, and the column `j`
(0..7) into `(j % 2, j // 2)` with strides `(2, 8)`. (CuTe splits *colexicographically*: the
leftmost sub-mode varies fastest.) Chapter 2's shared-memory layouts are written this way: 8 x 8
"core matrices" of 128 contiguous bytes, arranged by an outer layout.
"""),
    code("""
nested = cute_basics.layout_table(((2, 2), (2, 4)), ((1, 4), (2, 8)))
i, j = 2, 3
by_hand = (i % 2) * 1 + (i // 2) * 4 + (j % 2) * 2 + (j // 2) * 8
assert nested["offsets"][i][j] == by_hand
print(f"{nested['text']}: ({i}, {j}) -> {by_hand}; size {nested['size']}, cosize {nested['cosize']}")
viz.layout_grid(nested, highlight=[(i, j)])
"""),
    md("""
## 2. Tiling makes views

`local_tile`, `flat_divide` and friends never copy: they return a new tensor, the same engine
with a new layout. To *see* which elements a view covers we tile an **identity tensor**, whose
engine counts coordinates, so every element is its own `(row, col)`.

How to read `tensor<(4,8) o (4,4):(1@0,1@1)>`: an identity tensor that starts at coordinate
`(4, 8)`, has shape `(4, 4)`, and steps by 1 in coordinate 0 along mode 0 (`1@0`) and by 1 in
coordinate 1 along mode 1 (`1@1`).
"""),
    code("""
views = cute_basics.tiling_views(rows=8, cols=12, tile=(4, 4), coord=(1, 2))
for name in ("whole", "local_tile", "local_tile_none", "local_tile_proj", "flat_divide", "zipped_divide"):
    print(f"{name:>16}: {views[name]}")

tile = views["local_tile_coords"]
assert tile[0][0] == (4, 8) and tile[3][3] == (7, 11)  # tile (1, 2) of 4x4 tiles
assert views["local_tile_none_shape"] == (4, 4, 3)  # None kept the tile-column mode: all 3 tiles of row 1
assert views["flat_divide_shape"] == (4, 4, 2, 3)  # (tile rows, tile cols, tiles down, tiles across)
"""),
    code("""
grid = cute_basics.layout_table((8, 12), (12, 1))
viz.layout_grid(grid, title="local_tile(t, (4, 4), (1, 2)) covers the outlined elements",
                highlight=[cell for row in tile for cell in row])
"""),
    md("""
**`None` keeps a mode.** `local_tile(t, (4, 4), (1, None))` picks tile row 1 and keeps *every*
tile column as a third mode: shape `(4, 4, 3)`. The kernels of this course tile A exactly like
that: `cute.local_tile(mA, (bM, bN, bK), (bidx, bidy, None), proj=(1, None, 1))`. The tiler has
three modes (M, N, K); `proj` drops N (A has no N), and `None` keeps all K tiles, so the CTA gets
its `(bM, bK, k_tiles)` slice of A and walks `k_tiles` in its main loop. That is
`local_tile_proj` above.
"""),
    md("""
## 3. Atoms describe hardware operations

An **MMA atom** is one matrix-multiply instruction as an object: how many threads cooperate
(`ThrID`), the shape it computes (`Shape MNK`), and for each operand a **TV layout** mapping
(thread, value) to a position in the operand's tile. A **copy atom** does the same for one data
movement instruction. Below: the SIMT FMA atom (one thread, 1x1x1), a 128-bit copy of 8 bf16, and
the wgmma 64x256x16 tiled MMA exactly as the course's Hopper step 2 builds it (traced for `sm_90a`).
"""),
    code("""
atoms = cute_basics.atoms()
for name, text in atoms.items():
    print(f"--- {name}\\n{text}\\n")
assert "(64,256,16)" in atoms["wgmma_64x256x16"] and "128:1" in atoms["wgmma_64x256x16"]
"""),
    md("""
Read the wgmma's `TV Layout C: ((4,8,4),(2,2,32)):((128,1,16),(64,8,512))` as a function of
(thread, value) to the index `m + 64*n` of the 64 x 256 accumulator: 128 threads (4 x 8 x 4) each
hold 128 values (2 x 2 x 32). Chapter 2 evaluates this function for every thread and draws it.
"""),
    md("""
## 4. Compile time and run time

While CuTeDSL traces a function, a value is either **static** (a Python int, known now: tile
sizes, `Constexpr` arguments, layouts built from them) or **dynamic** (an MLIR value, known when
the kernel runs: problem sizes, `Int32` arguments). Static values let the compiler unroll loops,
size register arrays and fold address math; dynamic ones keep one compiled kernel valid for every
M, N and K. CuTe prints a dynamic value as `?`, with what it knows about it (`{div=8}`: a multiple of 8).
"""),
    code("""
facts = cute_basics.static_vs_dynamic(tile=8)
for key, value in facts.items():
    print(f"{key:>28}: {value}")
assert facts["is_static((tile, 4))"] and not facts["is_static((tile, n))"]
assert facts["n (Int32 argument)"] == "?" and facts["tile (Constexpr argument)"] == "8"
"""),
    md("""
## 5. A tiny kernel, compiled on this machine

`y = alpha * x + y`: a `@cute.kernel` (device code) and a `@cute.jit` host function that launches
it. `compile_tiny` compiles it against *fake* tensors (dtype, symbolic length and alignment, no
data) for a chosen target and returns the PTX.
"""),
    code(source_cell("cute_basics.AXPY_SOURCE")),
    code("""
ptx = {t: cute_basics.compile_tiny(t) for t in ("sm_90a", "sm_100a")}
for t, text in ptx.items():
    lines = text.splitlines()
    print(f"{t}: {len(lines)} lines of PTX, {next(l for l in lines if l.startswith('.target'))}")
    assert f".target {t}" in text

body = [l.strip() for l in ptx["sm_90a"].splitlines() if any(op in l for op in ("ld.global", "fma.rn", "st.global"))]
print("\\n".join(body))
assert any("fma.rn.f32" in l for l in body)
"""),
    md("""
Two global loads, one fused multiply-add, one store: the body of the kernel, with the bounds check
(`if i < size(x)`) turned into a predicate. Later chapters read the same way, one level lower, in
SASS (the machine code that `nvdisasm` prints from the cubin).
"""),
    code("""
if machine.has_gpu:
    import torch

    x = torch.randn(1000, device="cuda")
    y = torch.randn(1000, device="cuda")
    expected = 2.0 * x + y
    cute_basics.axpy(x, y, 2.0)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expected)
    print(f"axpy on {machine.gpu_name}: matches torch")
else:
    print("No GPU here: the kernel compiled above, nothing runs.")
"""),
    md("""
## Try it yourself

1. Give the stride that makes a `(4, 8)` layout column-major.
2. Predict the offset of coordinate `(3, 5)` in `((2,2),(2,4)):((1,4),(2,8))`.

Replace each `...` and run the cell; the checks ask CuTe.
"""),
    code("""
from gemm_course import exercises

your_stride = ...  # a tuple of two ints
your_offset = ...  # an int
exercises.attempt(exercises.check_column_major_stride, your_stride)
exercises.attempt(exercises.check_offset, ((2, 2), (2, 4)), ((1, 4), (2, 8)), (3, 5), your_offset)
"""),
    code("""
# Solution
assert exercises.attempt(exercises.check_column_major_stride, (1, 4))
i, j = 3, 5
assert exercises.attempt(exercises.check_offset, ((2, 2), (2, 4)), ((1, 4), (2, 8)), (i, j),
                         (i % 2) * 1 + (i // 2) * 4 + (j % 2) * 2 + (j // 2) * 8)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* A layout is a function `coordinate -> offset`; `shape:stride` says how, and modes nest.
* Tiling returns views: the same data under a new layout. `None` in a tile coordinate keeps a
  mode; `proj` drops one. The kernels get their CTA's `(bM, bK, k_tiles)` slice of A this way.
* Atoms are hardware instructions as objects, with TV layouts saying which thread holds what.
* Static values (tiles, layouts) are known while tracing; problem sizes stay dynamic.
* Everything in this chapter ran without a GPU, including compiling a kernel for two architectures.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 1
# ---------------------------------------------------------------------------------------------

CH1 = [
    md("""
# Chapter 1: the naive GEMM

**Learning objectives.** After this chapter you can

* read the naive CuTeDSL kernel: one thread per element of C, walking all of K;
* check a kernel against a float32 reference (on a GPU);
* count the loads per multiply-add in its SASS and turn them into arithmetic intensity;
* place it on a roofline and say why it is slow;
* read its measured throughput next to cuBLAS, with where and when it was measured.

**Runs on.** CPU only: everything but the correctness check and the live timing (compile for
`sm_90a` and `sm_100a`, SASS, roofline, recorded results). GPU (H100/H200 or B200): additionally
checks the kernel against torch and times it against cuBLAS in the same process.
"""),
    code(SETUP),
    code("""
import inspect as pyinspect

from gemm_course import exercises
from gemm_course import inspect as gi
from gemm_course.kernels import naive
from gemm_course.problem import GemmProblem

step = ladder.get((GPU_ARCH or "sm90", 1))
problem = GemmProblem.square(4096)
records = bench.load_records()
print(step, f"| {len(records)} bench records under results/")
"""),
    md("""
## 1. The kernel

Every kernel of the course computes `C = A @ B.T` with A `(M, K)` and B `(N, K)` in bf16, both
K-major, and C `(M, N)` in bf16 (see `gemm_course/problem.py`). The naive kernel gives each thread
one element of C: it loads `A[m, k]` and `B[n, k]` for every k, multiplies in float32, and stores
once at the end.
"""),
    code(source_cell("pyinspect.getsource(naive)")),
    md("""
## 2. Is it right? (GPU)

Fresh random-normal inputs (never zeros), an output poisoned with NaN (so an unwritten element
shows), and a float32 reference: `run.check` reports the relative Frobenius error for shapes
the step accepts, including ragged ones.
"""),
    code("""
if GPU_ARCH:
    from gemm_course import run

    for result in run.check(step, run.shapes_for(step, count=4), seed=0):
        print(result)
        assert result.ok
else:
    print("No GPU here: the correctness check runs on a GPU (tests/test_gpu.py does the same).")
"""),
    md("""
## 3. Why it is slow: count what the loop does

The problem itself is friendly: the arithmetic intensity if A, B and C each cross DRAM once.
"""),
    code("""
print(f"{problem.label}: {problem.flops:.3e} FLOP; at least {problem.min_bytes / 1e6:.1f} MB of DRAM traffic; "
      f"{problem.arithmetic_intensity:.0f} FLOP per byte")
"""),
    md("""
The kernel is not. Compile it for Hopper and find its main loop in the SASS: the K loop,
unrolled by 4 (`cutlass.range(..., unroll=4)`), between a label and the branch back to it.
"""),
    code("""
art = arch.compile_step(ladder.get("sm90/1"), target="sm_90a")
loop = exercises.naive_hot_loop("sm_90a")
print(f"main loop {loop['label']}: {loop['end'] - loop['start']} instructions per trip")
print("\\n".join(loop["lines"]))
"""),
    code("""
ops = loop["opcodes"]
loads = sum(n for op, n in ops.items() if op.startswith("LDG"))
fmas = sum(n for op, n in ops.items() if op.split(".")[0] in exercises.FMA_OPCODES)
load_bytes = 2  # LDG.E.U16: one bf16 per load
naive_intensity = (2 * fmas) / (loads * load_bytes)  # 2 FLOP per FMA
print(f"{loads} loads and {fmas} FMA per trip: {naive_intensity:g} FLOP per byte requested from memory")
assert loads > fmas > 0
"""),
    md("""
Nothing is reused inside a thread: every FMA needs one fresh element of A and one of B, two
bytes each. That intensity is a property of the code, not of the machine. Put it on a roofline:
the roof is the lower of the tensor-core peak and intensity x memory bandwidth, and the dashed
roof is the peak of plain fp32 FMAs, which is all this kernel uses (datasheet values, quoted in
`viz.DATASHEET`; nothing on this plot is measured unless a marker is filled).

Caches soften this: the 16 threads of a warp that share a row `m` read the same `A[m, k]` (one
broadcast) and L2 catches many re-reads of B across CTAs, so less than this reaches DRAM and a measured point may sit above the
"every load from DRAM" marker. What does not change: no tensor core is used (the instruction mix
below has no MMA), and every FMA costs two load instructions plus address math.
"""),
    code("""
h200 = viz.DATASHEET["H200"]
points = [
    {"label": "naive: every load from DRAM", "intensity": naive_intensity},
    {"label": "the GEMM, A/B/C moved once", "intensity": problem.arithmetic_intensity},
]
recorded = bench.latest(records, "sm90/1", problem.m, problem.n, problem.k)
if recorded:
    points.append({"label": f"naive, measured on {recorded['gpu']}", "intensity": naive_intensity,
                   "tflops": recorded["tflops"]["median"]})
viz.roofline(problem, h200["bf16_dense_tflops"], h200["hbm_tbs"], points, machine_label=f"H200, {h200['source']}",
             ceilings={"fp32 FMA, no tensor cores": h200["fp32_tflops"]})
"""),
    md("""
## 4. The instruction mix, on both architectures

Static counts (instructions in the binary, not executed): global loads, integer address math and
FMAs; no tensor-core MMA, no shared memory. On `sm_100a` the compiler fuses the bf16-to-fp32
conversion into the multiply-add (`FHFMA.BF16`); on `sm_90a` it converts with shifts first.
"""),
    code("""
reports = {t: gi.report(arch.compile_step(ladder.get("sm90/1"), target=t)) for t in ("sm_90a", "sm_100a")}
assert any(op.startswith("FHFMA") for op in exercises.naive_hot_loop("sm_100a")["opcodes"])
assert not any(op.startswith("FHFMA") for op in exercises.naive_hot_loop("sm_90a")["opcodes"])
for r in reports.values():
    print(r, "\\n")
    assert "tensor-core MMA" not in r.mix
viz.instruction_mix({f"naive, {t}": r for t, r in reports.items()}, title="Naive kernel: static SASS instruction mix")
"""),
    md("""
## 5. How fast is it?

Bars: the newest record of each step at 4096^3 under `results/`, measured by the project's
bench (`gemm_course.bench`: warm-up, CUDA events per launch, cuBLAS timed interleaved in the same
run, in rounds whose order alternates so neither kernel always runs right after the other); the
caption says where and when. Hatched bars are the seed series' B200 figures, quoted, not
measured here. When no record exists yet the chart says so.
"""),
    code("""
viz.ladder_bars(records, arch=GPU_ARCH or "sm90")
"""),
    code("""
if GPU_ARCH:
    live = bench.bench_step(step, problem, repeats=20, rounds=3, command="notebooks/01_naive.ipynb")
    print(f"live: {live['tflops']['median']:.2f} TFLOP/s, cuBLAS {live['cublas_tflops']['median']:.0f} TFLOP/s "
          f"in the same run, rel. error {live['rel_error']:.1e}")
    display(viz.ladder_bars(records, arch=GPU_ARCH, live=[live]))
else:
    print("No GPU here: the bars above are the recorded measurements.")
"""),
    md("""
## Try it yourself

1. The arithmetic intensity of an 8192 x 8192 x 1024 GEMM if A, B and C each cross DRAM once
   (FLOP per byte, bf16).
2. Compile for Blackwell and count: how many global loads per FMA in the naive kernel's main loop on
   `sm_100a`? (`exercises.naive_hot_loop("sm_100a")["lines"]` prints it; its FMA is `FHFMA.BF16`.)
"""),
    code("""
your_intensity = ...  # FLOP per byte
your_loads_per_fma = ...
exercises.attempt(exercises.check_gemm_intensity, 8192, 8192, 1024, your_intensity)
exercises.attempt(exercises.check_naive_loads_per_fma, your_loads_per_fma, "sm_100a")
"""),
    code("""
# Solution
m, n, k = 8192, 8192, 1024
assert exercises.attempt(exercises.check_gemm_intensity, m, n, k, 2 * m * n * k / (2 * (m * k + n * k + m * n)))
loop100 = exercises.naive_hot_loop("sm_100a")["opcodes"]
assert exercises.attempt(exercises.check_naive_loads_per_fma,
                         sum(v for op, v in loop100.items() if op.startswith("LDG"))
                         / sum(v for op, v in loop100.items() if op.startswith("FHFMA")), "sm_100a")
""", tags=["hide-cell"]),
    md("""
## Takeaways

* Correct first: fresh random inputs, a NaN-poisoned output and a float32 reference.
* The naive kernel requests 2 bytes per FLOP from memory (two loads per FMA) and uses no tensor
  core; the GEMM itself needs over a thousand times less traffic per FLOP. The fix is *reuse*: load a tile
  once into fast memory and use each element many times.
* The instruction mix and the loop body are read from the compiled kernel; the throughput from
  measured records, always next to cuBLAS from the same run.
* Next: tiles in shared memory loaded by TMA, multiplied by tensor cores.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 2
# ---------------------------------------------------------------------------------------------

CH2 = [
    md("""
# Chapter 2: tensor cores and TMA

**Learning objectives.** After this chapter you can

* follow the step-2 kernel's protocol: TMA loads a K tile into shared memory and an mbarrier's
  *phase* says when it has landed; the MMA loop runs `tile_k / 16` tensor-core instructions per tile;
* say where the fp32 accumulator lives (registers on Hopper, tensor memory on Blackwell) and which
  thread ends up holding which element, from the kernels' own CuTe objects;
* read the resources and instruction mix of both kernels, compiled on a CPU.

**Runs on.** CPU only: everything except running (both kernels compile; diagrams are traced from
their objects). GPU: H100/H200 runs the Hopper step, B200 the Blackwell step; both are checked
against torch and timed against cuBLAS.
"""),
    code(SETUP),
    code("""
import inspect as pyinspect

from gemm_course import cute_basics, exercises
from gemm_course import inspect as gi
from gemm_course.kernels.sm100 import layouts as sm100_layouts

hopper, blackwell = ladder.get("sm90/2"), ladder.get("sm100/2")
arts = {s.key: arch.compile_step(s) for s in (hopper, blackwell)}
records = bench.load_records()
for s in (hopper, blackwell):
    print(f"{s}\\n  adds: {s.adds}\\n  accepts: {s.shapes}")
"""),
    md("""
## 1. What changes from step 1

The kernel's docstring states the parent, the key differences and the expected gain:
"""),
    code("""
display(Markdown(hopper.load().__doc__))
"""),
    md("""
## 2. The K loop as a protocol

One stage: TMA brings a K tile of A and B into shared memory; an **mbarrier** expects that many
bytes and completes its current *phase* (0, then 1, then 0, ...) when they have landed; every
thread waits for that phase, the tensor cores run `tile_k / 16` MMA instructions over the tile,
and only after the MMAs are done may TMA overwrite the tile. Here is phase 3 of each kernel,
cut from its source at its numbered banners:
"""),
    code(source_cell("viz.phase_source(hopper, 3)")),
    code(source_cell("viz.phase_source(blackwell, 3)")),
    md("""
The counts in the schematic come from the compiled kernels: MMA instructions per K tile from the
PTX, TMA copies from the PTX, and the bytes the barrier expects from the kernels' shared-memory
layouts.
"""),
    code("""
per_tile = {}
for s in (hopper, blackwell):
    ptx = arts[s.key].ptx
    mma = gi.ptx_count(ptx, "wgmma.mma_async" if s.arch == "sm90" else "tcgen05.mma.cta_group")
    tma = gi.ptx_count(ptx, "cp.async.bulk.tensor")
    per_tile[s.key] = dict(mma=mma, tma=tma, bytes=cute_basics.stage_bytes(s))
    print(f"{s.key}: {per_tile[s.key]}; PTX markers: " + ", ".join(f"{m} x{gi.ptx_count(ptx, m)}" for m in s.ptx_markers))
    assert mma == s.default.tile_k // 16
    assert per_tile[s.key]["bytes"] == 2 * (s.default.tile_m + s.default.tile_n) * s.default.tile_k
h = per_tile["sm90/2"]
viz.k_loop_schedule("sm90", h["mma"], h["tma"], h["bytes"], mma_name="wgmma m64n256k16")
"""),
    code("""
b = per_tile["sm100/2"]
viz.k_loop_schedule("sm100", b["mma"], b["tma"], b["bytes"], mma_name="tcgen05.mma")
"""),
    md("""
Notice the TMA count: more than one copy per operand per K tile. The unswizzled ("interleaved")
shared-memory layout stores 8 x 8 core matrices of 128 contiguous bytes, so a 128-byte row of the
global tile lands in 16-byte pieces and TMA must be issued once per 16-byte column slab.
Chapter 3 changes exactly that.

## 3. Who holds which accumulator element

**Hopper.** The accumulator lives in registers: 64 x 256 fp32 over 128 threads is 128 registers
each. Which thread holds which element is the wgmma's C layout; we evaluate the kernel's own
tiled MMA, `thr_mma.partition_C` of an identity tensor, for every thread (the partition the
epilogue applies to C).
"""),
    code("""
hopper_owners = cute_basics.wgmma_accumulator_owners(hopper)
print(hopper_owners["mma"])
thread = hopper_owners["thread"]
assert all(thread[r][c] == 32 * (r // 16) + 4 * (r % 8) + (c % 8) // 2 for r in range(64) for c in range(256))
viz.ownership(hopper_owners, title="Hopper: wgmma m64n256k16 accumulator fragment (registers)")
"""),
    md("""
Warp `w` holds rows `16w .. 16w+15`; inside a warp, lane `t` holds rows `t // 4` and `t // 4 + 8`
and the column pair `2 * (t % 4)`, `+1` of every 8-column group. The same pattern as the
`mma.sync` fragment of earlier GPUs, repeated 32 times along N.

**Blackwell.** The MMA writes its accumulator to **tensor memory** (TMEM: 128 lanes x 512
columns of 32 bits per SM), not to registers. Where each element sits comes from the kernel's
accumulator layout; warp `w` of the warpgroup may only read lanes `32w .. 32w+31`, so the
64-row accumulator occupies lanes 0-15, 32-47, 64-79 and 96-111.
"""),
    code("""
tmem = sm100_layouts.accumulator_tmem_addresses(blackwell)
assert tmem[(0, 0)] == (0, 0) and tmem[(16, 0)][0] == 32
viz.tmem_map(tmem, title="Blackwell: where the 64 x 256 fp32 accumulator sits in tensor memory")
"""),
    md("""
The epilogue reads TMEM into registers with `tcgen05.ld` in the `16x256b` shape (16 lanes, 256
bits per lane, repeated 8 times). Applying the kernel's own TMEM-load copy to an identity tensor
tells which (row, col) each thread receives:
"""),
    code("""
blackwell_owners = viz.owners_from_lists(sm100_layouts.accumulator_ownership(blackwell), (64, 256),
                                         source="From the step's tcgen05.ld 16x256b tiled copy (make_epilogue_copy), traced for sm_100a.")
same = blackwell_owners["thread"] == hopper_owners["thread"]
print("Same thread -> element map as Hopper's wgmma fragment:", same)
viz.ownership(blackwell_owners, title="Blackwell: elements each thread receives from tcgen05.ld 16x256b")
"""),
    md("""
## 4. Resources and instruction mix

Registers, shared memory and spills from `cuobjdump`, instruction classes from the SASS. On Hopper
the 128 accumulator registers per thread show; on Blackwell they do not (the accumulator is in
TMEM), and the SASS has `UTCHMMA` (the MMA) and `LDTM` (TMEM loads) instead of `HGMMA`.
"""),
    code("""
reports = {s.key: gi.report(arts[s.key]) for s in (hopper, blackwell)}
for r in reports.values():
    print(r, "\\n")
    assert r.mix.get("tensor-core MMA", 0) > 0 and r.mix.get("TMA copy", 0) > 0
assert reports["sm100/2"].mix.get("tensor memory", 0) > 0
assert reports["sm90/2"].resources.registers > reports["sm100/2"].resources.registers
ops = {k: {op.split(".")[0] for op, _ in r.top_opcodes} for k, r in reports.items()}
assert "HGMMA" in ops["sm90/2"] and {"UTCHMMA", "LDTM"} <= ops["sm100/2"]
viz.instruction_mix({f"{k} ({reports[k].target})": r for k, r in reports.items()},
                    title="Step 2: static SASS instruction mix")
"""),
    md("""
## 5. Check and time it (GPU), and the recorded results
"""),
    code("""
viz.ladder_bars(records, arch=GPU_ARCH or "sm90")
"""),
    code("""
if GPU_ARCH:
    from gemm_course import run
    from gemm_course.problem import GemmProblem

    here = ladder.get((GPU_ARCH, 2))
    for result in run.check(here, run.shapes_for(here, count=4), seed=0):
        print(result)
        assert result.ok
    live = bench.bench_step(here, GemmProblem.square(4096), repeats=20, rounds=3, command="notebooks/02_tensor_cores_tma.ipynb")
    display(viz.ladder_bars(records, arch=GPU_ARCH, live=[live]))
else:
    print("No GPU here: the check and live timing run on an H100/H200 (sm90/2) or B200 (sm100/2).")
"""),
    md("""
## Try it yourself

1. With `tile_k = 32`, how many wgmma instructions does one K tile of the Hopper step take?
   (The check compiles that configuration and counts them in the PTX.)
2. Which thread of the warpgroup holds accumulator element `(row 25, col 13)` on Hopper?
"""),
    code("""
your_mma_count = ...
your_thread = ...
exercises.attempt(exercises.check_mma_per_k_tile, 32, your_mma_count)
exercises.attempt(exercises.check_accumulator_owner, 25, 13, your_thread)
"""),
    code("""
# Solution
assert exercises.attempt(exercises.check_mma_per_k_tile, 32, 32 // 16)
row, col = 25, 13
warp, lane = row // 16, 4 * (row % 8) + (col % 8) // 2
assert exercises.attempt(exercises.check_accumulator_owner, row, col, 32 * warp + lane)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* TMA moves whole tiles with one thread issuing; an mbarrier counts the bytes and its phase bit
  says which K tile has landed. Waiting on the wrong phase is the classic hang.
* One tensor-core instruction covers K = 16 of bf16; a 64-wide K tile takes four.
* On Hopper the accumulator is a register fragment spread over the warpgroup; on Blackwell it
  lives in tensor memory and the epilogue copies it out with `tcgen05.ld`, here into the same
  thread-to-element pattern.
* Every diagram came from the kernels' own objects, traced on a CPU.
* The unswizzled layout costs many small TMA copies per tile. Chapter 3 fixes the layout.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 3
# ---------------------------------------------------------------------------------------------

CH3 = [
    md("""
# Chapter 3: swizzled shared memory

**Learning objectives.** After this chapter you can

* state the one change of step 3 (the shared-memory layout atom) and read it as a diff;
* compute the bank of every shared-memory byte from the real layouts, and count wavefronts
  (bank conflicts) for the two access patterns that matter here;
* explain the 128-byte swizzle as an XOR of address bits, and why it keeps TMA rows whole;
* use the tile explorer to see what tile sizes cost in registers and shared memory.

**Runs on.** CPU only: everything except running (layouts are traced, the bank model runs in
Python, the sweep compiles every configuration). GPU: additionally checks steps 2 and 3 and times
them against cuBLAS; the explorer's "time it" button works.
"""),
    code(SETUP),
    code("""
import difflib
import inspect as pyinspect

from gemm_course import cute_basics, exercises, sim, widgets
from gemm_course import inspect as gi
from gemm_course.kernels.sm100 import layouts as sm100_layouts

records = bench.load_records()
"""),
    md("""
## 1. The diff

Step 3 subclasses step 2 and overrides one method: the layout atom of A and B in shared memory.
"""),
    code(source_cell("pyinspect.getsource(ladder.get('sm90/3').load())")),
    code("""
old = pyinspect.getsource(ladder.get("sm90/2").load().Gemm.smem_layout_atom_kind).splitlines()
new = pyinspect.getsource(ladder.get("sm90/3").load().Gemm.smem_layout_atom_kind).splitlines()
print("\\n".join(difflib.unified_diff(old, new, "step 2", "step 3", lineterm="")))

blackwell = {k: sm100_layouts.smem_layouts(k)["A"] for k in ("sm100/2", "sm100/3")}
for key, lay in blackwell.items():
    print(f"{key}: {lay.swizzle} o {lay.layout}")
assert blackwell["sm100/2"].swizzle_bits == 0 and blackwell["sm100/3"].swizzle_bytes == 128
"""),
    md("""
## 2. Banks: where every byte of the tile lands

Shared memory has 32 banks of 4 bytes; one *wavefront* serves at most one 4-byte word per bank. A
128-byte request needs one wavefront if its 32 words fall in 32 different banks, and up to 8 if
they pile into the same 4 banks. `gemm_course.sim` takes the byte offset of every element from the
kernels' own layouts (traced), and counts wavefronts for two patterns:

* **column read** (red): 8 rows x 16 bytes, one 8 x 8 core matrix, as wgmma and `ldmatrix` read it;
* **row** (blue): one 128-byte row of the tile, as TMA writes a row of its box.

Three layouts: a plain row-major tile (a first attempt), step 2's interleaved layout, step 3's
128-byte swizzle.
"""),
    code("""
viz.bank_maps(("row-major", "sm90/2", "sm90/3"))
"""),
    code("""
table = {key: {pattern: sim.conflicts(sim.offsets(key), pattern).wavefronts for pattern in sim.PATTERNS}
         for key in ("row-major", "sm90/2", "sm90/3")}
for key, counts in table.items():
    print(f"{key:>10}: " + ", ".join(f"{p}: {n} wavefront(s)" for p, n in counts.items()))
assert table["sm90/3"] == {"core-matrix column": 1, "row": 1}  # the swizzle: conflict-free both ways
assert table["row-major"]["core-matrix column"] > 1  # plain rows: a core-matrix column sits in 4 banks
assert table["sm90/2"]["core-matrix column"] == 1 and table["sm90/2"]["row"] > 1  # interleaved: rows scatter
"""),
    md("""
The interleaved layout of step 2 is already conflict-free for the tensor core's reads: each core
matrix is 128 contiguous bytes. Its cost is on the *write* side: a 128-byte row of the global tile
is scattered into 16-byte pieces, 1 KiB apart, so TMA cannot write it in one piece:
"""),
    code("""
for key in ("sm90/2", "sm90/3"):
    pieces = sim.segments(sim.offsets(key), row=0)
    print(f"{key}: row 0 of A lands in {len(pieces)} contiguous piece(s): {pieces}")
tma = {key: gi.ptx_count(arch.compile_step(ladder.get(key)).ptx, "cp.async.bulk.tensor") for key in ("sm90/2", "sm90/3")}
print("TMA copies per K tile (PTX):", tma)
assert tma["sm90/3"] < tma["sm90/2"]
"""),
    md("""
## 3. The swizzle is an XOR

`Swizzle<3,4,3>` keeps bits 0-3 of the byte address (16 bytes move together), and XORs the three
bits 4-6 (which 16-byte chunk of a 128-byte line) with the three bits 7-9 (which of 8 consecutive
128-byte rows). Row `r`'s logical chunk `c` goes to physical chunk `c XOR (r mod 8)`. A row stays
inside its own 128 bytes (TMA writes it whole); a column of chunks is spread over all 8 positions
(the tensor core reads it without conflicts). The table is read from the step's layout:
"""),
    code("""
xor = sim.xor_pattern("sm90/3")
assert all(xor[r][c] == r ^ c for r in range(8) for c in range(8))
viz.xor_pattern("sm90/3")
"""),
    md("""
## 4. Does it pay? Steps 1-3 measured

Recorded results (newest record per step, cuBLAS from the same run) and the seed's quoted B200
figures. On a GPU the next cell checks both tensor-core steps and times them live.
"""),
    code("""
viz.ladder_bars(records, arch=GPU_ARCH or "sm90")
"""),
    code("""
viz.ladder_bars(records, arch=GPU_ARCH or "sm90", shape=(8192, 8192, 8192))
"""),
    code("""
if GPU_ARCH:
    from gemm_course import run
    from gemm_course.problem import GemmProblem

    live = []
    for number in (2, 3):
        here = ladder.get((GPU_ARCH, number))
        for result in run.check(here, run.shapes_for(here, count=3), seed=0):
            print(result)
            assert result.ok
        live.append(bench.bench_step(here, GemmProblem.square(4096), repeats=20, rounds=3,
                                     command="notebooks/03_swizzling.ipynb"))
    display(viz.ladder_bars(records, arch=GPU_ARCH, live=live))
else:
    print("No GPU here: the bars above are the recorded measurements.")
"""),
    md("""
## 5. The tile explorer

Pick a step, a target and the step's knobs; the explorer compiles that configuration and shows
its registers, shared memory, spills and instruction mix. Values that would make the
configuration invalid are marked `(invalid)` and explained (the step's own `check_config`). On a
GPU matching the step, **time it** runs the bench at the chosen size next to cuBLAS.
"""),
    code("""
explorer = widgets.TileExplorer("sm90/3")
display(explorer.widget)
row = explorer.select("sm90/2", tile_n=128, tile_k=32)
assert row["ok"] and row["registers"] > 0
"""),
    md("""
The static book has no live kernel behind the widget, so here is every combination of the
Hopper steps' knobs, compiled (invalid ones greyed with the reason):
"""),
    code("""
sweep = widgets.precompute_sweep("sm90/2") + widgets.precompute_sweep("sm90/3")
display(HTML(widgets.sweep_html(sweep)))
assert any(r["ok"] for r in sweep)
viz.sweep(sweep, title="Hopper steps 2 and 3: resources per configuration (compiled on this machine)")
"""),
    md("""
The accumulator sets the register count: `tile_n / 2` fp32 registers per thread for a 64-row
tile, plus addressing. Shared memory is one stage of A and B, `2 * (64 + tile_n) * tile_k` bytes
plus the barrier and alignment: far below the 227 KiB an H100/H200 SM offers. Later chapters
spend it on more stages.

## Try it yourself

1. Under step 3's 128-byte swizzle, which physical 16-byte chunk does logical chunk 3 of tile row
   13 land in?
2. How many wavefronts does one 128-byte row take in step 2's interleaved layout?
"""),
    code("""
your_chunk = ...
your_wavefronts = ...
exercises.attempt(exercises.check_swizzled_chunk, 13, 3, your_chunk)
exercises.attempt(exercises.check_wavefronts, "sm90/2", "row", your_wavefronts)
"""),
    code("""
# Solution
assert exercises.attempt(exercises.check_swizzled_chunk, 13, 3, (13 % 8) ^ 3)
import collections

offsets = sim.offsets("sm90/2")
bank_groups = collections.Counter((int(offsets[0, k]) // 16) % 8 for k in range(0, 64, 8))  # 4 banks per 16-byte piece
assert exercises.attempt(exercises.check_wavefronts, "sm90/2", "row", max(bank_groups.values()))
""", tags=["hide-cell"]),
    md("""
## Takeaways

* Step 3 changes one line: the shared-memory layout atom. Everything else, including the MMA
  loop, is the same code.
* Banks are a property of byte addresses; the addresses come from the layout. The swizzle makes
  both a core-matrix column read and a 128-byte row conflict-free.
* The swizzle is `chunk XOR (row mod 8)` on 16-byte chunks: rows stay whole for TMA (fewer,
  larger copies), columns spread over all banks for the tensor core.
* Still one stage and nothing overlapping: the next chapters pipeline loads, MMAs and the epilogue.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapters 4-10 (Hopper steps): shared pieces
# ---------------------------------------------------------------------------------------------


def hopper_imports(key: str, parent: str) -> str:
    return f"""
import inspect as pyinspect

from gemm_course import exercises
from gemm_course import inspect as gi

step, parent = ladder.get("{key}"), ladder.get("{parent}")
records = bench.load_records()
TENSOR_CORE_STEPS = range(3, 11)  # the bars below: steps 3-10 of the Hopper ladder (chapter 3 shows 1-3)
print(f"{{step}}\\n  parent: {{parent}}\\n  adds: {{step.adds}}\\n  accepts: {{step.shapes}}")
"""


def module_source(expr: str = "step.load()"):
    """The step's own file: a subclass of its parent, so the file is the diff."""
    return code(source_cell(f"pyinspect.getsource({expr})"), tags=["scroll-output"])


def measured_cells(numbers, notebook: str, intro: str):
    """The recorded bars at 4096^3 and 8192^3, the generated comparison table, and the live run on a Hopper GPU."""
    keys = tuple(f"sm90/{n}" for n in numbers)
    return [
        md(intro),
        code(f'viz.ladder_bars(records, arch="sm90", highlight={tuple(numbers)}, log=False, numbers=TENSOR_CORE_STEPS)'),
        code(f'viz.ladder_bars(records, arch="sm90", shape=(8192, 8192, 8192), highlight={tuple(numbers)}, log=False,\n'
             '                numbers=TENSOR_CORE_STEPS)'),
        code(f"display(Markdown(viz.step_table(records, {keys})))"),
        md("Is the change larger than the run-to-run spread? Computed from the same records:"),
        code(f'display(Markdown(viz.spread_verdict(records, "{keys[-1]}", "{keys[0]}")))'),
        code(f"""
if machine.target == "sm_90a":
    from gemm_course import run
    from gemm_course.problem import GemmProblem

    live = []
    for number in {tuple(numbers)}:
        here = ladder.get(("sm90", number))
        for result in run.check(here, run.shapes_for(here, count=3), seed=0):
            print(result)
            assert result.ok
        live.append(bench.bench_step(here, GemmProblem.square(4096), repeats=20, rounds=3,
                                     command="notebooks/{notebook}"))
    display(viz.ladder_bars(records, arch="sm90", live=live, highlight={tuple(numbers)}, log=False,
                            numbers=TENSOR_CORE_STEPS))
else:
    print("No Hopper GPU (sm_90a) here: the bars above are the recorded measurements.")
"""),
    ]


RUNS_ON_HOPPER = """
**Runs on.** CPU only: everything except running the kernel (it compiles for `sm_90a` on the CPU;
diagrams come from its config, its traced CuTe objects and its compiled code; bars from the
records). Hopper GPU (H100/H200): additionally checks the step against a float32 reference and
times it, and its parent, against cuBLAS in the same process.
"""

# ---------------------------------------------------------------------------------------------
# chapter 4
# ---------------------------------------------------------------------------------------------

CH4 = [
    md("""
# Chapter 4: the epilogue through shared memory

**Learning objectives.** After this chapter you can

* read step 4 as a subclass of step 3 that replaces only the epilogue;
* follow the accumulator from registers through `stmatrix` into a staging buffer in shared memory
  and out with a TMA store, and say why a `fence.proxy.async` sits in between;
* count, in SASS, what the change does to the stores: scattered `STG` become `STSM` and `UTMASTG`;
* say what the step buys: a small measured gain, and any M (the TMA store clips partial tiles).
""" + RUNS_ON_HOPPER),
    code(SETUP),
    code(hopper_imports("sm90/4", "sm90/3")),
    md("""
## 1. What changed

Step 4 is a subclass of step 3, so its file is the diff: a config with two new fields (`epi_n`,
the width of an epilogue sub-tile, and `epi_stages`, the number of staging buffers), a check for
them, and a `Gemm` whose kernel hands the accumulator to a new method, `epilogue_tma`. The main
loop is inherited unchanged. The docstring states the expected gain before any measurement.
"""),
    module_source(),
    md("""
## 2. Why: what a step-3 store looks like

Step 3 stores straight from registers. Which elements a thread holds is the wgmma accumulator
layout (chapter 2): each thread holds pairs of neighbouring columns, so one 4-byte store writes
two bf16. Evaluate the kernel's own tiled MMA and look at what one warp-wide store instruction
(every lane storing its first pair of values) touches:
"""),
    code("""
import collections

from gemm_course import cute_basics

owners = cute_basics.wgmma_accumulator_owners("sm90/3")
first_pair = collections.defaultdict(list)  # row -> columns written by warp 0's first store
for r, (threads, values) in enumerate(zip(owners["thread"], owners["value"])):
    for c, (t, v) in enumerate(zip(threads, values)):
        if t < 32 and v in (0, 1):
            first_pair[r].append(c)
bytes_per_row = {r: 2 * len(cols) for r, cols in sorted(first_pair.items())}
print(f"one warp-wide store writes {sum(bytes_per_row.values())} bytes into {len(bytes_per_row)} rows of C: "
      f"{sorted(set(bytes_per_row.values()))} bytes per row")
assert all(max(cols) - min(cols) + 1 == len(cols) for cols in first_pair.values())  # contiguous within a row
"""),
    md("""
Rows of C are `N * 2` bytes apart in memory, so each such store touches as many 32-byte sectors
as it touches rows, each only partly filled, and every thread issues one store per pair of values.
Step 4 instead gathers a sub-tile in shared memory first, where `stmatrix` writes whole 8 x 8
matrices (16 contiguous bytes per row, one warp instruction for four of them), and then one thread
asks the copy engine to write the sub-tile to global memory: contiguous rows, full sectors, and
rows or columns beyond the matrix edge clipped by the hardware. That last point is why step 4
accepts any M:
"""),
    code("""
from gemm_course.problem import GemmProblem

ragged = GemmProblem(1000, 4096, 4096)
for s in (parent, step):
    ok, why = s.can_implement(ragged)
    print(f"{s.key} on {ragged.label}: {'accepted' if ok else 'refused: ' + why}")
assert not parent.can_implement(ragged)[0] and step.can_implement(ragged)[0]
"""),
    md("""
## 3. Compile and inspect for `sm_90a`

Both steps compiled on this machine: resources, PTX markers, and the store instructions in SASS.
"""),
    code("""
reports, ptx = gi.compare(parent, step)
"""),
    code("""
families = {"global stores": ("STG",), "stmatrix": ("STSM",), "TMA stores": ("UTMASTG",),
            "TMA loads": ("UTMALDG",), "named barriers": ("BAR",), "bf16 packing": ("F2FP",)}
counts = {key: viz.opcode_family_counts(r, families) for key, r in reports.items()}
print(counts)
assert counts["sm90/3"]["global stores"] > 0 and counts["sm90/3"]["stmatrix"] == 0
assert counts["sm90/4"]["global stores"] == 0 and counts["sm90/4"]["stmatrix"] > 0 and counts["sm90/4"]["TMA stores"] > 0
viz.opcode_families({f"{key} ({reports[key].resources.registers} registers)": r for key, r in reports.items()}, families,
                    title="Epilogue instructions in SASS: step 3 stores from registers, step 4 through shared memory")
"""),
    md("""
The conversions to bf16 (`F2FP`, two values per instruction) are the same in both. The stores are
not: step 3's `STG` (one per pair of values and thread) are gone; step 4 has `STSM` (stmatrix) and
one `UTMASTG` (TMA store) per sub-tile, issued by one thread. The new named barriers (`BAR`)
separate "every thread has written the buffer" from "thread 0 may hand it to the copy engine", and
"the copy engine has read it" from "threads may overwrite it".

## 4. The sub-tile plan

The staging buffers are read from the kernel's own shared-memory layout (traced on the CPU), the
`stmatrix` and TMA store counts from its PTX:
"""),
    code("""
facts = exercises.kernel_objects(step)
epi_m, epi_n, buffers = facts["epi_smem_shape"]
tile_m, tile_n, _ = facts["tile"]
stmatrix = gi.ptx_count(ptx, "stmatrix")
stores = gi.ptx_count(ptx, "cp.async.bulk.tensor.2d.global.shared")
print(f"staging layout: {buffers} buffers of {epi_m} x {epi_n} bf16; TMA store atom: {facts['tma_c_op']}, "
      f"{facts['tma_c_elements']} elements per store")
assert (epi_n, buffers) == (step.default.epi_n, step.default.epi_stages)
assert stores == tile_n // epi_n and facts["tma_c_elements"] == epi_m * epi_n
viz.epilogue_path(tile_m, tile_n, epi_m, epi_n, buffers, facts["threads"], stmatrix, stores)
"""),
    md("""
Two details make this correct and cheap:

* **Two proxies.** Threads write shared memory through the *generic proxy*; the TMA engine reads it
  through the *async proxy*. `fence.proxy.async.shared::cta` orders the first before the second;
  without it the copy engine may read stale bytes. The barrier after the fence makes every thread's
  writes count, not just thread 0's.
* **Two buffers.** `PipelineTmaStore` counts the bulk stores in flight
  (`cp.async.bulk.commit_group` / `wait_group.read`): while the copy engine reads buffer 0, the
  warpgroup converts and writes the next sub-tile into buffer 1, and a buffer is reused only once its
  store has read it. Only before the CTA exits does it wait for every store to finish.
"""),
    *measured_cells((3, 4), "04_tma_store.ipynb", """
## 5. Measured

Recorded bars (newest record per step, cuBLAS timed in the same run; the caption says where and
when), then the same numbers side by side as a generated table. The docstring predicted a modest
gain: at $4096^3$ each CTA runs 64 K tiles of main loop for one epilogue.
"""),
    md("""
## Try it yourself

1. With `epi_n = 64`, how many TMA stores does step 4 issue per 64 x 256 tile? (The check compiles
   that configuration and counts them in the PTX.)
2. How many bytes of shared memory does one staging buffer of the default configuration take?
"""),
    code("""
your_stores = ...
your_bytes = ...
exercises.attempt(exercises.check_tma_stores, 64, your_stores)
exercises.attempt(exercises.check_staging_bytes, your_bytes)
"""),
    code("""
# Solution
assert exercises.attempt(exercises.check_tma_stores, 64, step.default.tile_n // 64)
assert exercises.attempt(exercises.check_staging_bytes, epi_m * epi_n * 2)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* Only the epilogue changed; the file is the diff, and the main loop is step 3's.
* `stmatrix` puts register fragments into shared memory as whole 8 x 8 matrices; a TMA store moves a
  sub-tile to global memory as contiguous rows, issued by one thread, clipped at the matrix edges.
* A `fence.proxy.async` and a barrier hand the buffer from the threads to the copy engine;
  two staging buffers overlap the conversion of one sub-tile with the store of the other.
* The epilogue is a small share of a large GEMM, so the measured change is small; the shape freedom
  (any M) is the lasting gain, and every later step inherits this epilogue.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 5
# ---------------------------------------------------------------------------------------------

CH5 = [
    md("""
# Chapter 5: clusters, TMA multicast, and a lesson in occupancy

**Learning objectives.** After this chapter you can

* read step 5: two consumer warpgroups share a 128 x 256 tile, CTAs run in 2 x 1 clusters, and a
  *full* and an *empty* barrier per stage (CuTeDSL's `PipelineTmaAsync`) guard the shared memory that
  a peer CTA now writes into;
* say which CTA loads which half of B, and where a multicast copy lands;
* compute the L2 -> SM traffic per FLOP of a tile, with and without multicast;
* compute how many CTAs fit on an SM from the compiled registers and shared memory, and use it to
  explain why this step is *slower* than step 4.
""" + RUNS_ON_HOPPER),
    code(SETUP),
    code(hopper_imports("sm90/5", "sm90/4")),
    md("""
## 1. What changed

Step 5 subclasses step 4. The config grows a cluster shape and a `stages` count (still 1); the
host side builds multicast TMA atoms and a pipeline with full and empty barriers; the kernel has
two MMA warpgroups; the epilogue is step 4's, run by both warpgroups.
"""),
    module_source(),
    md("""
## 2. Why: bytes per FLOP

A CTA tile of `bm x bn` loads `(bm + bn) * bk` bf16 per K tile and does `2 * bm * bn * bk` FLOPs
with them. In a cluster, CTAs along M share the B tile: each loads a slice and multicasts it, so
each CTA *issues* only `bn / cluster_m` rows of B. The tiles and cluster shapes below are read from
the steps' traced host objects:
"""),
    code("""
size = 4096
traffic = {}
for key in ("sm90/4", "sm90/5"):
    f = exercises.kernel_objects(key)
    (bm, bn, bk), (cm, cn) = f["tile"], f["cluster"]
    issued = (bm * bk // cn + bn * bk // cm) * 2  # bytes one CTA asks L2 for, per K tile
    flops = 2 * bm * bn * bk
    ctas = (size // bm) * (size // bn)
    traffic[key] = ctas * (size // bk) * issued
    print(f"{key}: tile {bm}x{bn}, cluster {cm}x{cn}, TMA ops A {f['tma_a_op']}, B {f['tma_b_op']}\\n"
          f"   per K tile: {flops / 1e6:.1f} MFLOP for {issued // 1024} KiB issued -> {flops / issued:.0f} FLOP per byte; "
          f"L2 -> SM traffic at {size}^3: {traffic[key] / 1e9:.2f} GB")
assert traffic["sm90/5"] < traffic["sm90/4"] / 2

from gemm_course.problem import GemmProblem

peak = viz.DATASHEET["H200"]
seconds = GemmProblem.square(size).flops / (peak["bf16_dense_tflops"] * 1e12)
for key, nbytes in traffic.items():
    print(f"{key} at the datasheet peak ({seconds * 1e6:.0f} us): {nbytes / seconds / 1e12:.1f} TB/s from L2 into the SMs")
"""),
    md("""
At the tensor-core peak, step 4's tile would need the L2 bandwidth printed above, more than a
Hopper L2 delivers (on the order of 10 TB/s, an estimate, not measured here; see `NOTES.md`): a
64 x 256 tile cannot reach the ceiling however well it is pipelined. The 128 x 256 tile with B
multicast over two CTAs needs a fraction of it. Here is who loads what in a 2 x 1 cluster:
"""),
    code("""
f = exercises.kernel_objects(step)
(bm, bn, bk), (cm, cn) = f["tile"], f["cluster"]
assert (cm, cn) == (step.default.cluster_m, step.default.cluster_n) and f["tma_b_op"].endswith("MulticastOp")
viz.cluster_multicast(cm, cn, bm, bn, bk)
"""),
    md("""
The price of sharing: CTA 1 writes into CTA 0's shared memory, so CTA 0 may not refill a stage
until *both* CTAs have finished reading it. Each stage gets an *empty* barrier besides the *full*
one, and a consumer warp arrives on the empty barrier of every CTA that multicasts into it (the
remote arrive `mbarrier.arrive.shared::cluster` in the PTX). At the end, a cluster barrier keeps a
CTA's shared memory alive until its peer can no longer arrive on it. The main loop, at its banner:
"""),
    code(source_cell('viz.phase_source(step, 3)')),
    md("""
## 3. Compile and inspect for `sm_90a`
"""),
    code("""
reports, ptx = gi.compare(parent, step, extra_markers=("mbarrier.arrive.shared::cluster",))
ops = dict(reports[step.key].top_opcodes)
print("TMA loads in SASS:", {op: n for op, n in ops.items() if op.startswith("UTMALDG")})
assert any(op.startswith("UTMALDG") and "MULTICAST" in op for op in ops)
viz.instruction_mix({f"{k} ({reports[k].resources.registers} registers x {exercises.kernel_objects(k)['threads']} threads)": r
                     for k, r in reports.items()}, title="Steps 4 and 5: static SASS instruction mix")
"""),
    md("""
Inside the SM the operands travel once more: every `wgmma` reads its A and B slices from shared
memory. Each consumer warpgroup covers its 64 x 256 accumulator with *one* `wgmma` 64 x 256 x 16 per
k16 step, the largest Hopper has: it reads the warpgroup's 64 rows of A (2 KiB) and all 256 rows of
B (8 KiB) once. The `mma_n` knob splits it into narrower instructions, each of which reads the same
A slice again. Compiled here, and counted with the shared-memory model chapter 10 uses
(`sim.smem_traffic`: the wgmma reads plus the TMA writes of one K tile, per clock at the tensor
cores' full rate):
"""),
    code("""
from gemm_course import sim

for mma_n in (0, 128, 64):
    cfg = step.config(mma_n=mma_n)
    rep = gi.report(arch.compile_step(step, cfg, target=step.target))
    hgmma = sum(n for op, n in rep.top_opcodes if op.startswith("HGMMA"))
    t = sim.smem_traffic(cfg.tile_m, cfg.tile_n, mma_n or None)
    print(f"wgmma 64 x {mma_n or cfg.tile_n:3} x 16: {hgmma:2} HGMMA in the SASS (static count); one K tile: "
          f"{t.wgmma_read // 1024} KiB read by wgmma + {t.tma_write // 1024} KiB written by TMA = {t.bytes_per_clock:.0f} bytes per clock")
    assert hgmma == rep.mix["tensor-core MMA"] > 0
"""),
    md("""
An SM's shared memory delivers 128 bytes per clock, so the widest instruction is the only one that
fits. Chapter 10 measures what the narrower one costs at the power limit.

## 4. The measured result, and why

The docstring predicted a clear gain. The records say otherwise (computed from them, not typed):
"""),
    code("""
lines = []
for size in (4096, 8192):
    old, new = (bench.latest(records, s.key, size, size, size) for s in (parent, step))
    if old and new:
        ratio = new["tflops"]["median"] / old["tflops"]["median"]
        lines.append(f"* at {size}^3, step 5 runs at **{ratio:.2f}x** step 4's median throughput "
                     f"({'slower' if ratio < 1 else 'faster'}; {new['_file']})")
display(Markdown("\\n".join(lines) or "No records of steps 4 and 5 yet."))
"""),
    md("""
Count what fits on one SM. An H100/H200 SM has 65536 registers (allocated to warps in units of
256), 228 KiB of shared memory (at most 227 KiB per CTA, 1 KiB reserved per resident CTA) and
room for 64 warps. The registers and shared memory per CTA come from the compiled kernels:
"""),
    code("""
rows = {f"step {n}": exercises.occupancy_of(f"sm90/{n}") for n in (3, 4, 5)}
for label, occ in rows.items():
    print(f"{label}: {occ['ctas']} CTA(s) per SM (limited by {', '.join(occ['limiter'])}), "
          f"{occ['warps_per_sm']} warps, {occ['k_tiles_in_flight']} K tile(s) in flight per SM")
assert rows["step 4"]["ctas"] > rows["step 5"]["ctas"] == 1
viz.occupancy_bars(rows)
"""),
    md("""
That is the explanation. Step 4 has a single stage too, but several CTAs share each SM: while one
waits for its K tile to land, another computes, so loads and MMAs of *different* CTAs overlap. Step
5's 256 threads x its register count leave room for one CTA per SM, and that CTA alternates strictly:
load, wait, compute, release (now waiting for the peer CTA too), load. Nothing hides the latency.
Better bytes per FLOP do not help a kernel that is not waiting on bandwidth but on latency.

The step stays in the ladder because it is the state the next step needs: the tile, the cluster
and the full/empty protocol are right; what is missing is more than one stage, and someone to
issue loads while the tensor cores work. That is chapter 6.
"""),
    *measured_cells((4, 5), "05_cluster_multicast.ipynb", """
## 5. Measured

The recorded bars, at both sizes, and the generated table.
"""),
    md("""
## Try it yourself

1. Give step 5 one warpgroup (`tile_m = 64`): how many CTAs now fit on an SM? (The check compiles it.)
2. Without multicast (`cluster_m = 1`), how many bytes of B does each CTA load per K tile?
"""),
    code("""
your_ctas = ...
your_bytes = ...
exercises.attempt(exercises.check_ctas_per_sm, "sm90/5", your_ctas, tile_m=64)
exercises.attempt(exercises.check_b_bytes_per_cta, 1, your_bytes)
"""),
    code("""
# Solution
small = exercises.occupancy_of("sm90/5", step.config(tile_m=64))
assert exercises.attempt(exercises.check_ctas_per_sm, "sm90/5", small["ctas"], tile_m=64)
assert exercises.attempt(exercises.check_b_bytes_per_cta, 1, bn * bk * 2)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* A 128 x 256 tile on two warpgroups, with B multicast across a 2 x 1 cluster, cuts the L2 -> SM
  traffic per FLOP by more than half.
* Multicast means peers write into your shared memory: every stage needs full *and* empty
  barriers, and CTAs of a cluster must not exit while a peer can still arrive on their barriers.
* Occupancy is arithmetic: registers x threads and shared memory per CTA decide how many CTAs
  share an SM. One single-stage CTA per SM hides nothing: the step is slower than step 4.
* The fix is not to undo the cluster but to pipeline inside the CTA (chapter 6).
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 6
# ---------------------------------------------------------------------------------------------

CH6 = [
    md("""
# Chapter 6: a multistage pipeline, warp specialization and `setmaxnreg`

**Learning objectives.** After this chapter you can

* read step 6's roles: a *producer* warpgroup that only issues TMA loads and two *consumer*
  warpgroups that only issue wgmma and run the epilogue, talking through full/empty barriers over
  four shared-memory stages;
* explain `wgmma.wait_group 1`: one batch of MMAs in flight, the previous stage released behind it;
* check the register split of `setmaxnreg` (producer 40, consumers 232) against the SM's 65536
  registers and the compiler's launch-time cap;
* read a schematic timeline of the pipeline, and the measured jump it buys.
""" + RUNS_ON_HOPPER),
    code(SETUP),
    code(hopper_imports("sm90/6", "sm90/5")),
    md("""
## 1. What changed

Step 6 subclasses step 5. The config gets `stages = 4` and the two register counts; the kernel
splits into roles, each a small method: `produce_tile` (the producer warp's loop over K tiles) and
`consume_tile` (the consumers' loop), both written as loops over *the tiles of this CTA*
(`num_tiles`, `tile_coord`: one tile here), which is what lets chapters 7-10 change only the schedule.
"""),
    module_source(),
    md("""
## 2. Why: overlap loads with MMAs

With one stage (steps 2-5) a K tile's load cannot start before the previous K tile's MMAs have
released the buffer, so the tensor cores wait for every load. With `stages` buffers the producer
runs up to `stages` K tiles ahead. A schematic, drawn from the two configs' stage counts by a small
event model (the durations are made up; see the caption), for the first 8 of the 64 K tiles of a
$4096$-deep K:
"""),
    code("""
k_tiles = 4096 // step.default.tile_k
shown = min(8, k_tiles)
models = {f"{s.key} ({'one stage, one role' if s.default.stages == 1 else 'warp-specialized'})":
          viz.pipeline_model(s.default.stages, shown) for s in (parent, step)}
for label, m in models.items():
    print(f"{label}: tensor cores busy {m['mma_busy']:.0%} of the schematic's span (a model, not a measurement)")
viz.pipeline_timeline(models)
"""),
    md("""
Two details of the consumer loop make the overlap work. It keeps one batch of wgmma in flight:
after issuing K tile k's MMAs it waits only until *one* group is outstanding (`wait_group(1)`),
i.e. until K tile k-1's MMAs are done, and then releases k-1's stage to the producer. And the
producer is a separate warpgroup, so waiting on an *empty* barrier never stalls the warps that feed
the tensor cores:
"""),
    code(source_cell("pyinspect.getsource(step.load().Gemm.consume_tile)")),
    md("""
## 3. `setmaxnreg`: registers move from the producer to the consumers

Each consumer thread holds its share of a 64 x 256 fp32 accumulator, plus fragments and addresses;
the producer needs a handful of registers to issue TMA. A kernel launches with one register count
for all threads, so step 6 launches with a cap (`min_blocks_per_mp=1`), then the producer gives
registers back (`setmaxnreg.dec`) and the consumers take them (`setmaxnreg.inc`):
"""),
    code("""
art = arch.compile_step(step)
report = gi.report(art)
cfg = step.default
facts = exercises.kernel_objects(step)
warpgroup = step.load().WARPGROUP
producer_threads, consumer_threads = warpgroup, facts["threads"] - warpgroup
launch = report.resources.registers
accumulator = facts["tile"][0] * facts["tile"][1] // consumer_threads  # fp32 values per consumer thread
after = producer_threads * cfg.producer_registers + consumer_threads * cfg.consumer_registers
print(f"launch: {facts['threads']} threads x {launch} registers = {facts['threads'] * launch}; "
      f"after setmaxnreg: {producer_threads} x {cfg.producer_registers} + {consumer_threads} x {cfg.consumer_registers} = {after}")
print(f"each consumer thread holds {accumulator} accumulator values; {cfg.consumer_registers} registers leave "
      f"{cfg.consumer_registers - accumulator} for the rest")
assert after <= facts["threads"] * launch <= viz.HOPPER_SM["registers"]
assert launch == viz.HOPPER_SM["registers"] // facts["threads"] // 8 * 8  # the cap of one CTA per SM
assert "setmaxnreg.dec" in art.ptx and "setmaxnreg.inc" in art.ptx
viz.register_split(launch, producer_threads, cfg.producer_registers, consumer_threads, cfg.consumer_registers)
"""),
    md("""
The launch-time count is the largest multiple of 8 that lets one CTA of 384 threads fit in 65536
registers; `setmaxnreg` cannot create registers, only move them within that allocation, which
is why the split must total no more than the launch allocation.

## 4. Compile and inspect for `sm_90a`
"""),
    code("""
reports = {parent.key: gi.report(arch.compile_step(parent)), step.key: report}
for r in reports.values():
    print(r, "\\n")
for marker in step.ptx_markers:
    print(f"PTX {marker!r}: {art.ptx.count(marker)}")
    assert marker in art.ptx
ops = dict(report.top_opcodes)
print("register reallocation in SASS:", {op: n for op, n in ops.items() if op.startswith("USETMAXREG")})
occ = exercises.occupancy_of(step)
print(f"occupancy: {occ['ctas']} CTA per SM, {occ['k_tiles_in_flight']} K tiles in flight per SM "
      f"(step 5: {exercises.occupancy_of(parent)['k_tiles_in_flight']})")
viz.instruction_mix(reports, title="Steps 5 and 6: static SASS instruction mix")
"""),
    *measured_cells((5, 6), "06_warp_specialized.ipynb", """
## 5. Measured

The step the ladder was waiting for: the same tile and cluster as step 5, now pipelined.
"""),
    md("""
## Try it yourself

1. With `tile_n = 128`, how many stages does step 6 accept (its `check_config` counts shared memory)?
2. If the producer kept only 24 registers per thread, how many could each consumer thread take?
"""),
    code("""
your_stages = ...
your_registers = ...
exercises.attempt(exercises.check_max_stages, 128, your_stages)
exercises.attempt(exercises.check_consumer_registers, 24, your_registers)
"""),
    code("""
# Solution
mod = step.load()
per_stage = (cfg.tile_m + 128) * cfg.tile_k * 2
fixed = mod.parent.smem_estimate(step.config(tile_n=128, stages=0))
assert exercises.attempt(exercises.check_max_stages, 128, (mod.parent.SMEM_CAPACITY - fixed) // per_stage)
assert exercises.attempt(exercises.check_consumer_registers, 24,
                         (viz.HOPPER_SM["registers"] - 128 * 24) // 256 // 8 * 8)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* Four stages let TMA run ahead of the tensor cores; full barriers say "data landed", empty
  barriers say "every reader is done".
* Warp specialization gives each role its own warps: the producer's waits never stall the MMA issue.
* `wait_group(1)` keeps one wgmma batch in flight and releases stages one K tile behind.
* `setmaxnreg` moves registers from the producer (40) to the consumers (232) within the launch
  allocation of one CTA per SM.
* Still one tile per CTA: every CTA pays a pipeline fill and an exposed epilogue. Chapter 7.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 7
# ---------------------------------------------------------------------------------------------

CH7 = [
    md("""
# Chapter 7: the epilogue overlaps the next tile's main loop

**Learning objectives.** After this chapter you can

* see that step 7 changes only the schedule (`grid`, `num_tiles`, `tile_coord`), because step 6
  already wrote its roles as loops over the CTA's tiles with one pipeline state carried across them;
* explain where the epilogue overlaps the next tile's loads, on a schematic timeline;
* compute, from the step's own `grid`, how many CTAs it launches and how many waves that is;
* judge a small measured change against the run-to-run spread.
""" + RUNS_ON_HOPPER),
    code(SETUP),
    code(hopper_imports("sm90/7", "sm90/6")),
    md("""
## 1. What changed

Three small methods. Each CTA computes `tiles_per_cta` (default 2) neighbouring tiles along N,
so the grid shrinks by that factor:
"""),
    module_source(),
    code("""
import difflib

for name in ("num_tiles", "tile_coord"):
    old = pyinspect.getsource(getattr(parent.load().Gemm, name)).splitlines()
    new = pyinspect.getsource(getattr(step.load().Gemm, name)).splitlines()
    print("\\n".join(difflib.unified_diff(old, new, f"step 6 {name}", f"step 7 {name}", lineterm="")), "\\n")
"""),
    md("""
Nothing else had to change: in step 6 the producer's `load_state` and the consumers'
`read_state`/`release_state` already run on from one tile to the next (stage index and phase bit
continue), so when the consumers leave tile t's K loop for its epilogue, the producer is already
filling free stages with tile t+1's K tiles. The TMA stores of the epilogue are asynchronous: the
consumers wait only for a staging buffer to be read before refilling it, and for all stores once,
before the CTA exits.

## 2. How many CTAs, how many waves

Evaluated with the steps' own `grid` methods (the host side; Python ints stand in for C's shape):
"""),
    code("""
from gemm_course.kernels.sm90.step08_persistent import H200_SMS

sms = machine.sm_count or H200_SMS  # one CTA per SM fits (chapter 5's arithmetic)
rows = ["| size | step 6 CTAs | step 7 CTAs | tiles per CTA | step 7 waves (CTAs / " + str(sms) + " SMs) |",
        "|---|---|---|---|---|"]
for size in (4096, 8192):
    shape = exercises.problem_shape(size, size)
    g6 = parent.load().Gemm(parent.default).grid(shape, shape)
    g7 = step.load().Gemm(step.default).grid(shape, shape)
    n6, n7 = g6[0] * g6[1], g7[0] * g7[1]
    assert n6 == n7 * step.default.tiles_per_cta
    rows.append(f"| {size}^3 | {n6} | {n7} | {step.default.tiles_per_cta} | {n7 / sms:.2f} |")
display(Markdown("\\n".join(rows)))
"""),
    md("""
## 3. Where the overlap happens

The schematic event model of chapter 6, now with two output tiles: in step 6 they are two CTAs
that run one after the other on an SM (only one fits), each with its own pipeline fill; in step 7
they are one CTA, and the producer keeps loading during the first tile's epilogue. Durations are
made up; the stage count and tiles per CTA are the configs'.
"""),
    code("""
shown = 8  # K tiles drawn per output tile (a 4096-deep K has 64)
tiles = step.default.tiles_per_cta
models = {
    f"step 6: {tiles} tiles as {tiles} CTAs": viz.pipeline_model(parent.default.stages, shown, tiles_per_cta=1, ctas=tiles),
    f"step 7: {tiles} tiles in one CTA": viz.pipeline_model(step.default.stages, shown, tiles_per_cta=tiles, ctas=1),
}
spans = {label: m["span"] for label, m in models.items()}
print("schematic spans (model units):", spans)
assert spans[list(spans)[1]] < spans[list(spans)[0]]
viz.pipeline_timeline(models, title="Two output tiles on one SM (schematic model)")
"""),
    md("""
What the model saves per extra tile is one pipeline fill (the first load's latency) and the
epilogue, hidden under the next tile's loads. Against a 64-deep K loop that is a few percent, the
size the docstring predicted.

The tensor cores still wait while the epilogue runs: step 7 hides it under the next tile's
*loads*, not under its math. Hiding it under math needs the epilogue's registers free while the
next tile accumulates, the classic answer being two consumer warpgroups on different tiles taking
turns (*ping-pong*), and it needs shared-memory bandwidth that this tile shape does not have to
spare: chapter 10 counts it, and `NOTES.md` has the variants measured on the H200.

## 4. Compile and inspect for `sm_90a`

The same resources as step 6; a few more integer instructions for the tile index.
"""),
    code("""
reports, ptx = gi.compare(parent, step)
assert reports["sm90/7"].resources.registers == reports["sm90/6"].resources.registers
assert reports["sm90/7"].smem_bytes == reports["sm90/6"].smem_bytes
viz.instruction_mix(reports, title="Steps 6 and 7: static SASS instruction mix")
"""),
    *measured_cells((6, 7), "07_epilogue_overlap.ipynb", """
## 5. Measured

A change of a few percent is the size of the run-to-run spread, so read the table's p10-p90 ranges
next to the medians, and the verdict under the table.
"""),
    md("""
## Try it yourself

1. With `tiles_per_cta = 4`, how many CTAs does step 7 launch for a $4096^3$ GEMM?
"""),
    code("""
your_ctas = ...
exercises.attempt(exercises.check_grid_ctas, 4, 4096, your_ctas)
"""),
    code("""
# Solution
bm, bn, _ = step.load().Gemm(step.default).tile_mnk
assert exercises.attempt(exercises.check_grid_ctas, 4, 4096, (4096 // bm) * (4096 // bn) // 4)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* Writing roles as loops over the CTA's tiles, with pipeline state carried across tiles, made
  this step a three-method change.
* The producer fills stages with the next tile's K tiles while the consumers run the epilogue;
  TMA stores drain asynchronously.
* The saving is one fill and one exposed epilogue per extra tile: a few percent, the size of the
  measurement spread; compare medians only together with their ranges.
* Taken to its end, "more tiles per CTA" is a persistent kernel: chapter 8.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 8
# ---------------------------------------------------------------------------------------------

CH8 = [
    md("""
# Chapter 8: a persistent kernel with a static tile scheduler

**Learning objectives.** After this chapter you can

* read step 8's grid: one cluster per pair of SMs (66 on a 132-SM H200), each looping over
  cluster-tiles c, c + G, c + 2G, ... until the output is covered;
* compute, from the step's own scheduler functions, which cluster computes which tile and in which
  wave, and draw it;
* find the partial last wave, and how much of the machine it leaves idle at each size;
* follow the stream-K tail: the last wave's K loops split over every cluster, partial sums
  handed over through a workspace with release/acquire flags;
* read how the producer hands each tile's coordinates to the consumers through shared memory.
""" + RUNS_ON_HOPPER),
    code(SETUP),
    code(hopper_imports("sm90/8", "sm90/7")),
    md("""
## 1. What changed

Step 8 subclasses step 7 and replaces the schedule: the grid is the number of clusters that fit
on the GPU (asked from the driver), not the number of tiles. Its kernel loops over *work units*:
whole cluster-tiles c, c + G, c + 2G, ..., then at most two parts of tail tiles
(`gemm_course.schedule`). `cluster_tile` maps a cluster-tile index to (m, n), here in row-raster
order; steps 9 and 10 change only that. Three more things are new, each in a method of its own:

* `publish_tile` / `published_tile`: the producer warp computes each unit's tile coordinates once
  and writes them into a ring in shared memory before the unit's first load; the stage's *full*
  barrier orders that write before the consumers' read, so they never run the order's arithmetic.
* `store_partial` / `add_partials`: the stream-K hand-over (section 4).
* its `Config` trades one mainloop stage (3 instead of 4) for an epilogue staging area of half a
  tile per TMA store: two stores per tile instead of eight, none waiting for a buffer.
"""),
    module_source(),
    md("""
## 2. The grid

On a GPU the step asks the device how many SMs it has; without one it uses `H200_SMS`. Its host
code, evaluated here with Python ints:
"""),
    code("""
mod = step.load()
gemm = mod.Gemm(step.default)
cm, cn, _ = gemm.cluster_shape_mnk
print(f"SMs: {machine.sm_count or mod.H200_SMS} ({'this GPU' if machine.sm_count else 'H200_SMS, no GPU here'}); "
      f"clusters of {cm} x {cn} -> max_clusters = {gemm.max_clusters}")
for size in (4096, 8192):
    shape = exercises.problem_shape(size, size)
    clusters_m, clusters_n = gemm.cluster_grid(shape)
    print(f"{size}^3: {clusters_m} x {clusters_n} = {clusters_m * clusters_n} cluster-tiles of "
          f"{gemm.tile_mnk[0] * cm} x {gemm.tile_mnk[1] * cn}; grid {gemm.grid(shape, shape)} CTAs")
assert gemm.max_clusters <= (machine.sm_count or mod.H200_SMS) // (cm * cn)
"""),
    md("""
## 3. Who computes what

`exercises.step_schedule` builds the schedule from the step's own `cluster_grid`, `max_clusters`
and `cluster_tile`, following the kernel's `num_tiles` (cluster c computes
`ceil((tiles - c) / G)` cluster-tiles) and `tile_coord` (index `c + i * G` in its i-th iteration).
Every cluster-tile must be computed exactly once; the function checks it.
"""),
    code("""
schedule = exercises.step_schedule(step, 4096, 4096)
print(f"{schedule['tiles']} cluster-tiles, {schedule['clusters']} clusters, {schedule['waves']} waves; "
      f"last wave: {schedule['last_wave_tiles']} cluster-tiles, {schedule['idle_in_last_wave']} clusters idle")
assert sum(schedule["tiles_per_cluster"]) == schedule["tiles"]
viz.persistent_grid(schedule, title="Step 8 at 4096^3: the static schedule (row raster)")
"""),
    md("""
In a row raster, wave w (the w-th iteration of every cluster's loop) is a band of consecutive
rows, and the last wave is whatever is left over: a partial wave, during which some clusters
have nothing to do. How much of the machine's time the tail wastes depends on the size, through
`tiles mod clusters`:
"""),
    code("""
rows = ["| size | cluster-tiles | waves | last wave | idle clusters in it | busy cluster-slots |", "|---|---|---|---|---|---|"]
for size in (2048, 4096, 8192, 12288, 16384):
    s = exercises.step_schedule(step, size, size)
    busy = s["tiles"] / (s["waves"] * s["clusters"])
    rows.append(f"| {size}^3 | {s['tiles']} | {s['waves']} | {s['last_wave_tiles']} | {s['idle_in_last_wave']} | {busy:.1%} |")
display(Markdown("\\n".join(rows)))
"""),
    md("""
"Busy cluster-slots" is tiles / (waves x clusters): the share of the clusters' iterations that
have a tile. If every tile took the same time, one minus it is the most of the run that splitting
the tail across all clusters could win back at that size.

## 4. The tail, split along K (stream-K)

The r tail tiles' K tiles, laid end to end, are cut into one contiguous run per cluster. A run may
start inside one tile and end inside the next. The piece of a tile that holds its K tile 0
*finishes* the tile: it waits for the flags of the other pieces with acquire loads, adds their
fp32 partial sums and runs the epilogue. Every other piece writes its partial sum to a workspace
and raises a flag with release semantics. In every run the finishing piece comes last, so a
cluster has written all it owes before it waits, and no cluster waits on a cluster that is itself
waiting.
The plan below comes from `gemm_course.schedule`, the functions the kernel traces:
"""),
    code("""
from gemm_course import schedule

G = gemm.max_clusters
rows = ["| size | cluster-tiles | K tiles per tile | tail tiles | split? | busy, whole tiles only | busy, split tail |",
        "|---|---|---|---|---|---|---|"]
for size in (2048, 4096, 8192, 16384):
    clusters_m, clusters_n = gemm.cluster_grid(exercises.problem_shape(size, size))
    tiles, k_tiles = clusters_m * clusters_n, size // gemm.tile_mnk[2]
    g = schedule.grid_clusters(tiles, G, k_tiles)  # clusters launched
    split = schedule.split_tail(tiles, g, k_tiles)[1] > 0
    rows.append(f"| {size}^3 | {tiles} | {k_tiles} | {tiles % g} | {'yes' if split else 'no'} | "
                f"{schedule.busy_fraction(tiles, g, k_tiles, False):.1%} | {schedule.busy_fraction(tiles, g, k_tiles):.1%} |")
display(Markdown("\\n".join(rows)))
viz.stream_k_tail(1024, G, 128, title=f"8192^3: 1024 cluster-tiles of 128 K tiles over {G} clusters")
"""),
    md("""
The split is skipped where the idle share of a tile is smaller than what a hand-over costs
(`schedule.FIXUP_K_TILES`, set from measurements: at $4096^3$ the split tail ran slower than the
whole tiles, at $8192^3$ faster; `NOTES.md` has the numbers). The busy fractions above assume
free hand-overs and equal K tiles; the measured gain is smaller.

A problem with *fewer* cluster-tiles than clusters is all tail. The host therefore launches every
cluster whenever the split pays (`schedule.grid_clusters`, the kernel's own rule evaluated before
the launch; at most `schedule.MAX_PARTS` clusters per tile, since a finisher adds the parts one
after another), and the K loops of the few tiles are shared by the GPU instead of leaving most
SMs idle:
"""),
    code("""
m, n, k = 1024, 2048, 4096
clusters_m, clusters_n = gemm.cluster_grid(exercises.problem_shape(m, n))
tiles, k_tiles = clusters_m * clusters_n, k // gemm.tile_mnk[2]
for enabled in (False, True):
    g = schedule.grid_clusters(tiles, G, k_tiles, enabled)
    print(f"{m}x{n}x{k}, split {'on ' if enabled else 'off'}: {tiles} cluster-tiles on {g} clusters, "
          f"busy {schedule.busy_fraction(tiles, g, k_tiles, enabled) * g / G:.0%} of the GPU's cluster-slots")
"""),
    md("""
The hand-over is not the only price. Whole tiles of one wave walk through K together, and
neighbouring tiles read the same A and B panels at nearly the same time, so L2 serves most of
them. Pieces of a split tail sit at different K, each streaming its own range, so L2 rarely helps:
the tail's operand bytes are roughly every tail K tile's panels read once each, often more than
the operands themselves. Long K loops therefore use a second layout, *lockstep*
(`k_tiles >= schedule.LOCKSTEP_K_TILES`): clusters 0 .. r-1 each run K tiles 0 .. main_k - 1 of
one tail tile (main_k = ceil(r x K tiles / G)), all starting together like a wave of whole tiles,
and the other clusters' runs cover the rest of every tail tile. Only those runs stream
(`schedule.split_tail_bytes`, a model of that worst case):
"""),
    code("""
per_k_tile = (gemm.tile_mnk[0] * cm + gemm.tile_mnk[1] * cn) * gemm.tile_mnk[2] * 2  # bf16 A rows + B columns
rows = ["| shape | tail tiles / clusters | K tiles | layout | classic layout streams | this layout streams | A and B once |",
        "|---|---|---|---|---|---|---|"]
for m, n, k in ((8192, 8192, 8192), (8192, 4096, 6144), (8192, 6144, 14336), (8192, 4096, 28672)):
    clusters_m, clusters_n = gemm.cluster_grid(exercises.problem_shape(m, n))
    tiles, k_tiles = clusters_m * clusters_n, k // gemm.tile_mnk[2]
    g = schedule.grid_clusters(tiles, G, k_tiles)
    _, tail_tiles, main_k, _, _ = schedule.split_tail(tiles, g, k_tiles)
    rows.append(f"| {m}x{n}x{k} | {tail_tiles} / {g} | {k_tiles} | {'lockstep' if main_k else 'classic'} | "
                f"{tail_tiles * k_tiles * per_k_tile / 1e9:.2f} GB | "
                f"{schedule.split_tail_bytes(tiles, g, k_tiles, per_k_tile) / 1e9:.2f} GB | {2 * k * (m + n) / 1e9:.2f} GB |")
display(Markdown("\\n".join(rows)))
viz.stream_k_tail(512, G, 448, title=f"8192 x 4096 x 28672, lockstep: 512 cluster-tiles of 448 K tiles over {G} clusters")
"""),
    md("""
The streaming also decides *whether* to split. What the split wins back shrinks with the idle
clusters G - r, what its runs stream grows with the tail tiles r; so a tail that nearly fills the
wave stays whole: the split also needs more than G / `schedule.IDLE_SHARE` = G / 8 idle clusters.
At $12288^3$ (60 tail tiles of 66, 192 K tiles) the whole tail measured 0.5-1.7% faster than the
split one on the H200.

Lockstep has its own price: a run now covers pieces of several tiles (r / (G - r) of them, and
more), each ending in a partial-sum store, where a classic run has at most one. On the H200 the
lockstep layout measured 0.8-2% faster than the classic one at 448 K tiles (8192 x 4096 x 28672
and 8192 x 6144 x 28672, where `NOTES.md`'s profile shows the classic tail moving far more DRAM
traffic than cuBLAS), level or mixed at 192-224 and 1-3% slower at 64-128, hence the threshold.

## 5. Compile and inspect for `sm_90a`

The scheduler is integer arithmetic per unit. Whatever does not depend on the cluster is worked
out once per launch, on the host (`Gemm.schedule_constants`: the split, how many rounds of whole
tiles each cluster gets), and the two divisions each cluster still makes use dividers prepared
there (`cute.FastDivmodDivisorV2`: a multiply-high and shifts instead of a division loop). Before
that, a timeline of the launch on the H200 showed the first TMA load leaving well after step 7's,
waiting for integer divisions (`NOTES.md`; `scripts/gpu_timeline.py` records one). The hand-over adds global loads and stores
with acquire/release semantics; the PTX has them:
"""),
    code("""
from gemm_course import arch

reports, ptx = gi.compare(parent, step)
flags = {marker: gi.ptx_count(ptx, marker) for marker in ("ld.acquire.gpu", "st.release.gpu")}
print("step 8's PTX:", flags)
assert all(flags.values()) and "ld.acquire.gpu" not in arch.compile_step(parent, target="sm_90a").ptx
viz.instruction_mix(reports, title="Steps 7 and 8: static SASS instruction mix")
"""),
    *measured_cells((7, 8), "08_persistent.ipynb", """
## 6. Measured

The docstring predicted a few percent at most: $4096^3$ is about four waves either way, and step 7
already hid half of the fills.
"""),
    md("""
### Where a launch's microseconds go

A persistent launch pays some costs once: setting up barriers, working out the schedule, the
first loads' latency, and at the end the last tiles' stores. `scripts/gpu_timeline.py` measures
them: it instruments a throw-away copy of this kernel so that one thread per CTA writes the GPU's
nanosecond timer at fixed points, and records the medians. The newest recorded timeline:
"""),
    code("""
timelines = bench.load_records(kind="timeline")
if timelines:
    newest = [r for r in timelines if r["_file"] == max(r["_file"] for r in timelines)]
    for r in newest:
        p = r["points_us"]
        print(f"{r['shape']['m']}x{r['shape']['n']}x{r['shape']['k']} {r['step']}: first tile published at "
              f"{p['P unit 0 published']:.2f} us, first stage full at {p['C first stage full']:.2f} us, last stores "
              f"drained {p['C stores drained'] - p['C last epilogue issued']:.2f} us after issue, last CTA out at "
              f"{r['last_exit_us']:.1f} us")
    display(viz.launch_timeline(newest))
else:
    print("No launch timeline recorded yet. On a Hopper GPU: "
          "python3 scripts/gpu_timeline.py --steps sm90/8 sm90/10 --shapes 2048 4096")
"""),
    md("""
Read the two shapes against each other. At $2048^3$ every cluster computes one tile, so the
start-up, the first loads and the final stores, paid once per launch, are a visible slice of the
bar; at $4096^3$ the same costs all but vanish under four rounds of tiles. Step 10's first tile
comes later than step 8's at $4096^3$: that is chapter 10's Gilbert descent, worked out before the
first load (at $2048^3$, one wave, step 10 takes the row order and skips it). Chapter 10 measures
what the GPU's power limit does to the rest.
"""),
    md("""
## Try it yourself

1. At $8192^3$, how many cluster-tiles does cluster 0 compute?
2. At $8192^3$, how many clusters are idle during the last wave?
"""),
    code("""
your_tiles = ...
your_idle = ...
exercises.attempt(exercises.check_persistent_tiles, 8192, 0, your_tiles)
exercises.attempt(exercises.check_idle_clusters, 8192, your_idle)
"""),
    code("""
# Solution
tiles = (8192 // (gemm.tile_mnk[0] * cm)) * (8192 // (gemm.tile_mnk[1] * cn))
G = gemm.max_clusters
assert exercises.attempt(exercises.check_persistent_tiles, 8192, 0, -(-tiles // G))
assert exercises.attempt(exercises.check_idle_clusters, 8192, (G - tiles % G) % G)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* A persistent kernel launches as many clusters as fit and loops over tiles; launch and start-up
  costs are paid once per SM, and the epilogue overlap of chapter 7 spans every tile.
* The static schedule is index arithmetic: cluster c takes c, c + G, c + 2G, ...; the same
  functions drive the kernel and the drawing. The producer computes it and publishes each tile
  through shared memory; the consumers only read it.
* The last wave is partial unless the tile count is a multiple of the cluster count. A stream-K
  tail spreads its K loops over every cluster, at the price of handing fp32 partial sums over
  through global memory: worth it only where the idle share is large.
* The order of the tiles (`cluster_tile`) decides which A and B panels a wave shares in L2:
  chapters 9 and 10.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 9
# ---------------------------------------------------------------------------------------------

CH9 = [
    md("""
# Chapter 9: grouped raster order (thread-block swizzle) for L2 reuse

**Learning objectives.** After this chapter you can

* read step 9 as a one-method change: `cluster_tile` walks bands of `group` tile rows column by
  column instead of whole rows;
* check that the kernel's index math is the `grouped` order of `gemm_course.tile_order`;
* count, with the L2 panel model, how many A and B panels each wave of tiles touches in each
  order, at $4096^3$ and $8192^3$;
* compare the model's prediction with the measured change.
""" + RUNS_ON_HOPPER),
    code(SETUP),
    code(hopper_imports("sm90/9", "sm90/8")),
    md("""
## 1. What changed

One method, and a `group` knob:
"""),
    module_source(),
    code("""
import difflib

from gemm_course import sim, tile_order

old = pyinspect.getsource(parent.load().Gemm.cluster_tile).splitlines()
new = pyinspect.getsource(step.load().Gemm.cluster_tile).splitlines()
print("\\n".join(difflib.unified_diff(old, new, "step 8", "step 9", lineterm="")))
print()
print(pyinspect.getsource(tile_order.grouped_tile))
"""),
    md("""
The same function runs in the kernel (with `cutlass.min`) and here (with Python's `min`), so the
orders drawn below are the kernel's. Checked on the $4096^3$ cluster-tile grid:
"""),
    code("""
gemm = step.load().Gemm(step.default)
group = step.default.group
clusters_m, clusters_n = gemm.cluster_grid(exercises.problem_shape(4096, 4096))
kernel_order = [tuple(int(v) for v in gemm.cluster_tile(i, clusters_m, clusters_n)) for i in range(clusters_m * clusters_n)]
assert kernel_order == tile_order.order("grouped", clusters_m, clusters_n, group)
print(f"{clusters_m} x {clusters_n} cluster-tiles, group {group}, waves of {gemm.max_clusters}: the kernel's order is tile_order's")
viz.tile_orders(clusters_m, clusters_n, kinds=("row", "grouped"), group=group, wave=gemm.max_clusters)
"""),
    md("""
## 2. Why: panels per wave

Cluster-tile (m, n) reads row panel m of A and column panel n of B, K deep. The tiles running at
the same time (a wave, one per cluster) share the L2 cache. The model in `gemm_course.sim` cuts
an order into waves and counts the distinct panels each wave touches, assuming nothing survives
in L2 from one wave to the next: crude, but it ranks orders. A row raster's wave spans a few rows
and many columns, so it reads nearly every B panel; a band of `group` rows makes the wave roughly
square.
"""),
    code("""
bm, bn = gemm.tile_mnk[0] * gemm.cluster_shape_mnk[0], gemm.tile_mnk[1] * gemm.cluster_shape_mnk[1]
models = {}
for size in (4096, 8192):
    tm, tn = gemm.cluster_grid(exercises.problem_shape(size, size))
    models[size] = sim.compare_orders(tm, tn, kinds=("row", "grouped"), group=group, sms=gemm.max_clusters,
                                      tile_m=bm, tile_n=bn, k=size)
    row, grouped = models[size]["row"], models[size]["grouped"]
    print(f"{size}^3 ({tm} x {tn} cluster-tiles, {row.waves} waves): row {row.bytes / 1e9:.2f} GB, "
          f"grouped {grouped.bytes / 1e9:.2f} GB of panel reads in the model ({1 - grouped.bytes / row.bytes:.0%} fewer)")
viz.l2_panels(models[4096], title=f"L2 panel model at 4096^3: cluster-tiles of {bm} x {bn}, waves of {gemm.max_clusters}")
"""),
    code("""
viz.l2_panels(models[8192], title=f"L2 panel model at 8192^3: cluster-tiles of {bm} x {bn}, waves of {gemm.max_clusters}")
"""),
    md("""
The model also says how much the choice of `group` matters (the step's knob), at $8192^3$:
"""),
    code("""
tm, tn = gemm.cluster_grid(exercises.problem_shape(8192, 8192))
rows = ["| group | model GB | vs row raster |", "|---|---|---|"]
row_bytes = models[8192]["row"].bytes
for g in dict(step.knobs)["group"]:
    t = sim.l2_traffic(tile_order.order("grouped", tm, tn, g), sms=gemm.max_clusters, tile_m=bm, tile_n=bn, k=8192)
    rows.append(f"| {g} | {t.bytes / 1e9:.2f} | {t.bytes / row_bytes:.2f} |")
display(Markdown("\\n".join(rows)))
"""),
    md("""
Whether fewer panel reads make the kernel faster depends on whether DRAM is the limit. The step's
docstring puts it in numbers: at $4096^3$ A and B (64 MiB together) nearly fit in the L2 (50 MiB),
so many of the model's "panel reads" hit L2 anyway; at $8192^3$ (256 MiB) they cannot.

## 3. Compile and inspect for `sm_90a`
"""),
    code("""
reports, ptx = gi.compare(parent, step)
assert reports["sm90/9"].resources.registers == reports["sm90/8"].resources.registers
viz.instruction_mix(reports, title="Steps 8 and 9: static SASS instruction mix")
"""),
    *measured_cells((8, 9), "09_grouped_raster.ipynb", """
## 4. Measured

The docstring predicted nothing at $4096^3$ and a few percent at $8192^3$. The model's reduction
above is in panel reads, not in time. How panel reads become time on this GPU is less direct than
it looks: a long GEMM runs at the board's power limit, and data fetched again from DRAM costs
energy, which the limit takes back as clock. Chapter 10 (section 7) measures exactly that for
steps 8, 9 and 10 side by side.
"""),
    md("""
## Try it yourself

1. On the $8192^3$ grid of cluster-tiles (32 x 32), how many distinct A panels and B panels does the
   first wave of 66 tiles touch in a row raster? And with the grouped raster (group 8)?
"""),
    code("""
your_row = (..., ...)  # (A panels, B panels)
your_grouped = (..., ...)
exercises.attempt(exercises.check_wave_panels, "row", 32, 32, *your_row)
exercises.attempt(exercises.check_wave_panels, "grouped", 32, 32, *your_grouped)
"""),
    code("""
# Solution
wave = gemm.max_clusters
first_row = tile_order.order("row", 32, 32)[:wave]
first_grouped = tile_order.order("grouped", 32, 32, group)[:wave]
for kind, tiles in (("row", first_row), ("grouped", first_grouped)):
    assert exercises.attempt(exercises.check_wave_panels, kind, 32, 32,
                             len({m for m, _ in tiles}), len({n for _, n in tiles}), wave, group)
""", tags=["hide-cell"]),
    md("""
## Takeaways

* Tile order is a scheduler detail with a memory-system effect: which tiles run together decides
  which panels of A and B they share in L2.
* A grouped raster keeps each wave roughly square; the L2 panel model counts fewer panel reads
  than a row raster, more so on larger grids.
* The gain shows only where the inputs do not fit in L2; the model ranks orders, the bench decides.
* The group size is a knob; chapter 10 replaces it with a curve that needs none, and measures
  what each order costs in energy at the power limit.
"""),
]

# ---------------------------------------------------------------------------------------------
# chapter 10
# ---------------------------------------------------------------------------------------------

CH10 = [
    md("""
# Chapter 10: tiles along a generalized Hilbert curve (Gilbert), and where we stand

**Learning objectives.** After this chapter you can

* read step 10 as another one-method change: `cluster_tile` follows a Gilbert curve, computed in
  the kernel by a loop-only descent (`tile_order.gilbert_tile`);
* check that the descent agrees with the recursive curve on the grids the kernel meets;
* compare row, grouped and Gilbert orders with the L2 panel model, on square and LLM-shaped grids;
* see which GPC each cluster lands in, and why giving one GPC's clusters neighbouring tiles lets
  the L2 request coalescer merge their loads;
* read the final step's sweep against cuBLAS, and what is left between it and the speed of light.

The Gilbert curve is Jakub Červený's generalized Hilbert curve "gilbert"
([github.com/jakubcerveny/gilbert](https://github.com/jakubcerveny/gilbert), BSD-2-Clause, 2018);
the course's implementation, in `gemm_course/tile_order.py`, is written from its published description.
""" + RUNS_ON_HOPPER),
    code(SETUP),
    code(hopper_imports("sm90/10", "sm90/9")),
    md("""
## 1. What changed

`cluster_tile` again, now without a knob, and step 8's `gpc_order` switched on (section 7 says
why). The module is short; the work is in
`gemm_course.tile_order.gilbert_tile`, which the kernel wraps with `for_kernel` (a `cute.jit` copy)
so that CuTeDSL traces its `while` and `if` on `Int32` values:
"""),
    module_source(),
    code("""
from gemm_course import sim, tile_order

""" + source_cell("pyinspect.getsource(tile_order.gilbert_tile)"), tags=["scroll-output"]),
    md("""
## 2. The curve over the tile grid

The recursive curve (`tile_order.gilbert`) and the kernel's descent (`tile_order.gilbert_tile`,
the i-th tile without building the curve) must agree on every index. Checked on the cluster-tile
grids of a few problems, including two LLM shapes of the sweep:
"""),
    code("""
gemm = step.load().Gemm(step.default)
wave = gemm.max_clusters
grids = {}
for m, n in ((4096, 4096), (8192, 8192), (2048, 3328), (3072, 5120), (8192, 14336), (8192, 28672)):
    tm, tn = gemm.cluster_grid(exercises.problem_shape(m, n))
    path = tile_order.gilbert(tm, tn)
    assert [tile_order.gilbert_tile(i, tm, tn) for i in range(tm * tn)] == path
    diagonal = sum(1 for d in tile_order.steps(path) if d == (1, 1))
    assert diagonal == int(tile_order.gilbert_has_diagonal(tm, tn))
    grids[(m, n)] = (tm, tn)
    print(f"{m} x {n}: {tm} x {tn} cluster-tiles; descent == curve on all {tm * tn} indices; "
          f"{diagonal} diagonal step(s), every other step to a neighbour")
tm, tn = grids[(4096, 4096)]
viz.tile_orders(tm, tn, kinds=("row", "grouped", "gilbert"), group=ladder.get("sm90/9").default.group, wave=wave)
"""),
    md("""
The curve needs no group size and has no seams at band edges: any stretch of consecutive tiles,
in particular each wave, is a compact patch. It covers any rectangle; on a grid with an odd long
side and an even short side (here 8 x 13, M = 2048 and N = 3328) it takes its one diagonal step,
which the check above counted:
"""),
    code("""
tm, tn = grids[(2048, 3328)]
viz.tile_orders(tm, tn, kinds=("grouped", "gilbert"), group=ladder.get("sm90/9").default.group, wave=wave)
"""),
    md("""
## 3. The L2 panel model: three orders

The model of chapter 9, on the square grids and on an LLM-shaped grid from the sweep (M = 8192,
N = 28672, K = 4096):
"""),
    code("""
bm, bn = gemm.tile_mnk[0] * gemm.cluster_shape_mnk[0], gemm.tile_mnk[1] * gemm.cluster_shape_mnk[1]
group = ladder.get("sm90/9").default.group
models = {}
for (m, n), k in (((4096, 4096), 4096), ((8192, 8192), 8192), ((8192, 28672), 4096)):
    tm, tn = grids[(m, n)]
    models[(m, n, k)] = sim.compare_orders(tm, tn, kinds=("row", "grouped", "gilbert"), group=group, sms=wave,
                                           tile_m=bm, tile_n=bn, k=k)
rows = ["| problem | cluster-tiles | row | grouped | gilbert | floor (each panel once) |", "|---|---|---|---|---|---|"]
for (m, n, k), t in models.items():
    tm, tn = grids[(m, n)]
    rows.append(f"| {m}x{n}x{k} | {tm} x {tn} | " + " | ".join(f"{t[o].bytes / 1e9:.2f} GB" for o in ("row", "grouped", "gilbert"))
                + f" | {t['row'].min_bytes / 1e9:.2f} GB |")
display(Markdown("\\n".join(rows)))
viz.l2_panels(models[(8192, 8192, 8192)], title=f"L2 panel model at 8192^3 (waves of {wave} cluster-tiles)")
"""),
    code("""
viz.l2_panels(models[(8192, 28672, 4096)], title=f"L2 panel model at 8192x28672x4096 (waves of {wave} cluster-tiles)")
"""),
    md("""
In this model the Gilbert order lands close to a well-chosen grouped raster, without a group size
to choose. The model does not see everything (it forgets L2 between waves, and ignores that waves
drift apart in time), so the measurements decide.

## 4. Compile and inspect for `sm_90a`

The descent is a loop of integer operations per tile, and it shows in the instruction mix. The
producer warp runs it for the next unit right after issuing the current unit's loads (step 8's
tile ring hands the result to the consumers), so it runs while earlier stages are still being
consumed. A cluster's first tile is worked out between the arrive and the wait of the cluster's
start-up barrier, which hides part of it, and by the producer warp alone (all twelve warps working
it out side by side took turns on the SM's integer pipes); the rest delays the first load once per
launch, as chapter 8's launch timeline shows.
The descent halves lengths with `>> 1` and tests them with `& 1`, not `// 2` and `% 2`: the
lengths are never negative, and the signed forms cost the kernel sign fix-ups on every level
(on a 16 x 16 grid, five or six levels); on the H200 that shortened the first tile's wait
measurably (`NOTES.md` has the launch timeline, before and after). A grid that fits in one wave
skips it and takes the row order, since the order cannot matter when every tile runs at once:
"""),
    code("""
reports, ptx = gi.compare(parent, step)
math_ops = {k: r.mix.get("integer/address math", 0) for k, r in reports.items()}
print("integer/address math instructions:", math_ops)
assert math_ops["sm90/10"] > math_ops["sm90/9"]
assert reports["sm90/10"].resources.registers == reports["sm90/9"].resources.registers
viz.instruction_mix(reports, title="Steps 9 and 10: static SASS instruction mix")
"""),
    *measured_cells((9, 10), "10_gilbert.ipynb", """
## 5. Measured

Steps 9 and 10 at both sizes (the docstring predicted: like step 9), then the final step on the
sweep of square and LLM shapes.
"""),
    code("""
sweep = viz.latest_sweep(records, step.key)
if sweep:
    ratios = [r["ratio_to_cublas"] for r in sweep]
    seed_protocol = [r["tflops"]["seed_mean"] / r["cublas_tflops"]["seed_mean"] for r in sweep]
    print(f"{len(sweep)} shapes ({sweep[0]['_file']}): geometric mean of the ratio to cuBLAS "
          f"{viz.geomean(ratios):.3f} (per-launch medians), {viz.geomean(seed_protocol):.3f} (the seed's protocol: "
          f"mean of back-to-back launches); {sum(r >= 1 for r in ratios)} of {len(ratios)} shapes at or above cuBLAS")
else:
    print("No sweep of the final step recorded yet.")
viz.sweep_ratios(records, step.key)
"""),
    md("""
## 6. Where we stand

Computed from the records and from the newest Nsight Compute log of the lent H200 (nothing typed):
"""),
    code("""
import glob
import os
import re

lines = []
for size in (4096, 8192):
    final = bench.latest(records, step.key, size, size, size)
    best = max((r for r in (bench.latest(records, s.key, size, size, size) for s in ladder.steps("sm90")) if r),
               key=lambda r: r["ratio_to_cublas"], default=None)
    if final:
        lines.append(f"* {size}^3: the final step reaches **{final['ratio_to_cublas']:.3f}** of cuBLAS in its run "
                     f"({final['tflops']['median']:.0f} vs {final['cublas_tflops']['median']:.0f} TFLOP/s); the best "
                     f"Hopper step at this size is {best['step']} ({best['ratio_to_cublas']:.3f}), each ratio against "
                     "its own run's cuBLAS.")
if sweep:
    lines.append(f"* over the {len(sweep)}-shape sweep: geometric mean **{viz.geomean(ratios):.3f}** of cuBLAS.")
logs = [p for p in sorted(glob.glob(os.path.join(bench.RESULTS_DIR, "logs", "*ncu*_4096*")))
        if "Elapsed Cycles" in open(p).read()]  # profiles at 4096^3 with the speed-of-light section
if logs:
    text = open(logs[-1]).read()
    for block in re.split(r"\\n  (?=kernel_)", text)[1:]:
        name = re.search(r"sm90(step\\d+_[a-z_]+?)Gemm", block)
        if not name or not name.group(1).startswith("step10"):
            continue
        elapsed = float(re.search(r"Elapsed Cycles\\s+cycle\\s+([\\d,.]+)", block).group(1).replace(",", ""))
        active = float(re.search(r"SM Active Cycles\\s+cycle\\s+([\\d,.]+)", block).group(1).replace(",", ""))
        pipe = re.search(r"(\\w+) is the highest-utilized pipeline \\(([\\d.]+)%\\)", block)
        lines.append(f"* Nsight Compute, {name.group(1)} at 4096^3 ({os.path.basename(logs[-1])}): the busiest pipeline is "
                     f"{pipe.group(1)} at {pipe.group(2)}% of elapsed cycles; SMs active {active / elapsed:.1%} of elapsed cycles.")
        break
display(Markdown("\\n".join(lines) or "No records yet."))
"""),
    md("""
The ladder ends at cuBLAS's level; the lines above say how close, shape by shape. `NOTES.md` (the
project's performance notes, next to the records) has the analysis behind them, including the
same counters for the cuBLAS kernel: both lose a few percent of SM cycles to the partial last
wave; mid-session, within active cycles, cuBLAS kept the tensor pipe busier while step 10's
consumer warps waited at the epilogue's barriers. Step 8 now shares the schedule through shared
memory, splits long tails along K (stream-K, in lockstep where K is long) and stages half a tile
per store, which brought the
counters level. One idea measured *worse*: keeping a finished tile in bf16 registers and storing
it under the next tile's first wgmma cost 2-4% on short-K shapes (likely shared-memory bandwidth:
`stmatrix` and the TMA store's reads compete with wgmma's operand reads), and so did giving each
consumer warpgroup its own epilogue. A count says why. Every wgmma reads its A and B slices from
shared memory, TMA writes each K tile's A and B into it, and at the tensor cores' full rate that
traffic, per clock, is (`sim.smem_traffic`, a model):
"""),
    code("""
rows = {
    "128 x 256, two warpgroups (this kernel)": sim.smem_traffic(128, 256),
    "same, two 64 x 128 wgmma per warpgroup (mma_n = 128)": sim.smem_traffic(128, 256, 128),
    "ping-pong: 64 x 256 per warpgroup": sim.smem_traffic(64, 256),
    "ping-pong: 128 x 128 per warpgroup": sim.smem_traffic(128, 128),
    "192 x 192, three warpgroups (cuBLAS, large N)": sim.smem_traffic(192, 192),
    "192 x 256, three warpgroups": sim.smem_traffic(192, 256),
}
viz.smem_traffic_bars(rows)
"""),
    md("""
This kernel's tile asks for exactly the 128 bytes per clock an SM's shared memory delivers, so
anything else that touches shared memory while the tensor cores run competes with the main loop
(whether wgmma's operand reads go through the same banks is not documented; the measurements are
consistent with it). Ping-pong consumers, the usual cure for an exposed epilogue, would need 160.
What could still move the final step past cuBLAS:

* **a tile that asks for less**: 192 x 256 over three consumer warpgroups needs 117 bytes per
  clock, but it does not compile with this toolchain: a kernel of four warpgroups starts with at
  most 65536 / 512 = 128 registers per thread, ptxas compiles the consumers' wgmma against that
  cap, and 128 fp32 accumulators per thread leave no room for anything else (`NOTES.md` has the
  ptxas message). cuBLAS's 192 x 192 (96 accumulators) compiles, at this kernel's 128 bytes per
  clock;
* **a tile shape per problem**, as cuBLAS has (256 x 128, 320 x 128 or 192 x 192 by shape, per
  `scripts/cublas_kernels.py`; its 256 x 128 in column-major terms is this kernel's 128 x 256);
* **fewer fixed microseconds per launch**: at $2048^3$, one wave of one tile per cluster, start-up,
  the first loads and the final stores are a sizeable share of a launch (chapter 8 draws the
  launch timeline; `scripts/gpu_timeline.py` measures it on your GPU);
* **less energy per FLOP**, which the next section shows is what a large GEMM on this GPU is
  really limited by.

## 7. Where the clusters land

Two SMs that read the same operand bytes at nearly the same moment need not both go to L2:
Hopper's *L2 request coalescer* merges such requests, so one L2 lookup serves both (Nsight
Compute counts it in its `lrc__` metrics). cuBLAS gets far more of its loads merged than the
kernels of this course did, with the same tile and the same bytes. The counters, from
`scripts/ncu_counters.sh` on the lent H200 (one launch of each kernel in one process; sectors are
32 bytes; "merged" counts the sectors of unicast loads, here A's, served by another SM's request):
"""),
    code("""
import json

from gemm_course import placement

rows = ["| log | kernel | merged sectors | L2 lookups (sectors) | DRAM read |", "|---|---|---|---|---|"]
for path in sorted(glob.glob(os.path.join(bench.RESULTS_DIR, "logs", "*ncu_lrc*"))):
    counters = placement.coalescer_counters(open(path).read())
    names = [k for k, _ in counters]
    for i, (kernel, v) in enumerate(counters):
        label = kernel if names.count(kernel) == 1 else f"{kernel} (#{names[:i + 1].count(kernel)})"
        rows.append(f"| {os.path.basename(path)} | {label} | {v['merged'] / 1e6:.1f} M | {v['l2_lookups'] / 1e6:.0f} M "
                    f"| {v['dram'] / 1e9:.2f} GB |")
display(Markdown("\\n".join(rows) if len(rows) > 2 else "No coalescer counters recorded yet: scripts/ncu_counters.sh OUT"))
"""),
    md("""
The tile order is not the reason: step 8's row raster gives clusters c and c + 1 the same A panel
at the same moment, and they still rarely merge. Where the clusters run is. A probe
(`placement.probe`: one CTA per SM writes its `%smid`) launched as this kernel's grid and as
clusters of 8 and 16, whose CTAs the hardware must keep inside one GPC, shows that the hardware
deals clusters out to the GPCs in turn (top strip): neighbours on any tile order sit in different
GPCs, and the coalescer, it turns out, merges only within a GPC. So step 10 turns on step 8's
`gpc_order`: the host probes once per process and sorts the clusters by GPC, and the kernel's
producer shifts each full-wave tile index by (place - cluster), so each GPC's clusters take
consecutive places on the Gilbert curve (bottom strip). That is a permutation of each wave's
indices: every tile is still computed once wherever the GPU puts the clusters; only the merging
depends on the probe being right.
"""),
    code("""
probes = sorted(glob.glob(os.path.join(bench.RESULTS_DIR, "logs", "*placement_probe.json")))
if probes:
    probe = json.load(open(probes[-1]))
    display(viz.cluster_placement(probe))
    p = placement.from_probe_record(probe)
    gpc_of = [p["groups"][sm] for sm in p["cluster_sms"]]
    print("clusters in the same GPC as cluster 4:", [c for c, g in enumerate(gpc_of) if g == gpc_of[4]])
else:
    print("No placement probe recorded yet: python3 -m gemm_course.placement OUT.json (on a GPU)")
"""),
    md("""
In the `gpc_order` logs of the table above, the first step-10 kernel (#1) ran without the knob
and the second (#2) with it (the command is in `NOTES.md`, seventh pass): with it, about three
times as many A sectors merge, L2 sees fewer lookups and DRAM fewer bytes, though cuBLAS still
merges about twice as many. The interleaved A/B over the sweep's shapes, both listing orders,
from `results/tuning/` (gzipped JSON, raw per-launch times):
"""),
    code("""
import gzip

for name in ("tune_run33_gpc_order_sweep.json.gz", "tune_run33b_gpc_order_sweep_reversed.json.gz"):
    path = os.path.join(bench.RESULTS_DIR, "tuning", name)
    if not os.path.exists(path):
        continue
    tune = json.load(gzip.open(path, "rt"))["rows"]
    means = {v: viz.geomean([r["ratio_to_cublas"] for r in tune if r["variant"] == v])
             for v in dict.fromkeys(r["variant"] for r in tune) if v != "cublas"}
    print(name + ": geometric mean of the ratio to cuBLAS over " + str(len({r["shape"] for r in tune})) + " shapes: "
          + ", ".join(f"{v} {g:.4f}" for v, g in means.items()))
"""),
    md("""
## 8. At the power limit

A long GEMM on the H200 runs at the board's power limit: the SM clock is not the datasheet's
boost clock but whatever the limit leaves. Throughput is then *work per clock* times *clock*, and
the clock falls as the energy per clock rises. `scripts/gpu_clocks.py` separates the two: it runs
each kernel back to back for a few seconds (after a warm-up of the same length) while
`nvidia-smi` samples the SM clock and the board power, and records the medians (records of kind
`clocks`; the step runs before and after cuBLAS, and its two runs are averaged):
"""),
    code("""
clock_records = bench.load_records(kind="clocks")
split = viz.power_limit_split(clock_records)
for r in split:
    s, c = r["step_values"], r["cublas_values"]
    print(f"{r['shape']:>17} {r['step']:<8} {r['ratio']:.3f} of cuBLAS = clock {r['clock_ratio']:.3f} x work per clock "
          f"{r['per_clock_ratio']:.3f}   ({s['sm_mhz']:.0f} vs {c['sm_mhz']:.0f} MHz at {s['power_w']:.0f} vs {c['power_w']:.0f} W)")
if split:
    display(viz.power_limit_bars(clock_records))
else:
    print("No clock records yet. On a Hopper GPU: python3 scripts/gpu_clocks.py sm90/10 --shapes 4096 8192")
"""),
    md("""
The rows marked `mma_n=128` are the same kernel with each warpgroup's `wgmma` 64 x 256 x 16 split
into two 64 x 128 x 16 (chapter 5's knob; section 6's model counts 20% more shared-memory reads for
them). Against the default, from the same runs:
"""),
    code("""
def joules(v):
    return v["power_w"] / v["tflops"]


narrow = [r for r in split if r["step"] == "sm90/10:mma_n=128"]
for r in narrow:
    base = next((b for b in split if (b["file"], b["shape"], b["step"]) == (r["file"], r["shape"], "sm90/10")), None)
    if base:
        s, b = r["step_values"], base["step_values"]
        print(f"{r['shape']:>17}: {s['tflops']:.0f} against {b['tflops']:.0f} TFLOP/s; work per clock "
              f"{s['flop_per_sm_clock'] / b['flop_per_sm_clock'] - 1:+.1%}, energy per TFLOP {joules(s) / joules(b) - 1:+.1%}")
if not narrow:
    print("No run of the narrow instruction yet: python3 scripts/gpu_clocks.py sm90/10 sm90/10:mma_n=128 --shapes 4096")
"""),
    md("""
Read the bars in pairs. Where the green bar (work per clock) is above 1 and the orange one (clock)
below, this kernel does more per clock than cuBLAS but spends more energy per clock doing it, and
the power limit takes the difference back through the clock: the blue bar (what you measure)
lands near 1 either way. A stall is cheap at the power limit, since a stalled SM draws less and
the others clock up; energy per FLOP is not. The clock also carries over: a block of launches
starts at the clock the previous block left behind, so a kernel timed right after a cooler one has
a head start. That is why the bench reverses the order of the kernels it compares every other
round. The tile order is one place where energy per FLOP shows, since data that has to come from
DRAM again costs energy. Same run, same shapes, the three persistent steps:
"""),
    code("""
by_order = [r for r in split if r["step"] in ("sm90/8", "sm90/9", "sm90/10")]
files = {r["file"] for r in by_order if r["step"] == "sm90/8"}
for r in (r for r in by_order if r["file"] in files):
    s = r["step_values"]
    print(f"{r['shape']:>17} {r['step']:<8} {s['tflops']:6.1f} TFLOP/s at {s['sm_mhz']:.0f} MHz, {s['power_w']:.0f} W: "
          f"{s['power_w'] / s['tflops']:.3f} J per TFLOP")
for file in files:
    for shape in dict.fromkeys(r["shape"] for r in by_order if r["file"] == file):
        j = {r["step"]: r["step_values"]["power_w"] / r["step_values"]["tflops"] for r in by_order
             if r["file"] == file and r["shape"] == shape}
        if "sm90/10" in j:
            print(f"{shape}: the row raster (step 8) spent {j['sm90/8'] / j['sm90/10'] - 1:+.1%} energy per TFLOP "
                  "against the Gilbert order (step 10)")
if files:
    display(viz.order_energy([r for r in clock_records if r["_file"] in files]))
else:
    print("No run with steps 8-10 side by side yet: python3 scripts/gpu_clocks.py sm90/8 sm90/9 sm90/10 --shapes 8192")
"""),
    md("""
The row raster of step 8 streams many more panels from DRAM than the grouped and Gilbert orders
(section 3's model, on the x axis) and pays for it in joules per TFLOP, that is, in clock; the
grouped and Gilbert orders, whose modelled traffic is close, sit close together. Making traffic
smaller helps only while it costs energy, though: `NOTES.md` records a wave barrier that kept
every wave's tiles in step and cut this kernel's DRAM reads sharply at 8192x14336x28672 in a
profile, yet measured no faster: the waiting it added cost as much as the traffic it saved. Past
that point the two kernels converge, both spending about the same energy per FLOP on the tensor
cores themselves: compare the sustained ratios above with how far the per-launch sweep of
section 5 moves from run to run.

## Try it yourself

1. Which cluster-tile (m, n) does the Gilbert order visit at index 5 of the 16 x 16 grid?
2. Compute the geometric mean of the ratio to cuBLAS over the newest sweep yourself
   (`viz.latest_sweep(records)` gives the records; each has `ratio_to_cublas`).
"""),
    code("""
your_tile = ...  # (m, n)
your_geomean = ...
exercises.attempt(exercises.check_gilbert_tile, 16, 16, 5, your_tile)
exercises.attempt(exercises.check_sweep_geomean, your_geomean)
"""),
    code("""
# Solution
import math

assert exercises.attempt(exercises.check_gilbert_tile, 16, 16, 5, tile_order.gilbert(16, 16)[5])
if sweep:
    logs_ = [math.log(r["ratio_to_cublas"]) for r in viz.latest_sweep(records)]
    assert exercises.attempt(exercises.check_sweep_geomean, math.exp(sum(logs_) / len(logs_)))
""", tags=["hide-cell"]),
    md("""
## Takeaways

* A Gilbert curve keeps every stretch of tiles compact on any rectangle, with no group size to
  tune; the kernel computes its tile by a loop-only descent that traces in CuTeDSL.
* The L2 panel model ranks it with a good grouped raster, without a knob; whether the
  measurements tell steps 9 and 10 apart beyond their spread, the generated verdict says.
* At the power limit, throughput is work per clock times clock, and the clock is set by energy
  per FLOP: a kernel that does more per clock runs at a lower clock, and an order that streams
  less from DRAM runs at a higher one (section 7's records).
* The final step is at cuBLAS's level across square and LLM shapes; what separates them has
  named causes (the tail wave where a split does not pay, a launch's fixed microseconds, a main
  loop at the shared-memory limit) and candidates that a count can rank before any code is
  written (a tile shape per problem, a larger tile over three warpgroups).
* Every number in this book came from a record, a compiled kernel, a traced CuTe object, or a
  model labelled as one.
"""),
]

# Wide diagrams of chapters 4-10 take the page's full width (the theme's ``full-width`` cell tag).
WIDE_FIGURES = ("viz.epilogue_path(", "viz.pipeline_timeline(", "viz.persistent_grid(", "viz.tile_orders(",
                "viz.l2_panels(", "viz.sweep_ratios(", "viz.register_split(", "viz.occupancy_bars(",
                "viz.opcode_families(", "viz.stream_k_tail(")
for _chapter in (CH4, CH5, CH6, CH7, CH8, CH9, CH10):
    for _cell in _chapter:
        _lines = _cell.source.splitlines()
        if _cell.cell_type == "code" and _lines and _lines[-1].startswith(WIDE_FIGURES):
            _cell.metadata["tags"] = _cell.metadata.get("tags", []) + ["full-width"]

NOTEBOOKS = {
    "00_cute_mental_model.ipynb": CH0,
    "01_naive.ipynb": CH1,
    "02_tensor_cores_tma.ipynb": CH2,
    "03_swizzling.ipynb": CH3,
    "04_tma_store.ipynb": CH4,
    "05_cluster_multicast.ipynb": CH5,
    "06_warp_specialized.ipynb": CH6,
    "07_epilogue_overlap.ipynb": CH7,
    "08_persistent.ipynb": CH8,
    "09_grouped_raster.ipynb": CH9,
    "10_gilbert.ipynb": CH10,
}


def build(name: str, cells) -> str:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{name[:2]}-{i:02d}"
    nbformat.validate(nb)
    path = os.path.join(ROOT, "notebooks", name)
    with open(path, "w") as f:
        nbformat.write(nb, f)
    return path


def main(argv):
    wanted = argv[1:] or [""]
    for name, cells in NOTEBOOKS.items():
        if any(name.startswith(w) for w in wanted):
            print(build(name, cells))


if __name__ == "__main__":
    main(sys.argv)
