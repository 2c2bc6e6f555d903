"""List the kernels cuBLAS runs for each shape (GPU); with ``--out``, a record per shape there.

    python3 scripts/cublas_kernels.py 4096 8192x4096x28672 ...
    python3 scripts/cublas_kernels.py --out OUT 256x14336x4096 ...   (kind cublas_kernels, tag cublas_kernels)
"""

import argparse
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from gemm_course.cli import _shapes
from gemm_course.measure import bench, cublas_kernels, records

LLM = (4096, 6144, 14336, 28672)
SWEEP = ["2048", "4096", "8192", "12288", "16384"] + [f"8192x{n}x{k}" for n in LLM for k in LLM]


def kernels_of(m: int, n: int, k: int) -> list:
    """The CUDA kernels of one torch.mm(x, W^T) of this shape, warmed up once before the profile."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    torch.mm(a, b.t(), out=c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        torch.mm(a, b.t(), out=c)
        torch.cuda.synchronize()
    return sorted({e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shapes", nargs="*", default=SWEEP)
    p.add_argument("--out", help="a folder for the records (kind cublas_kernels); none: print only")
    args = p.parse_args(argv)
    command = bench.provenance_command("python3 scripts/cublas_kernels.py", sys.argv[1:] if argv is None else argv)
    out = []
    for m, n, k in _shapes(args.shapes):
        names = kernels_of(m, n, k)
        print(f"{m}x{n}x{k}", names, flush=True)
        out.append(cublas_kernels.record(m, n, k, names, command))
    if args.out and out:
        print(records.write_records(out, "cublas_kernels", args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
