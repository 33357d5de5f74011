"""The store's own files kept out of a team's git: `mlflow.db`, `mlartifacts/` and `.tracking/` beside the project.

A run records `prov.git.dirty`, and an untracked file makes a work tree dirty: in a team's project that has not
ignored them, the store's own files made every run dirty from its first. `tracking.start` adds them to the
repository's `.git/info/exclude` (local to the clone, nothing to commit) and says so in one line; files the
project already ignores (our template's `.gitignore`, a team's own) are left as they are.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tracking.log import configure_unless_configured
from tracking.store.journal import OFFLINE
from tracking.store.location import DEFAULT_ARTIFACTS, DEFAULT_DB

log = logging.getLogger(__name__)

# What the store writes beside the project: the SQLite file (and its -wal, -shm and lock files), the artifacts,
# and the runs kept while a tracking server was lost.
STORE_FILES = (f"{DEFAULT_DB}*", f"{DEFAULT_ARTIFACTS}/", f"{OFFLINE.parts[0]}/")


def exclude_store_files(repo: Any, root: Path) -> list[str]:
    """Add the store's files at `root` that git does not ignore yet to `repo`'s `.git/info/exclude`; return the
    patterns added (none when the project ignores them already)."""
    prefix = root.resolve().relative_to(Path(repo.working_tree_dir).resolve()).as_posix()
    prefix = "" if prefix == "." else f"{prefix}/"
    # A path each pattern covers, as `git check-ignore` takes it (a folder's by a file inside it).
    probes = {
        pattern: prefix + pattern.rstrip("*/") + ("/file" if pattern.endswith("/") else "") for pattern in STORE_FILES
    }
    ignored = set(repo.ignored(*probes.values()))
    missing = [f"/{prefix}{pattern}" for pattern, probe in probes.items() if probe not in ignored]
    if not missing:
        return []
    exclude = Path(repo.common_dir) / "info" / "exclude"  # a linked worktree reads its main repository's
    exclude.parent.mkdir(exist_ok=True)
    kept = exclude.read_text() if exclude.is_file() else ""
    if kept and not kept.endswith("\n"):
        kept += "\n"
    exclude.write_text(kept + "# tracking: the MLflow store\n" + "".join(f"{pattern}\n" for pattern in missing))
    configure_unless_configured()
    log.info(
        f"tracking: added {', '.join(missing)} to {exclude} so that the MLflow store does not make runs dirty "
        "(list them in .gitignore to share that)"
    )
    return missing
