"""How a run ends: FINISHED only when the work finished; FAILED on an error; KILLED on Ctrl-C or SIGTERM.

SIGTERM (what DVC and schedulers send) is turned into `Terminated` so that the same clean-up path runs.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(BaseException):
    """The process received SIGTERM; raised so that runs and files are closed on the way out."""

    exit_code = 143


def status_for(error: BaseException | None) -> str:
    """The MLflow run status for an exit with `error` (None: a clean exit)."""
    if error is None:
        return "FINISHED"
    if isinstance(error, (KeyboardInterrupt, Terminated)):
        return "KILLED"
    return "FAILED"


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises `Terminated` in the main thread instead of killing the process."""

    def _raise(signum: int, frame: object) -> None:
        raise Terminated(f"received signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
