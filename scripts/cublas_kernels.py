import torch
from torch.profiler import profile, ProfilerActivity
for m, n, k in [(4096,)*3, (8192,)*3, (8192, 14336, 4096), (8192, 4096, 14336), (8192, 28672, 4096), (2048,)*3]:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16); b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    torch.mm(a, b.t(), out=c); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        torch.mm(a, b.t(), out=c); torch.cuda.synchronize()
    names = {e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA}
    print(f"{m}x{n}x{k}", sorted(names))
