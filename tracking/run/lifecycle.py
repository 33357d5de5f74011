"""How a run ends: FINISHED only when the work finished; FAILED on an error; KILLED on Ctrl-C or SIGTERM.

Ctrl-C and SIGTERM (what DVC and schedulers send) raise `KeyboardInterrupt` and `Terminated` so the same
clean-up path runs. Inside `deferred_interrupts` (around Keras' `fit`) they are only recorded, and raised at
the next safe point (`raise_if_interrupted`, called between batches): an exception raised asynchronously
inside TensorFlow's input pipeline can leave the process hanging instead of exiting.
"""

from __future__ import annotations

import os
import signal
import sys
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


def quiet_start_up() -> None:
    """Ctrl-C in a stage's start-up (seconds of imports before `run_main` takes interrupts) exits 130 with the one
    line `interrupted`, not a KeyboardInterrupt traceback through whatever module was being imported. A SIGINT
    the parent set to be ignored (a shell's background job) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _start_up_interrupt)


def end_start_up() -> None:
    """Give Ctrl-C back to Python's `KeyboardInterrupt` (`run_main` and the `Tracker` take it from here)."""
    if signal.getsignal(signal.SIGINT) is _start_up_interrupt:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _start_up_interrupt(signum: int, frame: object) -> None:
    """Exit at once: an exception raised inside an extension module's import can end in that module's own panic
    (pydantic_core's), and nothing is open or half-written yet to clean up."""
    print("interrupted", file=sys.stderr, flush=True)
    os._exit(130)


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
