"""Debug builds whose waits are bounded: a hang becomes a report that names its barrier, then a trap.

Off by default: the timed kernels' PTX is exactly what it is without this module. With
``GEMM_COURSE_WATCHDOG`` set (``1`` for the default bound, or a number of seconds) every kernel
that :func:`gemm_course.runtime.arch.compile_step` or ``compile_plan`` builds is a *debug build*:

* every mbarrier wait (CuTeDSL's pipelines, whose waits all go through ``MbarrierArray.wait``,
  and the kernels' own ``cute.arch.mbarrier_wait`` calls) polls ``mbarrier.try_wait.parity``
  against ``%globaltimer``; past the bound the first active lane of each waiting warp prints one
  line, waits a grace period (half the bound, at most 1 s) so that the other waits the hang stopped
  report too, and executes ``trap``::

      watchdog: sm100/6 timed out after 5.0 s waiting on mainloop_pipeline.consumer_wait(read_state)
      (full barrier, expects 49152 tx bytes) at step06_warp_specialized.py:133 in kernel,
      phase 0, block (3,0,0) warp 4 thread 128

* the kernels' spins on a global flag (step 11's stream-K hand-over) check the same bound through
  :func:`clock` and :func:`check`, which emit nothing in the default build.

The barrier is named by the kernel's own source line that asked for the wait, read off the Python
stack while the kernel traces, with the role the pipeline's method gives it (``consumer_wait``
waits on a *full* barrier, ``producer_acquire`` on an *empty* one) and, for a TMA barrier, the
bytes its transaction count expects. Hardware barriers (``bar.sync`` named barriers, the cluster
barrier) cannot be polled; a hang there is caught by the caller's process timeout instead
(``gemm_course.measure.stepwise`` runs each step in its own process for that reason).

A trap leaves the CUDA context unusable: run a debug build in a process of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from typing import Optional

ENV = "GEMM_COURSE_WATCHDOG"
DEFAULT_SECONDS = 5.0  # far above any single legitimate wait of the course's kernels (<< 0.1 s)
PREFIX = "watchdog:"

_active = threading.local()  # the step being traced, while a debug build traces


def setting(value: Optional[str] = None) -> Optional[float]:
    """The bound in seconds that ``GEMM_COURSE_WATCHDOG`` (or ``value``) asks for, or None (off)."""
    text = os.environ.get(ENV, "") if value is None else value
    text = text.strip().lower()
    if text in ("", "0", "off", "false", "no"):
        return None
    if text in ("1", "on", "true", "yes"):
        return DEFAULT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{ENV}={text!r}: use 1 for a {DEFAULT_SECONDS:g} s bound, a number of seconds, or 0 for off")
    if not 0 < seconds < 3600:
        raise ValueError(f"{ENV}={text!r}: the bound must lie between 0 and 3600 seconds")
    return seconds


def _bound_ns() -> int:
    return int(_active.seconds * 1e9)


def enabled() -> bool:
    """True while a debug build is tracing (inside :func:`debug_build`)."""
    return getattr(_active, "step", None) is not None


# ---------------------------------------------------------------------------------------------
# what the bounded wait says: the kernel's own line that asked for the wait
# ---------------------------------------------------------------------------------------------

_GENERATED = re.compile(r"^(then|else|elif|loop|while|if)_\w*_\d+$")  # the DSL's names for rewritten blocks
_ROLE = {"consumer_wait": "full barrier", "producer_acquire": "empty barrier", "producer_tail": "empty barrier"}


def call_site(frame=None) -> dict:
    """The innermost frame of the course's kernels (``kernels/`` or ``schedule.py``) on the stack,
    and the first pipeline method seen on the way there: ``{"file", "line", "function", "code",
    "role"}``."""
    import linecache

    frame = sys._getframe(1) if frame is None else frame
    role, site = None, None
    while frame is not None:
        code = frame.f_code
        path = code.co_filename.replace("\\", "/")
        if role is None and code.co_name in _ROLE:
            role = _ROLE[code.co_name]
        if "/gemm_course/kernels/" in path or path.endswith("/gemm_course/rules/schedule.py") or "/.cache/kernels/" in path:
            if site is None:
                text = linecache.getline(code.co_filename, frame.f_lineno).strip()
                site = {"file": os.path.basename(path), "line": frame.f_lineno, "function": code.co_name,
                        "code": text, "role": role}
            if not _GENERATED.match(code.co_name):  # the DSL's control-flow rewrite names its blocks
                site["function"] = code.co_name
                return site
        frame = frame.f_back
    return site or {"file": "?", "line": 0, "function": "?", "code": "an mbarrier wait", "role": role}


def describe(site: dict, tx_bytes: Optional[int] = None) -> str:
    """The barrier's name in a report: the source line, its role and expected bytes, where."""
    what = site["code"]
    for token in (" #", "  #"):
        what = what.split(token)[0].strip()
    extra = [site["role"]] if site.get("role") else []
    if tx_bytes:
        extra.append(f"expects {tx_bytes} tx bytes")
    detail = f" ({', '.join(extra)})" if extra else ""
    return f"{what}{detail} at {site['file']}:{site['line']} in {site['function']}"


