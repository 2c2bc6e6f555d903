"""Write the chapter notebooks (notebooks/0*.ipynb) from this file, without outputs.

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
run); the caption says where and when. Hatched bars are the seed series' B200 figures, quoted, not
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

NOTEBOOKS = {
    "00_cute_mental_model.ipynb": CH0,
    "01_naive.ipynb": CH1,
    "02_tensor_cores_tma.ipynb": CH2,
    "03_swizzling.ipynb": CH3,
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
