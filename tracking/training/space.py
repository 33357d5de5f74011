"""Free space for what a training writes, checked before it trains: a disk that fills after `fit` costs the whole
training and leaves the repository without room for the user's own `git status`.

A training writes three things of a size known beforehand: the snapshot of the working tree (git objects of the
tracked files that differ from HEAD, under the repository's `.git`), the model (`outputs/model.keras`, the weights
and the optimizer's state) and the model's copy in the MLflow store (its artifacts, beside a SQLite store; a server
keeps its own). Each folder's disk must hold what goes there plus `MARGIN_BYTES` (metrics, provenance files, plots,
SQLite's write-ahead log; `TRACKING_FREE_SPACE_MB` sets another); folders on one disk are counted together. A shortfall is one `DiskSpaceError` line
naming the folder, the space needed and free, and the fix. The train stage checks twice: once the store is found
usable (tracking/store/location.py names a store path that is a link loop, a file or a device first), before
TensorFlow loads, so a disk short of the margin stops it in seconds; and once the model is built, with it.
The calibrate stage checks once, before its repeats train, without a model's size.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracking.env import TRACKING_FREE_SPACE_MB
from tracking.errors import DiskSpaceError, SettingError
from tracking.layout import MODEL
from tracking.store.location import DEFAULT_ARTIFACTS, refuse_unusable_paths
from tracking.store.sqlite import database_path

# What a training writes besides its model and snapshot (metrics rows, provenance files, the training curves'
# figure, SQLite's write-ahead log), on each disk it writes to, unless TRACKING_FREE_SPACE_MB says otherwise.
MARGIN_BYTES = 16 * 2**20
# The model file against its weights: Adam's two slots per weight, saved with the model, and the zip's overhead.
MODEL_FILE_FACTOR = 3


@dataclass(frozen=True)
class Write:
    """Bytes a training writes under `folder`, and what they are."""

    folder: Path
    what: str
    size: int


def model_bytes(model: Any) -> int:
    """The bytes of `model`'s saved file: its weights, times `MODEL_FILE_FACTOR` for the optimizer's state."""
    import numpy as np

    weights = sum(math.prod(variable.shape) * np.dtype(variable.dtype).itemsize for variable in model.weights)
    return MODEL_FILE_FACTOR * weights


def snapshot_bytes(repo: Any) -> int:
    """The bytes of the tracked files that differ from HEAD: at most what the snapshot adds to `.git` (git
    compresses them)."""
    top = Path(repo.working_tree_dir)
    changed = [name for name in repo.git.diff("HEAD", "--name-only", "-z").split("\0") if name]
    return sum((top / name).stat().st_size for name in changed if (top / name).is_file())


def training_writes(root: Path, repo: Any, uri: str, model: Any = None) -> list[Write]:
    """What the train stage is about to write, and where; without `model` (checked before it is built, and before
    TensorFlow loads; the calibrate stage's check) the model counts nothing."""
    refuse_unusable_paths(uri)  # a store path that loops or is a device is said as such, not as a disk's space
    size = 0 if model is None else model_bytes(model)
    writes = [
        Write(Path(repo.common_dir), "the working tree's snapshot", snapshot_bytes(repo)),
        Write(root / MODEL.parent, "the model", size),
    ]
    database = database_path(uri)
    if database is not None:
        writes.append(Write(database.parent / DEFAULT_ARTIFACTS, "the MLflow store's copy of the model", size))
    return writes


def check_free_space(writes: list[Write]) -> None:
    """Refuse to start when a disk lacks room for what goes to it (`writes`, with `MARGIN_BYTES` each disk)."""
    disks: dict[int, list[Write]] = {}
    for write in writes:
        disks.setdefault(os.stat(_existing(write.folder)).st_dev, []).append(write)
    margin = margin_bytes()
    for same in disks.values():
        needed = margin + sum(write.size for write in same)
        free = shutil.disk_usage(_existing(same[0].folder)).free
        if free < needed:
            folders = ", ".join(f"{write.folder} ({write.what})" for write in same)
            raise DiskSpaceError(
                f"not enough free space for this training on the disk holding {folders}: about {_mb(needed)} "
                f"needed, {_mb(free)} free",
                fix="free space on that disk (or move the project or the MLflow store to a larger one), then re-run",
            )


def margin_bytes() -> int:
    """The margin each disk must hold beyond the writes: `TRACKING_FREE_SPACE_MB` MiB where set, else `MARGIN_BYTES`."""
    text = os.environ.get(TRACKING_FREE_SPACE_MB)
    if text is None:
        return MARGIN_BYTES
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        raise SettingError(
            f"{TRACKING_FREE_SPACE_MB}={text!r} is not a number of MiB",
            fix="set it to the MiB a training must find free beyond its model (e.g. 16, 0 for none), or unset it",
        )
    return int(value * 2**20)


def _existing(folder: Path) -> Path:
    """`folder`, or its nearest parent that exists (the disk it will be made on)."""
    return next(path for path in (folder, *folder.parents) if path.exists())


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
