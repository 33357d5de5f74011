"""Safe sharing of one SQLite MLflow store by several processes (parallel trainings, DVC's queue, `mlflow ui`).

Two things go wrong without this, both seen with four trainings started at once on a fresh `mlflow.db`:
- MLflow's `SqlAlchemyStore` creates the tables and runs every alembic migration when it finds them missing,
  with no lock, so two processes migrate the same file at once and fail ("table ... already exists",
  "duplicate column name", "expected to match one row ... in 'alembic_version'"); two processes that find no
  experiment both create it and one fails. `creation_lock` holds an exclusive lock on `mlflow.db.lock`
  beside the database while a process creates the store and its experiment.
- In SQLite's default rollback-journal mode a reader blocks a writer, so `mlflow ui` or a second training
  reading runs stalls the writers. Write-ahead logging lets readers and the one writer proceed together; it
  is a property of the database file, set once when the store is created (`use_wal`).
Writers still take turns: MLflow sets SQLite's busy timeout to 20 s per session, so a write waits for the
lock instead of failing with "database is locked".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SQLITE_PREFIX = "sqlite:///"
LOCK_SUFFIX = ".lock"


def database_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI, None for any other store."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    return Path(uri.removeprefix(SQLITE_PREFIX).split("?", 1)[0]).resolve()


@contextmanager
def creation_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock (POSIX `flock`) on `<database>.lock` while inside; a no-op for other stores."""
    database = database_path(uri)
    try:
        import fcntl
    except ImportError:  # Windows: no flock; MLflow's own creation lock is POSIX-only as well
        database = None
    if database is None:
        yield
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    with open(database.with_name(database.name + LOCK_SUFFIX), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def use_wal(uri: str) -> None:
    """Switch an existing SQLite store to write-ahead logging (persistent in the file; cheap when already on)."""
    database = database_path(uri)
    if database is None or not database.is_file():
        return
    connection = sqlite3.connect(database, timeout=30)
    try:
        if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()
