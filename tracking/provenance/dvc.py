"""DVC gatherer: the hashes DVC recorded for each stage's dependencies, and the experiment being run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tracking.env import DVC_EXP_BASELINE_REV, DVC_EXP_NAME
from tracking.params import parse_yaml


def gather_dvc(root: Path, stages: tuple[str, ...] = ()) -> dict[str, Any]:
    """Dependency hashes from dvc.lock (for `stages`, or all) and DVC's experiment variables."""
    return {
        "experiment": os.environ.get(DVC_EXP_NAME),
        "baseline_rev": os.environ.get(DVC_EXP_BASELINE_REV),
        "deps": lock_hashes(root / "dvc.lock", stages),
    }


def lock_hashes(lock: Path, stages: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """{stage: {dep path: md5}} as recorded in dvc.lock; empty when the lock does not exist yet."""
    if not lock.is_file():
        return {}
    content = parse_yaml(lock.read_text()) or {}
    found = {}
    for name, stage in (content.get("stages") or {}).items():
        if stages and name not in stages:
            continue
        found[name] = {dep["path"]: dep.get("md5") or dep.get("hash") or "" for dep in stage.get("deps", [])}
    return found
