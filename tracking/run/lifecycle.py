"""How a run ends: FINISHED only when the work finished; FAILED on an error; KILLED on Ctrl-C or SIGTERM.

Ctrl-C and SIGTERM (what DVC and schedulers send) raise `KeyboardInterrupt` and `Terminated` so the same
clean-up path runs. Inside `deferred_interrupts` (around Keras' `fit`) they are only recorded, and raised at
the next safe point (`raise_if_interrupted`, called between batches): an exception raised asynchronously
inside TensorFlow's input pipeline can leave the process hanging instead of exiting.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(BaseException):
    """The process received SIGTERM; raised so that runs and files are closed on the way out."""

    exit_code = 143


class _State(threading.local):
    deferring = False
    pending: int | None = None


_state = _State()
_killed: list[str] = []  # ids of the runs this process ended as KILLED


def record_killed(run_id: str) -> None:
    """Remember that this process ended run `run_id` as KILLED (the interrupt's message says so)."""
    _killed.append(run_id)


def ended_killed() -> list[str]:
    """The runs this process ended as KILLED, in order."""
    return list(_killed)


def status_for(error: BaseException | None) -> str:
    """The MLflow run status for an exit with `error` (None: a clean exit)."""
    if error is None:
        return "FINISHED"
    if isinstance(error, (KeyboardInterrupt, Terminated)):
        return "KILLED"
    return "FAILED"


def _interrupt(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(f"received signal {signum}")


def _handle(signum: int, frame: object) -> None:
    if _state.deferring:
        _state.pending = signum
        return
    raise _interrupt(signum)


@contextmanager
def interrupts_raise() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise in the main thread (or wait for a safe point when deferred)."""
    previous = {sig: signal.signal(sig, _handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Record interrupts instead of raising them mid-operation; raise them at the latest on the way out."""
    outer = _state.deferring
    _state.deferring = True
    try:
        yield
    finally:
        _state.deferring = outer
    if not outer:
        raise_if_interrupted()


def raise_if_interrupted() -> None:
    """Raise the interrupt recorded while deferring, if any: call it where stopping is safe."""
    if _state.pending is not None:
        signum, _state.pending = _state.pending, None
        raise _interrupt(signum)


def pending_interrupt() -> BaseException | None:
    """The interrupt recorded while deferring, if any, without clearing it."""
    return None if _state.pending is None else _interrupt(_state.pending)


def discard_interrupt() -> None:
    """Forget a recorded interrupt: the work it would have stopped is already over."""
    _state.pending = None
