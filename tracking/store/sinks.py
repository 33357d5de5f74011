"""Where a run's records go, behind one interface (sacred's observers): a `Sink` takes each operation
(tracking/store/operations.py) with `write` and says what it kept with `close`.

- `MlflowSink`: a run in an MLflow store, through `apply`. The live run writes to it, and `tracking sync`
  replays a journal into one (tracking/store/sync.py), so the online and the replayed run share one path.
- `Journal`: the offline journal on disk (tracking/store/journal.py).
- `RunSink`: a run's own sink, which the `Tracker` and its background writer hand every record to: the
  `MlflowSink` while the server answers, then, from the first write that finds the server gone, the `Journal`
  with the whole run so far. A store fault (a full disk, a damaged or read-only store) is raised as a
  `StoreFault`, never journaled.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tracking.store.faults import describe, server_unavailable, store_fault
from tracking.store.journal import OPENED, SPOOL, SPOOLED, Journal, journal_folder
from tracking.store.location import shown
from tracking.store.operations import Op, apply
from tracking.store.sqlite import private_folder

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Takes a run's operations in order; `close` returns a line for the user about what it kept, if any."""

    def write(self, op: Op) -> None: ...

    def close(self) -> str | None: ...


class MlflowSink:
    """One run of an MLflow store: each operation applied through the store's client as it comes."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def write(self, op: Op) -> None:
        apply(self.client, self.run_id, op)

    def close(self) -> str | None:
        return None


class RunSink:
    """A run's records: to its MLflow run while the server answers, then to the offline journal. The run's
    `BackgroundWriter` (tracking/run/writer.py) is the thread that hands them over; this decides where they land.

    While online, what the server took is remembered (an artifact as a copy in the run's spool), so that on the
    loss the journal starts with the whole run."""

    def __init__(self, live: Sink, run_id: str, root: Path, uri: str, experiment: str) -> None:
        """`live`: where run `run_id`'s records go while its server answers (an `MlflowSink`)."""
        self.live = live
        self.run_id = run_id
        self.root = root
        self.uri = uri
        self.experiment = experiment
        self.journal: Journal | None = None
        self._written: list[Op] = []
        self._spool = root / SPOOL / run_id
        self._spooled = itertools.count()
        self._lock = threading.Lock()

    @property
    def offline(self) -> bool:
        return self.journal is not None

    def write(self, op: Op) -> None:
        """Write `op` to the server, or to the journal once the server is lost; a store fault is raised as a
        `StoreFault`."""
        try:
            self._write(op)
        except Exception as err:
            fault = store_fault(err, self.uri)
            if fault is None:
                raise
            raise fault from err

    def _write(self, op: Op) -> None:
        if self.journal is None:
            try:
                self.live.write(op)
            except Exception as err:
                if not server_unavailable(err):
                    raise
                self.lose(err)
            else:
                remembered = self._remember(op)
                with self._lock:
                    if self.journal is None:
                        self._written.append(remembered)
                    else:
                        self.journal.write(remembered, online=True)
                return
        with self._lock:
            self.journal.write(op)

    def _remember(self, op: Op) -> Op:
        """What is needed to journal `op` later: an artifact's file copied into the spool, since its own path may
        be a temporary file deleted once written, whatever its size (the kernel copies it: no memory is held)."""
        if op["op"] != "artifact":
            return op
        source = Path(op["path"])
        target = self._spool / f"{next(self._spooled):06d}" / source.name
        private_folder(target.parent)
        shutil.copy2(source, target)
        return {**op, "path": str(target), SPOOLED: True}

    def lose(self, error: BaseException, opened: dict[str, Any] | None = None) -> None:
        """Switch to the journal (once), saying so on stderr; later writes never try the server again. `opened`: the
        name and start time of a run that opens in the journal, its server unreachable (`OPENED`)."""
        with self._lock:
            if self.journal is not None:
                return
            reason = describe(error)
            folder = journal_folder(self.root, self.run_id)
            header = {
                "run_id": self.run_id,
                "experiment": self.experiment,
                "tracking_uri": shown(self.uri),  # `tracking sync` takes credentials from the environment
                "lost_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "reason": reason,
                **({OPENED: opened} if opened else {}),
            }
            self.journal = Journal(folder, header)
            for done in self._written:
                self.journal.write(done, online=True)
            self._written.clear()
            shutil.rmtree(self._spool, ignore_errors=True)
            log.warning(
                "MLflow server %s %s run %s (%s); training goes on, the run's records are kept in %s",
                shown(self.uri),
                "unreachable as it opens" if opened else "lost during",
                self.run_id,
                reason,
                folder.relative_to(self.root),
            )

    def close(self) -> str | None:
        """Close the journal; return the line that tells what it holds and how to upload it (None if online)."""
        self._written.clear()
        shutil.rmtree(self._spool, ignore_errors=True)
        if self.journal is None:
            return None
        self.journal.close()
        folder = self.journal.folder.relative_to(self.root)
        journal = self.journal
        return (
            f"MLflow server lost during run {self.run_id}; the whole run ({journal.metric_values} metric values, "
            f"{journal.artifacts} artifacts, {journal.operations} writes, {journal.after_loss} of them after the loss) "
            f"is kept in {folder}; upload it with `tracking sync`"
        )
