"""Finished calibration repeats, kept under the key of everything that determines their result.

A repeat's weights follow from the frozen baseline's training sections, the data, the code that trains (the
calibrate stage's code deps and the numerical libraries), the variant and the repeat index: the same key gives
bit-identical weights. So a calibration killed mid-way resumes with the repeats it lacks, raising
`calibration.repeats` trains only the new ones, and changing the baseline, the data or the code trains all.
Each repeat is one `.npz` file (its predictions, weights and run record), written whole or not at all, in a
folder that git ignores.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import logging
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from tracking.dvc_files import stage_deps
from tracking.layout import PREPARED
from tracking.whole_file import written_whole

log = logging.getLogger(__name__)

# The library's own package: its code trains the repeats wherever it is installed.
LIBRARY_PACKAGE = __name__.split(".", 1)[0]
# The libraries whose version changes a repeat's numbers (the data's and the code's hashes cover the rest).
NUMERIC_LIBRARIES = ("tensorflow", "tensorflow-cpu", "keras", "numpy")


@dataclass(frozen=True)
class Job:
    """A repeat to train: its variant, its index within the variant, and its key (everything that decides its
    result, `repeat_key`), under which it is kept and found again."""

    variant: str
    repeat: int
    key: str


@dataclass(frozen=True)
class KeptRepeat:
    """One finished repeat: its record (variant, seeds, metrics, run id...), test predictions and flat weights."""

    run: dict[str, Any]
    predicted: np.ndarray
    weights: np.ndarray

    def to_bytes(self) -> bytes:
        """The repeat as the `.npz` file it is kept in (locally, and as its run's artifact on a server)."""
        buffer = io.BytesIO()
        np.savez(buffer, run=np.array(json.dumps(self.run)), predicted=self.predicted, weights=self.weights)
        return buffer.getvalue()


def read_kept(path: Path) -> KeptRepeat | None:
    """The repeat in the `.npz` file `path`, or None; an unreadable file counts as missing (it is trained again).
    Arrays only: NumPy refuses pickled objects, so a file from a server runs no code."""
    try:
        with np.load(path) as kept:
            return KeptRepeat(json.loads(str(kept["run"])), kept["predicted"], kept["weights"])
    except (OSError, ValueError, KeyError) as err:
        log.warning("ignoring the unreadable kept repeat %s (%s); it is trained again", path, err)
        return None


def repeat_key(identity: dict[str, Any], variant: str, repeat: int) -> str:
    """The SHA-256 of a repeat's identity (what the calibration shares) with its variant and index."""
    text = json.dumps({**identity, "variant": variant, "repeat": repeat}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def code_version(root: Path, stage: str, builder: str | None = None) -> dict[str, Any]:
    """The code a repeat trains with, by content: the stage's deps in dvc.yaml (less the prepared data, which its
    hash covers), the packages of the code that builds the model and runs the stage where they are installed
    outside the project (every module, since no dvc.yaml lists them): the top-level package of `builder` (the
    `model.builder` spec) and the library's own, and the numerical libraries' versions. Without a dvc.yaml
    declaring the stage, the git commit and the working tree's snapshot stand in for the deps."""
    libraries = {}
    for name in NUMERIC_LIBRARIES:
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    project = root.resolve()
    packages = [LIBRARY_PACKAGE]
    if builder is not None:
        packages.insert(0, builder.partition(":")[0].split(".", 1)[0])
    files: dict[str, str] = {}
    for package in packages:
        files.update(_installed_outside(package, project))
    deps = stage_deps(root, stage)
    if deps is None:
        from tracking.provenance.git import gather_git

        git = gather_git(root)
        return {"libraries": libraries, "files": files, "git_commit": git["commit"], "git_tree": git["snapshot_tree"]}
    for dep in deps:
        path = root / dep
        if dep != PREPARED and path.exists():
            files.update(_hashed(root, sorted(path.rglob("*")) if path.is_dir() else [path]))
    return {"libraries": libraries, "files": files}


def _installed_outside(package: str, project: Path) -> dict[str, str]:
    """The hashes of every module of top-level `package` (or of the one file of a top-level module) where it is
    imported from outside `project`; none where it is the project's own (found at the project root first, as
    `model.builder` is: a dep of the stage) or not installed."""
    if (project / package).is_dir() or (project / f"{package}.py").is_file():
        return {}
    found = importlib.util.find_spec(package)
    if found is None:
        return {}
    if found.submodule_search_locations:
        top = Path(found.submodule_search_locations[0]).resolve()
        paths = sorted(top.rglob("*.py"))
    elif found.origin and Path(found.origin).is_file():
        top = Path(found.origin).resolve()
        paths = [top]
    else:
        return {}
    return {} if top.is_relative_to(project) else _hashed(top.parent, paths)


def _hashed(base: Path, paths: list[Path]) -> dict[str, str]:
    """Each file's SHA-256 under its path relative to `base`, compiled-bytecode caches left out."""
    return {
        path.relative_to(base).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in paths
        if path.is_file() and "__pycache__" not in path.parts
    }


class RepeatStore:
    """The folder of kept repeats, one `<key>.npz` each."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def load(self, key: str) -> KeptRepeat | None:
        """The repeat kept under `key`, or None; an unreadable file counts as missing (it is trained again)."""
        path = self.folder / f"{key}.npz"
        return read_kept(path) if path.is_file() else None

    def save(self, key: str, kept: KeptRepeat) -> None:
        """Write the repeat under `key` through a temporary file, so a kill never leaves half a file."""
        if not self.folder.is_dir():
            self.folder.mkdir(parents=True)
            # Kept repeats are a cache of this machine's work: never committed, in any project.
            (self.folder / ".gitignore").write_text("*\n")
        with written_whole(self.folder / f"{key}.npz") as temporary:
            temporary.write_bytes(kept.to_bytes())
