"""The committed weights' machine against this one: why a fresh clone's first training gives other weights.

With op determinism one machine trains the same inputs to the same weights, but CPU generations block and sum
in their own order (oneDNN and Eigen size their blocks by the caches and pick kernels by instruction set), and
another TensorFlow or NumPy build sums in its own order too. The committed `metrics/train.json` holds weights
another machine trained; beside it the train stage writes `reports/trained_on.json`: a fingerprint of the
inputs (the stage's params, the data's content hash, its code files) and the machine (CPU, software). When this
machine trains the committed inputs to other weights, the stage says which facts of the machine differ, so the
first `dvc repro` of a clone explains the changed files instead of leaving them unexplained.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from tracking.dvc_files import declared_stages, stage_deps
from tracking.env import TRACKING_RERUN_OF
from tracking.layout import PARAMS_FILE, TRAIN, TRAIN_METRICS, TRAINED_ON
from tracking.provenance.hardware import gather_cpu
from tracking.provenance.software import installed_version
from tracking.yaml_text import flatten, parse_yaml

log = logging.getLogger(__name__)

# The CPU facts that decide how kernels block and sum, and the packages whose builds do.
CPU_FACTS = ("id", "model", "architecture", "usable_cores", "cache", "numeric_flags")
PACKAGES = ("tensorflow", "keras", "numpy")


def machine() -> dict[str, Any]:
    """This machine's facts that change a training's sums: CPU identity, caches, instruction sets, cores, builds."""
    cpu = gather_cpu()
    software = {name: installed_version(name) or installed_version(f"{name}-cpu") for name in PACKAGES}
    return {"cpu": {fact: cpu[fact] for fact in CPU_FACTS}, "software": software}


def inputs_sha256(root: Path, data_sha256: str) -> str:
    """One hash of what the train stage reads: the params.yaml sections dvc.yaml lists for it, the prepared
    data's content hash, and the bytes of each file it depends on (its code); the same inputs give the same hash."""
    stage = declared_stages(root)[TRAIN]
    params = parse_yaml((root / PARAMS_FILE).read_text(encoding="utf-8")) or {}
    sections = {name: params.get(name) for name in stage.get("params", []) if isinstance(name, str)}
    files = {}
    for dep in stage_deps(root, TRAIN) or []:
        path = root / dep
        if path.is_file():
            files[dep.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    fingerprint = {"params": sections, "data": data_sha256, "code": files}
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()


def record(inputs: str) -> dict[str, Any]:
    """What `reports/trained_on.json` holds for a training of `inputs` on this machine."""
    return {"inputs_sha256": inputs, **machine()}


def trained_on(repo: Any, root: Path, here: dict[str, Any], digest: str) -> dict[str, Any]:
    """What `reports/trained_on.json` holds for weights `digest` trained here (`here`, this machine's `record`): the
    record committed at HEAD where it names the same inputs and HEAD's weights are these (the machine that first
    trained them; another that trains them bit for bit leaves the file as committed), else `here`."""
    committed = _committed_json(repo, root, TRAINED_ON)
    same_inputs = committed.get("inputs_sha256") == here["inputs_sha256"]
    if same_inputs and _committed_json(repo, root, TRAIN_METRICS).get("weights_sha256") == digest:
        return committed
    return here


def differences(committed: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """Each machine fact that differs, as `cpu cache l2 1024K -> 2048K` (committed -> here)."""
    before, after = _flat(committed, ("cpu", "software")), _flat(here, ("cpu", "software"))
    return [
        f"{name} {before.get(name)} -> {after.get(name)}"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


def _flat(found: dict[str, Any], groups: tuple[str, ...]) -> dict[str, Any]:
    """`{"cpu": {"cache": {"l2": "1024K"}}}` as `{"cpu cache l2": "1024K"}`, for the groups named."""
    return {
        key.replace(".", " "): value
        for key, value in flatten({group: found.get(group) or {} for group in groups}).items()
    }


def explain_weights(repo: Any, root: Path, trained: dict[str, Any], digest: str) -> str | None:
    """Why the weights `digest` just trained differ from those committed at HEAD, when the inputs are the
    committed ones; None when they are equal, nothing is committed, or the inputs changed (an experiment)."""
    committed_weights = _committed_json(repo, root, TRAIN_METRICS).get("weights_sha256")
    committed = _committed_json(repo, root, TRAINED_ON)
    if not committed_weights or committed_weights == digest:
        return None
    if committed.get("inputs_sha256") != trained["inputs_sha256"]:
        return None
    shift = differences(committed, trained)
    head = (
        f"weights sha256 {digest[:16]}... differ from the committed {committed_weights[:16]}... "
        f"({TRAIN_METRICS} at HEAD), trained from the same params, data and code"
    )
    if not shift:
        return (
            f"{head} on a machine with the same CPU and builds ({TRAINED_ON}): expected bit-identical; "
            "`tracking audit` measures this machine's determinism step by step"
        )
    return (
        f"{head} on another machine ({'; '.join(shift)}): each CPU generation and build sums in its own order, "
        f"so each gives its own weights (docs/run-record.md: A fresh clone's first run); commit dvc.lock, metrics/ and {TRAINED_ON} "
        "to make this machine's results the reference"
    )


def say_why_weights_differ(repo: Any, root: Path, trained: dict[str, Any], digest: str) -> None:
    """A `warning:` line when `explain_weights` finds the committed inputs trained to other weights; none in a
    `tracking rerun`, whose report ends with the weights against the original run's and the machines' differences."""
    if os.environ.get(TRACKING_RERUN_OF):
        return
    why = explain_weights(repo, root, trained, digest)
    if why:
        log.warning(why)


def _committed_json(repo: Any, root: Path, path: Path) -> dict[str, Any]:
    """`path` (relative to the project) as committed at HEAD, parsed; empty when absent or unreadable."""
    relative = (root.resolve() / path).relative_to(Path(repo.working_tree_dir).resolve()).as_posix()
    try:
        found = json.loads((repo.head.commit.tree / relative).data_stream.read())
    except (KeyError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
