"""Store faults: a lost server told apart from a damaged SQLite file, a store that cannot be opened or written, or
a full disk. Each is said as what it is, with its fix, instead of "cannot be reached".

MLflow's SQLAlchemy store reports every `OperationalError` as TEMPORARILY_UNAVAILABLE, "database or disk is
full" and "attempt to write a readonly database" included, and logs each with a traceback; taken for a lost
server, a full disk sent a run to the offline journal while its row in the store read FINISHED with no metrics.
A fault found here ends the run FAILED where the store can still record it, and is never journaled: replaying
the journal into the same store would meet the same fault.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from tracking.errors import FULL_ERRNOS, NOT_WRITABLE_ERRNOS, StoreFault
from tracking.store.sqlite import database_path

DAMAGED = ("file is not a database", "database disk image is malformed", "malformed database schema")
NOT_WRITABLE = ("attempt to write a readonly database", "unable to open database file", "readonly database")
FULL = ("database or disk is full",)


def quiet_mlflow_database_errors() -> None:
    """Keep MLflow from printing a traceback for each database error it re-raises: the error is ours to say."""
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


def is_store_fault(error: BaseException) -> bool:
    """Whether `error` shows a fault of the store (full, damaged, not writable) rather than a lost server."""
    markers = (*FULL, *DAMAGED, *NOT_WRITABLE)
    return any(
        (isinstance(seen, OSError) and seen.errno in (*FULL_ERRNOS, *NOT_WRITABLE_ERRNOS))
        or any(marker in str(seen) for marker in markers)
        for seen in _chain(error)
    )


def store_fault(error: BaseException, uri: str) -> StoreFault | None:
    """The fault `error` shows (searched through its causes and contexts), or None when it shows none of them."""
    database = database_path(uri)
    chain = list(_chain(error))
    for seen in chain:
        if isinstance(seen, OSError) and seen.errno in FULL_ERRNOS:
            return disk_full(_written(seen) or database, seen.strerror or "no space")
        if isinstance(seen, OSError) and seen.errno in NOT_WRITABLE_ERRNOS:
            return not_writable(_written(seen) or database, seen.strerror or str(seen))
    text = " ".join(str(seen) for seen in chain)
    reason = next((marker for marker in (*FULL, *DAMAGED, *NOT_WRITABLE) if marker in text), None)
    if reason is None or (database is None and reason not in FULL):
        return None
    if reason in FULL:
        return disk_full(database, reason)
    if reason in DAMAGED:
        return StoreFault(
            f"MLflow store {database} is damaged ({reason})",
            fix=f"move it aside (`mv {database.name} {database.name}.damaged`) and restore a backup, or salvage what "
            f"it holds with `sqlite3 {database.name}.damaged .recover | sqlite3 {database.name}`; then re-run",
        )
    return not_writable(database, reason)


def disk_full(path: Path | None, reason: str) -> StoreFault:
    where = f"the disk holding {path}" if path is not None else "the store's disk"
    return StoreFault(
        f"no space left on {where} ({reason}): the run could not be logged whole, so it is not FINISHED",
        fix="free space there and re-run (`dvc repro`)",
    )


def not_writable(path: Path | None, reason: str) -> StoreFault:
    shown = path if path is not None else "the MLflow store"
    return StoreFault(
        f"{shown} cannot be opened or written ({reason})",
        fix="make it and its folder writable, or set MLFLOW_TRACKING_URI to a store you can write",
    )


def _written(error: OSError) -> Path | None:
    """The file a failed write went to: a copy's destination (`shutil` puts it second), else the file named."""
    named = error.filename2 or error.filename
    return Path(named) if named else None


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = error
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def server_unavailable(error: BaseException) -> bool:
    """True when `error` says the server could not be reached or could not serve, not that a write was wrong.

    MLflow wraps the `requests` error in an `MlflowException` without chaining it as the cause (only as
    the context), so the whole chain is searched.
    """
    import requests

    if is_store_fault(error):  # a full disk or a damaged file: journaling would hide it, replaying meets it again
        return False
    lost = (requests.ConnectionError, requests.Timeout, requests.exceptions.RetryError, ConnectionError, TimeoutError)
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, lost):
            return True
        if isinstance(seen, requests.HTTPError) and seen.response is not None and seen.response.status_code >= 500:
            return True
        if getattr(seen, "error_code", None) == "TEMPORARILY_UNAVAILABLE":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def describe(error: BaseException) -> str:
    """A short reason for a lost server: the OS error at the bottom ("[Errno 111] Connection refused") if any,
    searched through the causes (MLflow's message may cut the `requests` error it wraps short)."""
    for seen in _chain(error):
        found = re.search(r"\[Errno -?\d+\] [^'\")]+|Read timed out|too many \d+ error responses", str(seen))
        if found:
            return found.group(0)
    text = str(error)
    return text.splitlines()[0][:200] if text else type(error).__name__
