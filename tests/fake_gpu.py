"""A simulated GPU for the bench's timing and energy code on the CPU: a host clock, a launch queue,
CUDA events and NVML's total-energy counter, which (as on real boards) moves in coarse steps.

    gpu = FakeGPU()
    gpu.install(monkeypatch)          # torch.cuda.Event / synchronize and the bench's host clock use it
    step = gpu.kernel(ms=0.5, watts=600.0)
    meter = bench.EnergyMeter(gpu.nvml, handle=0)
"""

import bisect
import math
import types


class FakeEvent:
    def __init__(self, gpu, enable_timing=False):
        self.gpu, self.t = gpu, None

    def record(self, stream=None):
        self.t = max(self.gpu.now, self.gpu.free)  # the GPU reaches it when its queue is done

    def query(self):
        self.gpu.now += self.gpu.query_s
        return self.gpu.now >= self.t

    def synchronize(self):
        self.gpu.now = max(self.gpu.now, self.t)

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class FakeGPU:
    """Kernels run one after another in launch order; the board draws ``idle_w`` when no kernel
    runs and a kernel's own watts while it runs; the counter reports the energy up to the last
    multiple of ``update_s``; every host call costs host time."""

    def __init__(self, idle_w=100.0, update_s=0.1, nvml_s=20e-6, query_s=2e-6, mhz_of=None):
        self.now = 0.0  # host seconds
        self.free = 0.0  # when the GPU's queue runs dry
        self.idle_w, self.update_s, self.nvml_s, self.query_s = idle_w, update_s, nvml_s, query_s
        self.starts, self.ends, self.watts, self.cumulative = [], [], [], [0.0]  # kernels, extra joules before each
        self.mhz_of = mhz_of or (lambda watts: 1980.0)
        self.launched = []  # names, in launch order
        self.nvml = types.SimpleNamespace(
            NVML_CLOCK_SM=0,
            nvmlDeviceGetTotalEnergyConsumption=lambda handle: self.counter_mj(),
            nvmlDeviceGetClockInfo=lambda handle, which: self.clock_mhz(),
        )

    def install(self, monkeypatch):
        import torch

        from gemm_course.measure import timing

        monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=False: FakeEvent(self, enable_timing))
        monkeypatch.setattr(torch.cuda, "synchronize", self.synchronize)
        monkeypatch.setattr(timing, "_now", lambda: self.now)  # the one host clock the bench's modules read

    def kernel(self, ms, watts, host_us=10.0, name="kernel"):
        """A launch function: ``host_us`` of host time, then ``ms`` on the GPU at ``watts``."""

        def launch():
            self.now += host_us * 1e-6
            start = max(self.now, self.free)
            self.free = start + ms * 1e-3
            self.cumulative.append(self.cumulative[-1] + (watts - self.idle_w) * ms * 1e-3)
            self.starts.append(start)
            self.ends.append(self.free)
            self.watts.append(watts)
            self.launched.append(name)

        return launch

    def synchronize(self):
        self.now = max(self.now, self.free)

    def energy_j(self, t):
        """Joules drawn from time 0 to ``t``."""
        done = bisect.bisect_right(self.ends, t)  # kernels finished by t
        extra = self.cumulative[done]
        if done < len(self.starts) and self.starts[done] < t:
            extra += (self.watts[done] - self.idle_w) * (t - self.starts[done])
        return self.idle_w * t + extra

    def counter_mj(self):
        self.now += self.nvml_s
        return int(self.energy_j(math.floor(self.now / self.update_s) * self.update_s) * 1e3)

    def clock_mhz(self):
        self.now += self.nvml_s
        i = bisect.bisect_right(self.starts, self.now) - 1
        running = i >= 0 and self.ends[i] > self.now
        return self.mhz_of(self.watts[i] if running else None)
