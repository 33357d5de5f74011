"""What differed between two runs, group by group, in the order most likely to move results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracking.inspect.diff.changes import GroupDiff, compare_fields
from tracking.inspect.diff.code import code_group, dvc_deps, shared_stages
from tracking.inspect.diff.legacy import project_builders
from tracking.inspect.diff.runs import RunSnapshot, in_todays_names

GROUP_ORDER = ("backend", "data", "params", "seeds", "determinism", "code", "software", "hardware", "environment")
CAUSES = ("data", "params", "code")
_NOT_TRAINING = ("mlflow.", "calibration.", "compare.", "compute.")  # where and how runs are judged or run


def group_diffs(a: RunSnapshot, b: RunSnapshot, repo: Path | None = None) -> list[GroupDiff]:
    """Every group of `GROUP_ORDER`, in that order, with runs of earlier versions read in today's names (a run from
    before builders in the module of the builder that `repo`, the project, names in its params.yaml)."""
    builders = project_builders(repo)
    a, b = in_todays_names(a, builders), in_todays_names(b, builders)
    stages = shared_stages(a, b)
    sources = {
        "backend": (_backend, "the framework Keras ran on: other kernels, other random streams"),
        "data": (lambda run: _data_fields(run, stages), "the examples trained and tested on"),
        "params": (_training_params, "hyperparameters"),
        "seeds": (
            lambda run: run.provenance("seeds") or _params(run, "seeds."),
            "varies results by chance (ALGO noise)",
        ),
        "determinism": (
            lambda run: _without_backend(run.provenance("determinism") or _params(run, "determinism.")),
            "non-deterministic kernels vary results by chance (IMPL noise)",
        ),
        "software": (lambda run: _without_backend(run.provenance("software")), "changes kernels and their numerics"),
        "hardware": (
            lambda run: {**_prefixed(run, "cpu"), **_prefixed(run, "os"), **_prefixed(run, "gpu")},
            "changes kernels and their numerics",
        ),
        "environment": (lambda run: run.provenance("environment"), "allow-listed environment variables"),
    }
    groups = []
    for name in GROUP_ORDER:
        if name == "code":
            groups.append(code_group(a, b, repo, stages))
            continue
        fields, note = sources[name]
        compared, changes = compare_fields(fields(a), fields(b))
        groups.append(GroupDiff(name, compared, changes, note))
    return groups


def _backend(run: RunSnapshot) -> dict[str, str]:
    """The backend a run trained on (its param, else its effective determinism) and its build: ranked first, since
    a run on another framework differs in every kernel and random stream."""
    software = run.provenance("software")
    build = {f"build.{key[8:]}": value for key, value in software.items() if key.startswith("backend.")}
    named = run.params.get("determinism.backend") or run.provenance("determinism").get("effective.backend")
    build.pop("build.name", None)
    return {**({"name": named} if named else {}), **build}


def _without_backend(fields: dict[str, str]) -> dict[str, str]:
    """`fields` less the backend's own entries, which the backend group shows."""
    return {key: value for key, value in fields.items() if not (key.endswith("backend") or key.startswith("backend."))}


def _training_params(run: RunSnapshot) -> dict[str, str]:
    """The params that shape training, leaving data, seeds and determinism to their own groups."""
    return {key: value for key, value in run.params.items() if is_training_param(key)}


def is_training_param(key: str) -> bool:
    """A logged param of the `params` group: one that shapes training (data, seeds and determinism have groups of
    their own; where and how runs are judged or run shape nothing)."""
    return not key.startswith(("data.", "seeds.", "determinism.", *_NOT_TRAINING))


def _prefixed(run: RunSnapshot, section: str) -> dict[str, str]:
    return {f"{section}.{key}": value for key, value in run.provenance(section).items()}


def _params(run: RunSnapshot, prefix: str) -> dict[str, str]:
    return {key[len(prefix) :]: value for key, value in run.params.items() if key.startswith(prefix)}


def _data_fields(run: RunSnapshot, stages: set[str]) -> dict[str, Any]:
    """The manifest's hashes and counts (per split and class), DVC's data dependency hashes, the data.* params."""
    manifest = run.manifest
    fields: dict[str, Any] = {f"param {key}": value for key, value in run.params.items() if key.startswith("data.")}
    fields.update({f"dvc dep {key}": value for key, value in dvc_deps(run, data=True, stages=stages).items()})
    if manifest is None:
        return fields
    fields.update(
        {"source": manifest.source, "content_sha256": manifest.content_sha256, "source_sha256": manifest.source_sha256}
    )
    if manifest.n_classes is not None:
        fields["n_classes"] = manifest.n_classes
    for split, count in manifest.n_samples.items():
        fields[f"{split} samples"] = count
    for split, counts in (manifest.class_counts or {}).items():
        for label, count in counts.items():
            fields[f"{split} class {label}"] = count
    return fields


def name_causes(group: GroupDiff) -> str:
    if group.name == "params":
        return ", ".join(change.key for change in group.changes)
    if group.name == "code":
        files = [change.key.removeprefix("file ") for change in group.changes if change.key.startswith("file ")]
        more = f" and {len(files) - 3} more files" if len(files) > 3 else ""
        return f"code ({', '.join(files[:3])}{more})" if files else "code"
    return group.name
