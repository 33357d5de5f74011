"""The offline journal: what a run would have written to a lost MLflow server, kept on disk in order.

A run's sink (tracking/store/sinks.py) switches to it on the first write that fails because the server is gone
(connection refused or reset, timeout, 5xx after retries): the whole run so far plus every later write are
appended to `.tracking/offline/<run_id>/journal.jsonl` as numbered JSON lines (`online: true` for those the server
had acknowledged), with a copy of each file under `files/`. So the journal alone holds the complete run, even if
the server's store lost what it had. `tracking sync` (tracking/store/sync.py) replays it into the server. Until
then, an artifact the server took is kept as a copy in `.tracking/spool/<run_id>/` (its own path may be a
temporary file, deleted once written); this module also removes the spools of ended runs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.store.operations import Op
from tracking.store.sqlite import PRIVATE_FILE, private_folder

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

OFFLINE = Path(".tracking/offline")
SYNCED = Path(".tracking/synced")
SPOOL = Path(".tracking/spool")
JOURNAL = "journal.jsonl"
FILES = "files"
LINE = "line"  # an op's line number in its journal, as read back (never written)
UNREADABLE = "unreadable"  # the kind `read_journal` gives a line that is not a journaled operation
# In the header of a run opened in the journal (its server unreachable as it started): its name and start time, from
# which `tracking sync` creates it.
OPENED = "opened"
SPOOLED = "spooled"  # marks an artifact op whose path is the run sink's own copy, moved (not copied) into a journal


def journal_folder(root: Path, run_id: str) -> Path:
    return root / OFFLINE / run_id


def has_journal(folder: Path) -> bool:
    return (folder / JOURNAL).is_file()


def pending_journals(root: Path) -> list[Path]:
    """Journal folders not yet synced, oldest first."""
    folder = root / OFFLINE
    found = [path for path in folder.iterdir() if has_journal(path)] if folder.is_dir() else []
    return sorted(found, key=lambda path: (path / JOURNAL).stat().st_mtime)


def kept_offline(root: Path) -> frozenset[str]:
    """Ids of the runs with a journal waiting for `tracking sync` (their server-side run may still say RUNNING)."""
    return frozenset(folder.name for folder in pending_journals(root))


def remove_ended_spools(client: MlflowClient, root: Path) -> list[str]:
    """Remove the spool of each run of `client`'s store that has ended, and return their ids. A stage removes its
    run's spool as the run ends, unless it cannot: SIGKILLed, or the project made read-only meanwhile. A run still
    RUNNING keeps its spool, and so does a folder naming no run of this store (another store's run)."""
    from mlflow.exceptions import MlflowException

    folder = root / SPOOL
    removed = []
    for spool in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            status = client.get_run(spool.name).info.status
        except MlflowException:
            continue
        if status != "RUNNING":
            shutil.rmtree(spool, ignore_errors=True)
            removed.append(spool.name)
    return removed


class Journal:
    """Appends operations to one run's journal, numbered in order; copies the files they name."""

    def __init__(self, folder: Path, header: dict[str, Any]) -> None:
        """Start a journal, or continue one another stage of the same run left (numbering goes on)."""
        self.folder = folder
        self.metric_values = self.artifacts = self.operations = self.after_loss = 0
        private_folder(folder / FILES)  # .tracking/ and below: owner-only, as the store is
        path = folder / JOURNAL
        if path.exists():
            _drop_torn_line(path)
        existing = read_journal(folder)[1] if path.exists() else []
        self._seq = max((op.get("seq", 0) for op in existing), default=0)
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        self._handle = os.fdopen(descriptor, "a", encoding="utf-8")
        if not existing:
            self._write({"seq": 0, "op": "run", **header})

    def write(self, op: Op, online: bool = False) -> None:
        """Append `op`; `online` marks one the server had acknowledged before it was lost."""
        self._seq += 1
        record = {key: value for key, value in op.items() if key not in ("model", SPOOLED)}
        if online:
            record["online"] = True
        else:
            self.after_loss += 1
        if op["op"] == "artifact":
            record["path"] = self._keep(Path(op["path"]), bool(op.get(SPOOLED)))
            self.artifacts += 1
        elif op["op"] == "model":
            target = self._files_for(self._seq) / f"{op['name']}.keras"
            op["model"].save(target)
            record["path"] = str(target.relative_to(self.folder))
            self.artifacts += 1
        self.metric_values += len(op.get("metrics", []))
        self.operations += 1
        self._write({"seq": self._seq, **record})

    def close(self) -> None:
        self._handle.close()

    def _files_for(self, seq: int) -> Path:
        folder = self.folder / FILES / f"{seq:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _keep(self, source: Path, spooled: bool) -> str:
        """Copy `source` into the journal (move it, if it is a spooled copy); return the copy's relative path."""
        target = self._files_for(self._seq) / source.name
        if spooled:
            shutil.move(source, target)
        else:
            shutil.copy2(source, target)
        return str(target.relative_to(self.folder))

    def _write(self, record: dict[str, Any]) -> None:
        """One line per operation, flushed to disk so a crash loses at most the line being written."""
        self._handle.write(json.dumps(record) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())


def _drop_torn_line(path: Path) -> None:
    """Cut a last line a crash left half-written, so appending goes on from a whole line."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def read_journal(folder: Path) -> tuple[dict[str, Any], list[Op]]:
    """The header and the operations in order, with file paths made absolute and each op's line number in
    `LINE`; a torn last line is dropped. A line that is not a JSON operation (a garbled copy, a hand edit) comes
    as an op of kind `UNREADABLE` with its reason, for `tracking sync` to name and skip."""
    from tracking.errors import StoreFault

    lines = (folder / JOURNAL).read_text(encoding="utf-8", errors="replace").splitlines()
    ops: list[Op] = []
    header: dict[str, Any] | None = None
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines):
                break
            record = {"op": UNREADABLE, "reason": f"not JSON: {err.msg} at column {err.colno}"}
        else:
            if not isinstance(record, dict) or not isinstance(record.get("seq"), int) or "op" not in record:
                record = {"op": UNREADABLE, "reason": "not an operation (no `seq` or `op`)"}
        if header is None:
            if record["op"] != "run":
                raise StoreFault(
                    f"{folder / JOURNAL}: its first line is not the run's header ({record.get('reason', 'not a run')})",
                    fix="the journal cannot be replayed; it is left as it is, for you to restore from a copy",
                )
            header = record
            continue
        record[LINE] = number
        if "path" in record:
            record["path"] = str(folder / record["path"])
        ops.append(record)
    if header is None:
        raise StoreFault(f"{folder / JOURNAL} is empty", fix="remove its folder; the run it was for kept nothing")
    return header, ops