# ---------------------------------------------------------------------------------------------
# the device side
# ---------------------------------------------------------------------------------------------

# One poll loop in PTX: labels are local to the braces, so every inlined copy has its own.
_BOUNDED_WAIT_PTX = """{
  .reg .pred p;
  .reg .u64 t0, t1;
  mov.u64 t0, %globaltimer;
WATCHDOG_POLL:
  mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;
  @p bra WATCHDOG_DONE;
  mov.u64 t1, %globaltimer;
  sub.u64 t1, t1, t0;
  setp.lt.u64 p, t1, $3;
  @p bra WATCHDOG_POLL;
  mov.u32 $0, 1;
  bra.uni WATCHDOG_END;
WATCHDOG_DONE:
  mov.u32 $0, 0;
WATCHDOG_END:
}"""

# true on the lowest active lane of the warp: one report per warp, whichever lanes wait
_FIRST_ACTIVE_LANE_PTX = """{
  .reg .b32 m, n, eq;
  .reg .pred p;
  activemask.b32 m;
  neg.s32 n, m;
  and.b32 m, m, n;
  mov.u32 eq, %lanemask_eq;
  setp.eq.u32 p, m, eq;
  selp.u32 $0, 1, 0, p;
}"""


def _asm_i32(text: str, operands, constraints: str):
    from cutlass._mlir.dialects import llvm
    from cutlass.cutlass_dsl import T

    return llvm.inline_asm(T.i32(), operands, text, constraints, has_side_effects=True, is_align_stack=False,
                           asm_dialect=llvm.AsmDialect.AD_ATT)


# after its report a timed-out thread waits this long before it traps, so that every other wait that
# times out meanwhile (a hang usually stops several barriers within microseconds) reports too
_GRACE_PTX = """{
  .reg .pred p;
  .reg .u64 t0, t1;
  mov.u64 t0, %globaltimer;
WATCHDOG_GRACE:
  mov.u64 t1, %globaltimer;
  sub.u64 t1, t1, t0;
  setp.lt.u64 p, t1, $0;
  @p bra WATCHDOG_GRACE;
}"""


def _grace():
    import cutlass
    from cutlass._mlir.dialects import llvm

    grace = cutlass.Int64(int(min(1.0, _active.seconds / 2) * 1e9)).ir_value()
    llvm.inline_asm(None, [grace], _GRACE_PTX, "l", has_side_effects=True, is_align_stack=False,
                    asm_dialect=llvm.AsmDialect.AD_ATT)


def _trap():
    from cutlass._mlir.dialects import llvm

    llvm.inline_asm(None, [], "trap;", "", has_side_effects=True, is_align_stack=False,
                    asm_dialect=llvm.AsmDialect.AD_ATT)


