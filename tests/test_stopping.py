"""A stopped or failing measuring run keeps what it measured (gemm_course.measure.stopping)."""

import io
import os
import signal

import pytest

from gemm_course.measure import stopping


class ClosedPipe(io.StringIO):
    """An output whose reader is gone, as tee's is once timeout's SIGTERM has ended it."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.fast
def test_a_failure_with_its_output_gone_still_ends_the_block(monkeypatch):
    monkeypatch.setattr("sys.stderr", ClosedPipe())
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    measured = []
    with stopping.until_stopped() as stopped:
        measured.append(1)
        print("a line into the closed pipe")  # raises BrokenPipeError, as a run's progress line would
        measured.append(2)
    assert measured == [1] and stopped and stopped[0].startswith("failed: BrokenPipeError")
    stopping.say("stopped: written")  # no error either


@pytest.mark.fast
def test_sigterm_ends_the_block_and_says_so():
    with stopping.until_stopped() as stopped:
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("the block went on after SIGTERM")
    assert stopped == ["interrupted"]
