"""Provenance: one gatherer per source (software, hardware, git, DVC, environment), one record of them.

`capture` builds the record logged as `provenance.json`; `to_tags` turns it into the searchable `prov.*`
tags the MLflow compare view lines up run against run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracking.names import MAX_TAG_CHARS, PROV_PREFIX
from tracking.provenance.dvc import gather_dvc
from tracking.provenance.environment import gather_environment
from tracking.provenance.git import gather_git
from tracking.provenance.hardware import gather_cpu, gather_gpus, gather_os
from tracking.provenance.software import gather_software

_ARTIFACT_ONLY = {("git", "changed_files"), ("git", "diff_excludes"), ("software", "executable")}


def capture(
    root: Path,
    seeds: dict[str, Any],
    determinism: dict[str, Any],
    stages: tuple[str, ...] = (),
    running: str | None = None,
) -> dict[str, Any]:
    """Everything needed to say how a run was made, as plain JSON-ready data; `running` names the DVC stage this
    process runs, whose dependencies are hashed now rather than read from dvc.lock."""
    return {
        "seeds": seeds,
        "determinism": determinism,
        "software": gather_software(),
        "cpu": gather_cpu(),
        "os": gather_os(),
        "gpu": gather_gpus(),
        "git": gather_git(root),
        "dvc": gather_dvc(root, stages, running),
        "environment": gather_environment(),
    }


def to_tags(record: dict[str, Any]) -> dict[str, str]:
    """`prov.`-prefixed dotted tags for every scalar in the record; bulky fields stay in the artifact."""
    tags: dict[str, str] = {}
    _walk(record, (), tags)
    return tags


def _walk(value: Any, path: tuple[str, ...], tags: dict[str, str]) -> None:
    if path[:2] in _ARTIFACT_ONLY:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _walk(item, (*path, str(key)), tags)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for index, item in enumerate(value):
            _walk(item, (*path, str(index)), tags)
    else:
        text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        tags[PROV_PREFIX + ".".join(path)] = text[:MAX_TAG_CHARS]
