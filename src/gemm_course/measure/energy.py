"""Energy per GEMM from NVML's total-energy counter.

:func:`open_meter` opens the counter (and the SM clock) of one GPU as an :class:`EnergyMeter`, or
says why it cannot; :func:`energy_block` runs a provider back to back and takes the board's power
between the counter's coarse steps; :func:`energy_fields` turns each provider's blocks into a
record's energy fields. :func:`gemm_course.measure.user_loop.sustained` runs the blocks;
:mod:`gemm_course.measure.bench` describes the protocol and re-exports these names.
"""

from __future__ import annotations

import collections
import statistics
from typing import Callable, Optional

from . import timing

ENERGY_SKIP_S = 0.1  # counter steps in a block's first 100 ms are not used (they may count the idle time before it)


class EnergyMeter:
    """NVML's total-energy counter (millijoules since the driver loaded) and SM clock of one GPU."""

    def __init__(self, nvml, handle):
        self.nvml, self.handle = nvml, handle

    def energy_mj(self) -> int:
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)

    def sm_clock_mhz(self) -> Optional[float]:
        try:
            return float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        except Exception:
            return None


def _nvml_handle(nvml, device: int):
    """The NVML handle of torch's CUDA device ``device``: by PCI bus id (CUDA and NVML may number
    GPUs differently), else NVML's index ``device``."""
    try:
        import torch

        p = torch.cuda.get_device_properties(device)
        bus = f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
        for key in (bus, bus.encode()):
            try:
                return nvml.nvmlDeviceGetHandleByPciBusId(key)
            except Exception:
                continue
    except Exception:
        pass
    return nvml.nvmlDeviceGetHandleByIndex(device)


def open_meter(device: int = 0) -> tuple:
    """``(EnergyMeter, None)``, or ``(None, why not)`` where ``pynvml`` (nvidia-ml-py) is missing,
    NVML does not start or the GPU has no total-energy counter. Imports ``pynvml`` only here."""
    try:
        import pynvml
    except ImportError as e:
        return None, f"no NVML: the pynvml module (nvidia-ml-py) is not installed ({e})"
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return None, f"NVML did not start: {type(e).__name__}: {e}"
    try:
        handle = _nvml_handle(pynvml, device)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as e:
        return None, f"NVML's total-energy counter is not available on this GPU: {type(e).__name__}: {e}"
    return EnergyMeter(pynvml, handle), None


def energy_block(fn: Callable, seconds: float, chunk: int, meter: EnergyMeter, in_flight: int = 2,
                 clock_every_s: float = 0.01, skip_s: float = ENERGY_SKIP_S) -> dict:
    """Energy per launch of ``fn`` run back to back for ``seconds``, from NVML's counter.

    The host enqueues ``chunk`` launches at a time and records an event after each chunk; it keeps
    at most ``in_flight`` chunks queued ahead of the GPU and, while it waits for the oldest to
    finish (and once after every chunk), polls the counter, noting each time the value changed,
    and the SM clock every ``clock_every_s``. Power is the energy between the first and the last
    change after ``skip_s`` over the host time between them; times the block's event-timed ms per
    launch it is the energy per launch. Where the host launches more slowly than the GPU runs, the
    gaps between launches count too, as they do in a user's loop. With fewer than two such changes,
    the counter's readings before and after the block (``method: whole block``: coarse).

    Returns ``{launches, event_ms, power_w, window_s, j_per_gemm, clocks_mhz, changes, method}``."""
    import torch

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    pending: collections.deque = collections.deque()
    changes, clocks_mhz = [], []
    e0 = last = meter.energy_mj()
    t0 = timing._now()
    next_clock = t0

    def poll():
        nonlocal last, next_clock
        e, t = meter.energy_mj(), timing._now()
        if e != last:
            changes.append((t, e))
            last = e
        if t >= next_clock:
            mhz = meter.sm_clock_mhz()
            if mhz is not None:
                clocks_mhz.append(mhz)
            next_clock = t + clock_every_s

    launches = 0
    start.record()
    while timing._now() - t0 < seconds:
        for _ in range(chunk):
            fn()
        launches += chunk
        ev = torch.cuda.Event()
        ev.record()
        pending.append(ev)
        poll()
        while len(pending) > in_flight:
            while not pending[0].query():
                poll()
            pending.popleft()
    end.record()
    torch.cuda.synchronize()
    t1, e1 = timing._now(), meter.energy_mj()
    event_ms = start.elapsed_time(end) / launches
    used = [(t, e) for t, e in changes if t - t0 >= skip_s]
    if len(used) >= 2 and used[-1][0] > used[0][0]:
        (ta, ea), (tb, eb) = used[0], used[-1]
        power, window, method = (eb - ea) / 1e3 / (tb - ta), tb - ta, "counter changes"
    else:
        power, window, method = (e1 - e0) / 1e3 / (t1 - t0), t1 - t0, "whole block"
    return {"launches": launches, "event_ms": event_ms, "power_w": power, "window_s": window,
            "j_per_gemm": power * event_ms / 1e3, "clocks_mhz": clocks_mhz, "changes": len(changes), "method": method}


def energy_fields(blocks: dict, note: Optional[str] = None) -> dict:
    """A record's energy fields from each provider's :func:`energy_block` results (``{name: [block,
    ...]}``, one per round): per provider the mean energy per GEMM over the rounds and each round's,
    the seconds of counter window it rests on, the launches, the mean power and the median SM clock
    of all samples. A provider without blocks gets None; ``energy_note`` is ``note`` (why there is
    no energy) or, where a block fell back to the whole-block reading, says so."""
    out = {"energy_j_per_gemm": {}, "energy_j_per_gemm_rounds": {}, "energy_window_s": {}, "energy_launches": {},
           "energy_power_w": {}, "sm_clock_mhz_median": {}}
    whole = []
    for name, rounds in blocks.items():
        if not rounds:
            for key in out:
                out[key][name] = None
            continue
        out["energy_j_per_gemm"][name] = statistics.mean(b["j_per_gemm"] for b in rounds)
        out["energy_j_per_gemm_rounds"][name] = [b["j_per_gemm"] for b in rounds]
        out["energy_window_s"][name] = sum(b["window_s"] for b in rounds)
        out["energy_launches"][name] = sum(b["launches"] for b in rounds)
        out["energy_power_w"][name] = statistics.mean(b["power_w"] for b in rounds)
        samples = [mhz for b in rounds for mhz in b["clocks_mhz"]]
        out["sm_clock_mhz_median"][name] = statistics.median(samples) if samples else None
        whole += [name for b in rounds if b["method"] != "counter changes"]
    if note is None and whole:
        note = (f"{len(whole)} block(s) ({', '.join(sorted(set(whole)))}) saw fewer than two counter changes: "
                "energy read before and after the block (coarse)")
    out["energy_note"] = note
    return out
