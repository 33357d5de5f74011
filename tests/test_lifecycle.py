import os
import signal

import pytest

from tracking.run.lifecycle import Terminated, deferred_interrupts, interrupts_raise, raise_if_interrupted, status_for


def test_status_for():
    assert status_for(None) == "FINISHED"
    assert status_for(ValueError()) == "FAILED"
    assert status_for(KeyboardInterrupt()) == status_for(Terminated()) == "KILLED"


def test_sigterm_raises_at_once_outside_deferral():
    with interrupts_raise(), pytest.raises(Terminated):
        os.kill(os.getpid(), signal.SIGTERM)


def test_deferred_interrupt_waits_for_a_safe_point():
    reached = []
    with interrupts_raise(), pytest.raises(KeyboardInterrupt), deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after signal")
        with pytest.raises(KeyboardInterrupt):
            raise_if_interrupted()
        reached.append("second signal")
        os.kill(os.getpid(), signal.SIGINT)
    assert reached == ["after signal", "second signal"]
    raise_if_interrupted()