def _report(what: str, phase=None, detail_fmt: str = "", detail_args=()):
    """Print one line from the first active lane of the warp, then trap (every timed-out thread)."""
    import cutlass
    import cutlass.cute as cute

    first = cutlass.Int32(_asm_i32(_FIRST_ACTIVE_LANE_PTX, [], "=r"))
    bx, by, bz = cute.arch.block_idx()
    tidx, _, _ = cute.arch.thread_idx()
    text = f"{PREFIX} {_active.step} timed out after {_active.seconds:g} s waiting on {what}".replace("%", "%%")
    text = text.replace("{", "(").replace("}", ")")
    args = []
    if phase is not None:
        text += ", phase {}"
        args.append(cutlass.Int32(phase))
    text += detail_fmt + ", block ({},{},{}) warp {} thread {}"
    args += [*detail_args, bx, by, bz, tidx // 32, tidx]

    def say():
        cute.printf(text, *args)

    cutlass.if_generate(first != 0, say)
    _grace()
    _trap()


def bounded_wait(mbar_ptr, phase, what: str, *, loc=None, ip=None) -> None:
    """``mbarrier_wait(mbar_ptr, phase)`` that reports ``what`` and traps after the bound."""
    import cutlass
    from cutlass._mlir.dialects import llvm
    from cutlass.cutlass_dsl import T

    address = llvm.ptrtoint(T.i32(), mbar_ptr.to_llvm_ptr(loc=loc, ip=ip), loc=loc, ip=ip)
    bound = cutlass.Int64(_bound_ns()).ir_value(loc=loc, ip=ip)
    timed_out = cutlass.Int32(
        _asm_i32(_BOUNDED_WAIT_PTX, [address, cutlass.Int32(phase).ir_value(loc=loc, ip=ip), bound], "=r,r,r,l")
    )
    cutlass.if_generate(timed_out != 0, lambda: _report(what, phase))


def clock():
    """The start of a spin (``%globaltimer``) in a debug build; None, and no code, otherwise."""
    if not enabled():
        return None
    import cutlass.cute as cute

    return cute.arch.globaltimer()


def check(start, what: str, *values) -> None:
    """Inside a spin loop: in a debug build, report ``what`` (with ``values``) and trap once the spin
    has lasted longer than the bound since ``start`` (from :func:`clock`). Nothing otherwise."""
    if start is None or not enabled():
        return
    import cutlass
    import cutlass.cute as cute

    site = call_site(sys._getframe(1))
    name = f"{what} at {site['file']}:{site['line']} in {site['function']}"
    elapsed = cute.arch.globaltimer() - start
    fmt = "".join(", value {}" for _ in values)
    cutlass.if_generate(elapsed > cutlass.Int64(_bound_ns()), lambda: _report(name, None, fmt, values))


# ---------------------------------------------------------------------------------------------
# the build switch
# ---------------------------------------------------------------------------------------------


def _watched_array_wait(self, index, phase, *, loc=None, ip=None):
    """``MbarrierArray.wait`` of a debug build."""
    from cutlass.pipeline import PipelineOp

    site = call_site(sys._getframe(1))
    tx = getattr(self, "tx_count", None) if getattr(self, "op_type", None) is PipelineOp.TmaLoad else None
    bounded_wait(self.get_barrier(index, loc=loc, ip=ip), phase, describe(site, tx), loc=loc, ip=ip)


def _watched_mbarrier_wait(mbar_ptr, phase, *, loc=None, ip=None):
    """``cute.arch.mbarrier_wait`` of a debug build (the kernels' direct waits)."""
    bounded_wait(mbar_ptr, phase, describe(call_site(sys._getframe(1))), loc=loc, ip=ip)


@contextlib.contextmanager
def debug_build(step_key: str, seconds: Optional[float]):
    """While the block traces a kernel, its mbarrier waits are bounded (``seconds``; None: a plain
    build, nothing changed). The caller holds the compile lock (the patch is process-wide)."""
    if seconds is None:
        yield
        return
    import cutlass.cute as cute
    from cutlass.pipeline import helpers

    saved = helpers.MbarrierArray.wait, cute.arch.mbarrier_wait
    _active.step, _active.seconds = step_key, seconds
    helpers.MbarrierArray.wait = _watched_array_wait
    cute.arch.mbarrier_wait = _watched_mbarrier_wait
    try:
        yield
    finally:
        helpers.MbarrierArray.wait, cute.arch.mbarrier_wait = saved
        _active.step = None


def parse_reports(text: str) -> list:
    """The watchdog lines in a log, one per distinct barrier, with how many warps reported it:
    ``[(count, line without block/warp/thread), ...]``, most frequent first."""
    import collections

    seen = collections.Counter()
    for line in text.splitlines():
        if line.startswith(PREFIX):
            seen[re.sub(r", block \(.*$", "", line.strip())] += 1
    return sorted(((n, line) for line, n in seen.items()), key=lambda item: -item[0])
