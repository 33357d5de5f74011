"""A single background thread that writes to the tracking store while training runs on.

MLflow's own asynchronous logging polls its queue once a second, so closing it costs up to a second per
run; this writer wakes at once. The first error a write raises is kept and raised again by `close`, so a
failing store is reported once, never dropped.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

_STOP = object()


class BackgroundWriter:
    """Runs submitted writes in order on one daemon thread."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._error: BaseException | None = None
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
        while (write := self._queue.get()) is not _STOP:
            if self._error is None:
                try:
                    write()
                except Exception as err:
                    self._error = err
