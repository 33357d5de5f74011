"""Safe sharing of one SQLite MLflow store by several processes (parallel trainings, DVC's queue, `mlflow ui`).

Two things go wrong without this, both seen with four trainings started at once on a fresh `mlflow.db`:
- MLflow's `SqlAlchemyStore` creates the tables and runs every alembic migration when it finds them missing,
  with no lock, so two processes migrate the same file at once and fail ("table ... already exists",
  "duplicate column name", "expected to match one row ... in 'alembic_version'"); two processes that find no
  experiment both create it and one fails. `creation_lock` holds an exclusive lock on `mlflow.db.lock`
  beside the database while a process creates the store and its experiment. (A data set input, which MLflow
  also looks up and then inserts, is tried again when refused, on every store: `tracking.store.operations`.)
- In SQLite's default rollback-journal mode a reader blocks a writer, so `mlflow ui` or a second training
  reading runs stalls the writers. Write-ahead logging lets readers and the one writer proceed together; it
  is a property of the database file, set once when the store is created (`use_wal`).
Writers still take turns: MLflow sets SQLite's busy timeout to 20 s per session, so a write waits for the
lock instead of failing with "database is locked".

What the product creates here is its owner's only, whatever the umask (`create_private`, `private_folder`): the
store (0600; SQLite gives its -wal and -shm files the same mode), its lock, the artifacts folder and the
offline journals' folder (0700). What already exists keeps the mode its owner gave it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path

SQLITE_PREFIX = "sqlite:///"
LOCK_SUFFIX = ".lock"
# The modes of what the product creates: runs are its users' work (params, data hashes, diffs, models), so only
# their owner reads them, whatever the umask. What exists already keeps the mode its owner gave it.
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
ALEMBIC = "alembic_version"  # the table where MLflow's store keeps its schema revision
FIRST_TABLE = "experiments"  # the one table of MLflow's first schema that no other refers to: created first


def database_file(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI as written (links not followed), None for any other store."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    return Path(uri.removeprefix(SQLITE_PREFIX).split("?", 1)[0])


def database_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI, links resolved, None for any other store."""
    database = database_file(uri)
    return None if database is None else database.resolve()


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
    lock = os.open(
        database.with_name(database.name + LOCK_SUFFIX), os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE
    )
    with os.fdopen(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def create_private(uri: str) -> None:
    """Create a missing SQLite store as an empty file readable by its owner only (SQLite takes an empty file for an
    empty database, and gives its -wal and -shm files the database's mode), and the artifacts folder beside it
    likewise; an existing store or folder is left as it is."""
    database = database_path(uri)
    if database is None:
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))


def private_folder(folder: Path) -> Path:
    """`folder`, its missing parents created owner-only (an existing one keeps its mode)."""
    for missing in reversed([path for path in (folder, *folder.parents) if not path.exists()]):
        missing.mkdir(mode=PRIVATE_FOLDER, exist_ok=True)
    return folder


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


# The columns of MLflow's SQLite schema that hold where artifacts live.
ARTIFACT_COLUMNS = (
    ("experiments", "artifact_location"),
    ("runs", "artifact_uri"),
    ("logged_models", "artifact_location"),
)


def rehome_artifacts(uri: str, old: str, new: str) -> int:
    """Point every artifact location under `old` (an artifacts folder URI) at `new` instead, in place; the rows
    changed. A copied or moved project's store named the original's folder: its new runs would log there."""
    database = database_path(uri)
    if database is None:
        return 0
    pattern = old.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
    connection = sqlite3.connect(database, timeout=30)
    try:
        with connection:
            return sum(
                connection.execute(
                    f"UPDATE {table} SET {column} = ? || substr({column}, ?) WHERE {column} = ? OR {column} LIKE ? "
                    "ESCAPE '\\'",
                    (new, len(old) + 1, old, pattern),
                ).rowcount
                for table, column in ARTIFACT_COLUMNS
            )
    finally:
        connection.close()


def refuse_foreign(database: Path | None) -> None:
    """Raise a `StoreFault` for an SQLite file that MLflow must not open: another application's database (MLflow
    would add its ~70 tables to it) or a store a newer MLflow wrote (MLflow would say to run `mlflow db upgrade`,
    which only moves a schema forward). A missing or empty file (a new store) and MLflow's own pass; a damaged
    one is left for MLflow's open, whose error says so. Read-only, and before `creation_lock` (which would write
    a lock file beside another application's database): a store that MLflow is creating meanwhile has its
    `FIRST_TABLE` from its first statement on."""
    from tracking.errors import StoreFault

    if database is None or not database.is_file() or database.stat().st_size == 0:
        return
    try:
        with closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
            found = db.execute("SELECT version_num FROM alembic_version").fetchone() if ALEMBIC in tables else None
    except sqlite3.DatabaseError:
        return
    if tables and FIRST_TABLE not in tables:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreFault(
            f"{database} is not an MLflow store: it is an SQLite database holding other tables ({shown})",
            fix="point MLFLOW_TRACKING_URI at the MLflow store (or move this file away from the store's name); "
            "nothing was written to it",
        )
    revision = found[0] if found else None
    if revision and revision not in _mlflow_revisions():
        import mlflow

        raise StoreFault(
            f"MLflow store {database} was written by a newer MLflow than this environment's {mlflow.__version__} "
            f"(its schema revision {revision} is unknown here)",
            fix="upgrade MLflow in this environment to the version that wrote it (`pip install -U mlflow`, or the "
            "team's pinned version), or use a store of this version; `mlflow db upgrade` cannot help, it only moves "
            "a schema forward",
        )


def _mlflow_revisions() -> frozenset[str]:
    """The schema revisions the installed MLflow's migrations know (each migration file is named `<revision>_...`)."""
    from importlib.resources import files

    versions = files("mlflow.store.db_migrations") / "versions"
    return frozenset(
        entry.name.split("_", 1)[0]
        for entry in versions.iterdir()
        if entry.name.endswith(".py") and entry.name[0] != "_"
    )
