"""Compile NVIDIA's CuTeDSL Blackwell persistent dense GEMM (cluster launch control) beside the
course's single-CTA step 11 (the decode path) at the same tile and cluster, and compare the PTX.

    .venv/bin/python scripts/compare_cutlass_decode.py CUTLASS_CHECKOUT [--tiles 128x64x1x2,64x64x1x2,128x96x1x2]

Not part of CI: it needs a CUTLASS clone (work tree or bare); it compiles on the CPU, no GPU.
NVIDIA's kernel is read from
``examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm_persistent_dynamic.py``
(``PersistentDenseGemmKernel(acc_dtype, use_2cta_instrs=False, mma_tiler_mn, cluster_shape_mn,
use_tma_store=True)``) and imported from a temporary copy; nothing of it is copied into this
repository. A tile is ``TILE_M x TILE_N x CLUSTER_M x CLUSTER_N``; NVIDIA's example admits
widths that are multiples of 32 (the course's rule uses multiples of 16, which the PTX ISA and
CUTLASS's C++ shape list allow for M = 128).

Both sides get bf16 K-major A (M, K) and B (N, K) and a row-major bf16 C with symbolic M, N, K
(NVIDIA's kernel takes a batch mode L = 1 as well). The course is compiled twice: with the
stream-K tail (as ``config_for`` runs it) and without (``stream_k=False``, like for like with
NVIDIA's, which has no K split). The measurements are ``compare_cutlass_tutorial.analyze``'s; the
table prints each quantity with ``=`` where all three agree.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_cutlass_tutorial as cct  # noqa: E402  (the sibling script's PTX analysis)

EXAMPLE = "examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm_persistent_dynamic.py"
ROWS = [
    ("op_mma", "opcode: tcgen05.mma"), ("op_commit", "opcode: tcgen05.commit"), ("op_load", "opcode: TMA loads"),
    ("op_store", "opcode: TMA store"), ("op_tld", "opcode: tcgen05.ld"), ("op_alloc", "opcode: tcgen05.alloc/dealloc"),
    ("idesc", "idesc values"), ("idesc_decoded", "idesc decoded (negate bits aside)"),
    ("sdesc_templates", "smem descriptor template(s)"), ("sdesc_decoded", "template decoded"),
    ("k_adv", "A, B descriptor advance per k16 MMA (B)"), ("stage_stride", "A, B stage stride (B)"),
    ("expect_tx", "expect_tx bytes (value: sites)"), ("alloc_cols", "tcgen05.alloc columns"),
    ("acc_stride", "accumulator stage stride (columns)"), ("acc_flags", "accumulate flags of a K tile's 4 MMAs"),
    ("inits", "mbarrier.init arrival counts (sorted)"), ("mcast_load", "TMA multicast masks per CTA"),
    ("mcast_commit", "tcgen05.commit multicast masks per CTA"), ("reqntid", "threads per CTA"),
    ("regs", "registers per thread"), ("smem", "dynamic shared memory (B, launch)"), ("stages", "A/B stages"),
]


def read_example(checkout: str) -> str:
    """The example's source from a work tree, or through ``git show HEAD:...`` from a bare clone."""
    direct = os.path.join(checkout, EXAMPLE)
    if os.path.exists(direct):
        with open(direct) as f:
            return f.read()
    git_dir = os.path.join(checkout, ".git") if os.path.isdir(os.path.join(checkout, ".git")) else checkout
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{EXAMPLE}"], capture_output=True, text=True,
                          check=True).stdout


