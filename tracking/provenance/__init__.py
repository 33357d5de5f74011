"""Provenance: one gatherer per source (software, hardware, git, DVC, environment), one record of them.

`capture` builds the record logged as `provenance.json`; `to_tags` turns its searchable essentials into the
`prov.*` tags the MLflow compare view lines up run against run and a search filters on; `to_fields` names every
field of it the same way, for `tracking diff`, `rerun` and `audit`, which read the record whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracking.layout import PREPARED, TRAIN
from tracking.names import MAX_TAG_CHARS, PROV_PREFIX
from tracking.provenance.dvc import gather_dvc
from tracking.provenance.environment import gather_environment
from tracking.provenance.git import gather_git
from tracking.provenance.hardware import gather_cpu, gather_gpus, gather_os
from tracking.provenance.software import gather_software

RECORD_ARTIFACT = "provenance/provenance.json"  # the whole record of a run
# DVC's locked hash of every dependency of the stages that made a pipeline's run, logged once DVC has locked them
# (by the evaluate stage: the train stage's own deps are locked only after it ends).
LOCKED_DEPS_ARTIFACT = "provenance/dvc_deps.json"
_ARTIFACT_ONLY = {("git", "changed_files"), ("git", "diff_excludes"), ("software", "executable")}
# The fields kept as tags, by the start of their path in the record: what decides a run's numbers or picks runs in a
# search (seeds, backend and determinism, the versions that choose kernels, the device, code, data, model). A run
# page shows every tag above its description in a narrow window, and 150 tags buried it; the rest (environment,
# OS, CPU flags and caches, each code file's hash, ...) is in provenance.json only.
SEARCHABLE = (
    ("seeds",),
    ("determinism", "effective"),
    ("software", "backend"),
    ("software", "versions", "keras"),
    ("software", "versions", "numpy"),
    ("software", "versions", "python"),
    ("cpu", "id"),
    ("gpu", "count"),
    ("gpu", "devices", "0", "name"),  # the first GPU's, not every GPU's six fields on an 8-GPU node
    ("gpu", "devices", "0", "driver"),
    ("gpu", "devices", "0", "compute_capability"),
    ("git", "commit"),
    ("git", "dirty"),
    ("git", "snapshot"),
    ("git", "branch"),
    ("dvc", "experiment"),
    ("dvc", "baseline_rev"),
    ("dvc", "deps", TRAIN, PREPARED.as_posix()),  # the training data's hash, as DVC locked it
    ("model", "spec"),
    ("model", "outputs"),
    ("model", "dtype_policy"),
    ("model", "seeded_weights"),
    ("model", "kept_weights"),
    ("model", "kept_weights_sha256"),
    ("script",),
)


def capture(
    root: Path,
    seeds: dict[str, Any],
    determinism: dict[str, Any],
    stages: tuple[str, ...] = (),
    running: str | None = None,
    backend: bool = True,
) -> dict[str, Any]:
    """Everything needed to say how a run was made, as plain JSON-ready data; `running` names the DVC stage this
    process runs, whose dependencies are hashed now rather than read from dvc.lock. Without `backend`, what only
    the backend can say is left out, its build and the GPU section (the GPUs it sees): reading them imports it, which
    a process that trains nothing need not."""
    record = {
        "seeds": seeds,
        "determinism": determinism,
        "software": gather_software(backend),
        "cpu": gather_cpu(),
        "os": gather_os(),
        "git": gather_git(root),
        "dvc": gather_dvc(root, stages, running),
        "environment": gather_environment(),
    }
    return {**record, "gpu": gather_gpus()} if backend else record


def to_tags(record: dict[str, Any]) -> dict[str, str]:
    """The record's SEARCHABLE scalars as `prov.`-prefixed dotted tags."""
    tags: dict[str, str] = {}
    _walk(record, (), tags, searchable_only=True)
    return tags


def to_fields(record: dict[str, Any]) -> dict[str, str]:
    """Every scalar of the record (a `provenance.json` as logged) by the name its tag has or would have."""
    fields: dict[str, str] = {}
    _walk(record, (), fields, searchable_only=False)
    return fields


def _searchable(path: tuple[str, ...]) -> bool:
    return any(path[: len(start)] == start for start in SEARCHABLE)


def _walk(value: Any, path: tuple[str, ...], tags: dict[str, str], searchable_only: bool) -> None:
    if path[:2] in _ARTIFACT_ONLY:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _walk(item, (*path, str(key)), tags, searchable_only)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for index, item in enumerate(value):
            _walk(item, (*path, str(index)), tags, searchable_only)
    elif not searchable_only or _searchable(path):
        text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        tags[PROV_PREFIX + ".".join(path)] = text[:MAX_TAG_CHARS]
