"""What the project's upload to a Ray cluster's nodes carries: the code git tracks and a team's new modules, never a
credential's file, the data or what stages write.

Ray zips the job's `working_dir` less its `excludes` and the `.gitignore` files' patterns, and unpacks it on every
node (in its session's `runtime_resources`, which others on a shared cluster may read). Like a run's snapshot,
which holds only the tracked tree's change, it leaves every untracked file home but a Python module, which the
training may import (a builder not yet added): `.aws/credentials`, `.kube/config`, `pip.conf`, a notebook or
`secrets.yaml` in the project's folder reach no node. What git ignores through `.git/info/exclude` or a global
excludes file, which Ray does not read, stays home too.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

from tracking.layout import OUTPUT_FOLDERS, PREPARED
from tracking.store.journal import OFFLINE

log = logging.getLogger(__name__)

# What the upload leaves out whatever git says of it (gitignore patterns): version control and environments, the
# DVC cache, the data (it reaches the workers through Ray's object store) and what stages write, the MLflow store
# and the offline journal, and the files that hold credentials (a DVC remote's, a .env file's, keys), tracked or
# not. A leading slash anchors a folder at the project's root, so `/data` leaves the code in `tracking/data/` in.
UPLOAD_EXCLUDES = [
    ".git",
    ".venv",
    "/.dvc/cache",
    "/.dvc/tmp",
    "/.dvc/config.local",
    f"/{PREPARED.parts[0]}",
    *(f"/{folder}" for folder in OUTPUT_FOLDERS),
    f"/{OFFLINE.parts[0]}",
    "/mlruns",
    "/mlartifacts",
    "mlflow.db*",
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    ".netrc",
    ".pgpass",
]
_MODULE = ".py"
_SPECIAL = str.maketrans({char: f"\\{char}" for char in "\\*?[]!#"})  # a gitignore pattern's own characters


def job_runtime_env(root: Path) -> dict[str, Any]:
    """The job's `runtime_env` on a cluster the pool joins: the project at `root` as Ray's `working_dir`, which Ray
    zips (less `UPLOAD_EXCLUDES` and `left_home`), uploads once and unpacks on each node its workers start on."""
    home = left_home(root)
    untracked = sum(not path.endswith("/") for path in home)
    if untracked:
        log.info(
            "the upload to the cluster leaves %d untracked file(s) home (Python modules travel); `git add` one the "
            "training reads",
            untracked,
        )
    return {
        "working_dir": str(root),
        "excludes": [*UPLOAD_EXCLUDES, *(f"/{path.translate(_SPECIAL)}" for path in home)],
    }


def left_home(root: Path) -> list[str]:
    """The paths under `root`, relative and sorted, that the upload leaves out beyond `UPLOAD_EXCLUDES`: the untracked
    files git does not ignore, but Python modules, and what git ignores (a folder wholly ignored as `folder/`);
    none outside a git repository, where nothing says what is tracked."""
    untracked = _git_paths(root, "--others", "--exclude-standard")
    ignored = _git_paths(root, "--others", "--ignored", "--exclude-standard", "--directory")
    return sorted({path for path in untracked if not path.endswith(_MODULE)} | ignored)


def _git_paths(root: Path, *options: str) -> set[str]:
    """The paths `git ls-files` prints with `options` at `root`; none where `root` is in no git repository."""
    done = subprocess.run(["git", "ls-files", "-z", *options], cwd=root, capture_output=True)
    return (
        set(filter(None, done.stdout.decode(errors="surrogateescape").split("\0"))) if done.returncode == 0 else set()
    )
