"""A long measuring run that is stopped keeps what it measured.

The device scripts bound each phase with ``timeout``, which sends SIGTERM; Python's default for it
ends the process at once, and a run that writes its records at the end loses them all.
:func:`stopped_by_sigterm` turns SIGTERM (and Ctrl-C) into the end of the block, so the code after
it writes what was measured and says that the run did not finish.
"""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def stopped_by_sigterm():
    """Ends the block early on SIGTERM or Ctrl-C and yields a list, empty unless the block was
    stopped (then it holds ``"interrupted"``). The caller's SIGTERM handler is restored after."""
    stopped = []

    def on_term(signum, frame):
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    previous = signal.signal(signal.SIGTERM, on_term) if main else None
    try:
        yield stopped
    except KeyboardInterrupt:
        stopped.append("interrupted")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
