"""List the kernel cuBLAS runs for each shape (GPU).  python3 scripts/cublas_kernels.py 4096 8192x4096x28672 ..."""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from gemm_course.cli import _shapes

LLM = (4096, 6144, 14336, 28672)
SWEEP = ["2048", "4096", "8192", "12288", "16384"] + [f"8192x{n}x{k}" for n in LLM for k in LLM]

for m, n, k in _shapes(sys.argv[1:] or SWEEP):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    torch.mm(a, b.t(), out=c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        torch.mm(a, b.t(), out=c)
        torch.cuda.synchronize()
    names = {e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA}
    print(f"{m}x{n}x{k}", sorted(names), flush=True)
