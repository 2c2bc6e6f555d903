"""A long measuring run that is stopped, or fails part-way, keeps what it measured.

The device scripts bound each phase with ``timeout``, which sends SIGTERM; Python's default for it
ends the process at once, and a run that writes its records at the end loses them all. So does an
exception part-way (a CUDA fault in one kernel). :func:`until_stopped` turns SIGTERM, Ctrl-C and
an exception into the end of the block, so the code after it writes what was measured and then says
(:func:`say`) that the run did not finish.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import traceback


@contextlib.contextmanager
def until_stopped():
    """Ends the block early on SIGTERM, Ctrl-C or an exception (its traceback printed to stderr) and
    yields a list, empty unless the block ended early; then it holds why (``"interrupted"`` or
    ``"failed: ..."``). The caller's SIGTERM handler is restored after."""
    stopped = []

    def on_term(signum, frame):
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    previous = signal.signal(signal.SIGTERM, on_term) if main else None
    try:
        yield stopped
    except KeyboardInterrupt:
        stopped.append("interrupted")
    except Exception as e:  # noqa: BLE001  (any failure: what was measured before it is still written)
        stopped.append(f"failed: {type(e).__name__}: {e}")
        say(traceback.format_exc(), file=sys.stderr, end="")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def say(*args, **kwargs) -> None:
    """``print``, except that a closed output is no error: under ``timeout ... | tee log`` the SIGTERM
    that stops the run also ends ``tee``, and a print into its pipe would raise before the records
    measured so far are written (write them first; say what happened after)."""
    try:
        print(*args, **kwargs, flush=True)
    except OSError:  # BrokenPipeError, or a closed terminal
        pass