def load_example(source: str, directory: str):
    """Import the example from a copy in ``directory`` (CuTeDSL reads a jit function's source file
    while it compiles, so the copy must outlive the compiles)."""
    path = os.path.join(directory, "nvidia_dense_gemm_persistent_dynamic.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("nvidia_dense_gemm_persistent_dynamic", path)
    mod = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec.loader.exec_module(mod)
    return mod


def compile_nvidia(mod, tile_m: int, tile_n: int, cluster: tuple) -> tuple:
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from gemm_course.runtime import arch

    m, n, k = cute.sym_int32(), cute.sym_int32(divisibility=8), cute.sym_int32(divisibility=8)

    def fake(rows, cols):  # (rows, cols, L = 1), cols contiguous
        stride = (cute.sym_int64(divisibility=8), 1, cute.sym_int64(divisibility=8))
        return make_fake_tensor(cutlass.BFloat16, (rows, cols, 1), stride=stride, assumed_align=16)

    gemm = mod.PersistentDenseGemmKernel(cutlass.Float32, False, (tile_m, tile_n), cluster, True)
    with tempfile.TemporaryDirectory(prefix="gemm-course-") as tmp, arch.targeting("sm_100a", tmp):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = cute.compile[cute.KeepPTX, cute.KeepCUBIN](gemm, fake(m, k), fake(n, k), fake(m, n),
                                                                  make_fake_stream())
        ptx = arch._artifact(compiled.artifacts.PTX, binary=False)
        cubin = arch._artifact(compiled.artifacts.CUBIN, binary=True)
    return cct.Build("NVIDIA", ptx, cubin, str(compiled.ir_module), stages=gemm.num_ab_stage), gemm


def compile_course(tile_m: int, tile_n: int, cluster: tuple, stream_k: bool) -> cct.Build:
    from gemm_course.rules import decode_rule
    from gemm_course.runtime import arch, ladder

    step = ladder.get("sm100/11")
    epi_n, epi_stages = decode_rule.epilogue(tile_n)
    config = step.config(cta_group=1, tile_m=tile_m, tile_n=tile_n, cluster_m=cluster[0], cluster_n=cluster[1],
                         epi_n=epi_n, epi_stages=epi_stages, stages=decode_rule.max_stages(tile_m, tile_n, epi_n, epi_stages),
                         stream_k=stream_k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        art = arch.compile_step(step, config, target="sm_100a")
    label = "course" + ("" if stream_k else " (stream_k=False)")
    return cct.Build(label, art.ptx, art.cubin, str(art.compiled.ir_module), note=str(config), stages=config.stages)


def measure(build: cct.Build) -> dict:
    m = cct.analyze(build)
    ids = sorted(v for v in m["idesc"] if v is not None)
    m["idesc"] = ", ".join(hex(v) for v in ids) + (" (and unknown)" if None in m["idesc"] else "")
    m["idesc_decoded"] = sorted({cct.decode_idesc(v).split(" negA")[0] for v in ids})
    m["sdesc_decoded"] = sorted(cct.decode_sdesc(v) for v in m["sdesc_templates"])
    m["sdesc_templates"] = sorted(hex(v) for v in m["sdesc_templates"])
    m["inits"] = sorted(m["inits"], key=lambda s: (len(s), s))
    m["expect_tx"] = dict(sorted(m["expect_tx"].items()))
    m["stages"] = build.stages
    return m


def cell(value) -> str:
    if isinstance(value, (list, tuple, set)) and not isinstance(value, str):
        value = "; ".join(str(v) for v in value)
    return str(value).replace("|", "\\|")


def compare(mod, tile_m: int, tile_n: int, cluster: tuple) -> list:
    cct.CLUSTER = (cluster[0], cluster[1], 1)  # the ranks whose masks analyze evaluates
    nvidia, gemm = compile_nvidia(mod, tile_m, tile_n, cluster)
    sides = [measure(nvidia), measure(compile_course(tile_m, tile_n, cluster, False)),
             measure(compile_course(tile_m, tile_n, cluster, True))]
    rows = []
    for key, name in ROWS:
        values = [cell(s.get(key)) for s in sides]
        rows.append((name, "=" if len(set(values)) == 1 else "DIFF", *values))
    return rows


def print_tile(mod, spec: str):
    tile_m, tile_n, cm, cn = (int(x) for x in spec.split("x"))
    print(f"\n### {tile_m} x {tile_n}, cluster ({cm}, {cn}), cta_group::1\n")
    print("| quantity | | NVIDIA dense_gemm_persistent_dynamic | course, stream_k=False | course, stream_k=True |")
    print("|---|---|---|---|---|")
    for row in compare(mod, tile_m, tile_n, (cm, cn)):
        print("| " + " | ".join(row) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", help="a clone of github.com/NVIDIA/cutlass (work tree or bare)")
    parser.add_argument("--tiles", default="128x64x1x2,64x64x1x2,128x96x1x2",
                        help="TILE_MxTILE_NxCLUSTER_MxCLUSTER_N, comma-separated")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cutlass-example-") as directory:
        mod = load_example(read_example(args.checkout), directory)
        for spec in args.tiles.split(","):
            print_tile(mod, spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
