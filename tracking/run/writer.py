"""A single background thread that writes to the tracking store while training runs on.

MLflow's own asynchronous logging polls its queue once a second, so closing it costs up to a second per
run; this writer wakes at once. Between writes it calls a `beat` every `interval` seconds (the run's heartbeat,
tracking/store/stale.py), however busy or idle the queue is. The first error a write or a beat raises is kept
and raised again by `close`, so a failing store is reported once, never dropped.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

_STOP = object()


class BackgroundWriter:
    """Runs submitted writes in order on one daemon thread, and `beat` every `interval` seconds if given."""

    def __init__(self, beat: Callable[[], object] | None = None, interval: float = 0.0) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._beat = beat
        self._interval = interval
        self._thread = threading.Thread(target=self._work, name="tracking-writer", daemon=True)
        self._thread.start()

    def submit(self, write: Callable[[], object]) -> None:
        """Queue `write`; after a failure further writes are skipped and the failure is raised on close."""
        self._queue.put(write)

    def close(self) -> None:
        """Wait for every queued write, then raise the first failure, if any."""
        self._queue.put(_STOP)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _work(self) -> None:
        next_beat = time.monotonic() + self._interval
        while True:
            try:
                write = self._queue.get(timeout=max(0.0, next_beat - time.monotonic()) if self._beat else None)
            except queue.Empty:
                write = None
            if write is _STOP:
                return
            if write is not None:
                self._run(write)
            if self._beat is not None and time.monotonic() >= next_beat:
                self._run(self._beat)
                next_beat = time.monotonic() + self._interval

    def _run(self, write: Callable[[], object]) -> None:
        if self._error is None:
            try:
                write()
            except Exception as err:
                self._error = err
