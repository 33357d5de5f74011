"""`tracking diff`: what differed between two MLflow runs, ranked by how likely each is to move results.

Groups, in rank order: data, params, seeds, determinism, code, software, hardware, environment. Data,
params and code are *causes*: while one of them differs, a metric gap cannot be called chance. Seeds and
determinism are the sources of noise the calibration measures; software and hardware explain runs that
are not bitwise equal. Metric gaps are judged by `tracking.noise.policy`, the policy the compare stage uses:
the band that fits what differs, around the calibrated baseline's mean when run A trained that baseline
(as compare judges a candidate), else around run A's value.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tracking.config.legacy import upgrade_logged
from tracking.config.params import CLASSIFICATION, DEFAULT_COMPARE_METRICS
from tracking.config.project import CALIBRATE, NOISE_FILE, OUTPUT_FOLDERS
from tracking.errors import TrackingError
from tracking.noise.policy import (
    CANNOT_JUDGE,
    CONTROL,
    EXCEEDS,
    Differences,
    Judgement,
    choose_band,
    direction,
    family_verdict,
    is_calibrated_baseline,
    judge,
    judge_family,
)
from tracking.noise.statistics import band_from_summary
from tracking.provenance import WEIGHTS_TAG
from tracking.provenance.git import decode_diff

GROUP_ORDER = ("data", "params", "seeds", "determinism", "code", "software", "hardware", "environment")
CAUSES = ("data", "params", "code")
# Files whose changes other groups already report (params, data pins) or that are outputs, not code.
_NOT_CODE = re.compile(rf"(^|/)(params\.yaml|baseline\.yaml|dvc\.lock|[^/]*\.dvc)$|^({'|'.join(OUTPUT_FOLDERS)})/")
_NOT_TRAINING = ("mlflow.", "calibration.", "compare.")
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_EXP_NAME = re.compile(r"^[\w.-]+$")


class RunNotFound(TrackingError):
    """Neither a run id nor a DVC experiment name the store knows."""


@dataclass(frozen=True)
class RunSnapshot:
    """What one run logged: params, metrics, tags, the data manifest and the uncommitted diff."""

    run_id: str
    name: str
    experiment_id: str
    status: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    manifest: dict[str, Any]
    diff: str

    def provenance(self, section: str) -> dict[str, str]:
        """The `prov.<section>.*` tags, keyed without the prefix."""
        prefix = f"prov.{section}."
        return {key[len(prefix) :]: value for key, value in self.tags.items() if key.startswith(prefix)}

    @property
    def op_determinism(self) -> bool:
        return (
            self.tags.get("prov.determinism.effective.op_determinism", self.params.get("determinism.op_determinism"))
            == "true"
        )


@dataclass(frozen=True)
class Change:
    key: str
    a: Any
    b: Any


@dataclass(frozen=True)
class GroupDiff:
    """One group's changed fields out of `compared`; `note` says what a change there means."""

    name: str
    compared: int
    changes: list[Change]
    note: str = ""

    @property
    def identical(self) -> bool:
        return not self.changes


@dataclass(frozen=True)
class MetricDelta:
    """B minus A for one metric, and B judged against the noise band (None: no band for it)."""

    metric: str
    a: float
    b: float
    delta: float
    judgement: Judgement | None = None
    direction: str = ""

    @property
    def z(self) -> float | None:
        return None if self.judgement is None else self.judgement.z

    @property
    def verdict(self) -> str | None:
        return None if self.judgement is None else self.judgement.verdict

    @property
    def within_noise(self) -> bool | None:
        return None if self.judgement is None else self.judgement.within_noise

    def as_dict(self) -> dict[str, Any]:
        found = self.judgement
        tested = (
            {
                "reference": found.reference,
                "reference_runs": found.reference_runs,
                "sigma": found.scale,
                "z": found.z,
                "p_value": found.p_value,
                "verdict": found.verdict,
                "note": found.note,
            }
            if found
            else {}
        )
        return {
            "metric": self.metric,
            "a": self.a,
            "b": self.b,
            "delta": self.delta,
            "direction": self.direction,
            **{key: None for key in ("reference", "reference_runs", "sigma", "z", "p_value", "verdict")},
            "note": "",
            **tested,
            "within_noise": self.within_noise,
        }


@dataclass(frozen=True)
class RunDiff:
    a: RunSnapshot
    b: RunSnapshot
    groups: list[GroupDiff]
    weights_identical: bool | None
    deltas: list[MetricDelta]
    band: dict[str, Any]
    alpha: float
    conclusion: str = field(default="")

    @property
    def verdict(self) -> str | None:
        """The band policy's verdict over the metrics judged (None without a band), as the compare stage gives it."""
        judged = [delta.judgement for delta in self.deltas if delta.judgement is not None]
        if self.band.get("variant") == CONTROL and self.weights_identical is False:
            return EXCEEDS
        return family_verdict(judged) if judged else None

    def changed(self, names: tuple[str, ...] = GROUP_ORDER) -> list[GroupDiff]:
        return [group for group in self.groups if group.changes and group.name in names]

    def as_dict(self) -> dict[str, Any]:
        groups = [{**asdict(group), "identical": group.identical} for group in self.groups]
        return {
            "a": _run_summary(self.a),
            "b": _run_summary(self.b),
            "groups": groups,
            "weights_identical": self.weights_identical,
            "metrics": [delta.as_dict() for delta in self.deltas],
            "band": self.band,
            "alpha": self.alpha,
            "verdict": self.verdict,
            "conclusion": self.conclusion,
        }


def load_run(client: Any, ref: str) -> RunSnapshot:
    """The run with id `ref`, or the latest run tagged `dvc.exp_name = ref` (a DVC experiment name).

    By name, the experiment's candidate run: its calibration runs carry the name too, and start later.
    """
    from mlflow.exceptions import MlflowException

    run = None
    if _RUN_ID.match(ref):
        try:
            run = client.get_run(ref)
        except MlflowException:
            run = None
    if run is None and _EXP_NAME.match(ref):
        experiments = [found.experiment_id for found in client.search_experiments()]
        named = f"tags.`dvc.exp_name` = '{ref}' and tags.`pipeline.stage` != '{CALIBRATE}'"
        matches = (
            client.search_runs(experiments, filter_string=named, order_by=["attributes.start_time DESC"], max_results=1)
            if experiments
            else []
        )
        run = matches[0] if matches else None
    if run is None:
        raise RunNotFound(
            f"run '{ref}' not found in {client.tracking_uri}: no run with that id and no run tagged "
            "dvc.exp_name with that name; list runs with `mlflow ui` or `dvc exp show`"
        )
    return RunSnapshot(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        experiment_id=run.info.experiment_id,
        status=run.info.status,
        params=dict(run.data.params),
        metrics=dict(run.data.metrics),
        tags=dict(run.data.tags),
        manifest=_artifact(client, run.info.run_id, "data/manifest.json", json.loads) or {},
        diff=_artifact(client, run.info.run_id, "provenance/uncommitted.diff", str) or "",
    )


def _artifact(client: Any, run_id: str, path: str, parse: Any) -> Any:
    """An artifact's parsed text, or None when the run has no such artifact."""
    from mlflow.exceptions import MlflowException

    folder, _, name = path.rpartition("/")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        if name not in {Path(item.path).name for item in client.list_artifacts(run_id, folder)}:
            return None
        with tempfile.TemporaryDirectory() as scratch:
            # Not read_text(): its newline translation would turn a diff's CRLF lines into LF.
            return parse(decode_diff(Path(client.download_artifacts(run_id, path, scratch)).read_bytes()))
    except (MlflowException, OSError) as err:
        raise TrackingError(
            f"artifact {path} of run {run_id} cannot be read ({str(err).splitlines()[0]}); "
            "check the tracking server and its artifact store"
        ) from err


def compare_fields(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, list[Change]]:
    """How many keys were compared and which differ (a key missing on one side counts as a change)."""
    keys = sorted(set(a) | set(b))
    return len(keys), [Change(key, a.get(key), b.get(key)) for key in keys if a.get(key) != b.get(key)]


def group_diffs(a: RunSnapshot, b: RunSnapshot, repo: Path | None = None) -> list[GroupDiff]:
    """Every group of `GROUP_ORDER`, in that order, with runs of earlier versions read in today's names."""
    a, b = _in_todays_names(a), _in_todays_names(b)
    stages = _shared_stages(a, b)
    sources = {
        "data": (lambda run: _data_fields(run, stages), "the examples trained and tested on"),
        "params": (_training_params, "hyperparameters"),
        "seeds": (
            lambda run: run.provenance("seeds") or _params(run, "seeds."),
            "varies results by chance (ALGO noise)",
        ),
        "determinism": (
            lambda run: run.provenance("determinism") or _params(run, "determinism."),
            "non-deterministic kernels vary results by chance (IMPL noise)",
        ),
        "software": (lambda run: run.provenance("software"), "changes kernels and their numerics"),
        "hardware": (
            lambda run: {**_prefixed(run, "cpu"), **_prefixed(run, "os"), **_prefixed(run, "gpu")},
            "changes kernels and their numerics",
        ),
        "environment": (lambda run: run.provenance("environment"), "allow-listed environment variables"),
    }
    groups = []
    for name in GROUP_ORDER:
        if name == "code":
            groups.append(_code_group(a, b, repo, stages))
            continue
        fields, note = sources[name]
        compared, changes = compare_fields(fields(a), fields(b))
        groups.append(GroupDiff(name, compared, changes, note))
    return groups


def _in_todays_names(run: RunSnapshot) -> RunSnapshot:
    params, tags = upgrade_logged(run.params, run.tags)
    return replace(run, params=params, tags=tags)


def _training_params(run: RunSnapshot) -> dict[str, str]:
    """The params that shape training, leaving data, seeds and determinism to their own groups."""
    return {
        key: value
        for key, value in run.params.items()
        if not key.startswith(("data.", "seeds.", "determinism.", *_NOT_TRAINING))
    }


def _prefixed(run: RunSnapshot, section: str) -> dict[str, str]:
    return {f"{section}.{key}": value for key, value in run.provenance(section).items()}


def _params(run: RunSnapshot, prefix: str) -> dict[str, str]:
    return {key[len(prefix) :]: value for key, value in run.params.items() if key.startswith(prefix)}


def _shared_stages(a: RunSnapshot, b: RunSnapshot) -> set[str]:
    """The DVC stages whose dependency hashes both runs logged.

    A stage only one run logged says how that run was made (a calibration repeat is made by `calibrate`, not
    by `train`), not that its inputs changed; the data content and the code are compared in full anyway.
    """
    return {key.split(".", 1)[0] for key in a.provenance("dvc.deps")} & {
        key.split(".", 1)[0] for key in b.provenance("dvc.deps")
    }


def _dvc_deps(run: RunSnapshot, data: bool, stages: set[str]) -> dict[str, str]:
    """The DVC dependencies of `stages` logged with the run: data ones (folders, paths under data/) or code ones."""
    return {
        key: value
        for key, value in run.provenance("dvc.deps").items()
        if key.split(".", 1)[0] in stages and (value.endswith(".dir") or "data/" in key) == data
    }


def _data_fields(run: RunSnapshot, stages: set[str]) -> dict[str, Any]:
    """The manifest's hashes and counts (per split and class), DVC's data dependency hashes, the data.* params."""
    manifest = run.manifest
    fields: dict[str, Any] = {f"param {key}": value for key, value in run.params.items() if key.startswith("data.")}
    fields.update({f"dvc dep {key}": value for key, value in _dvc_deps(run, data=True, stages=stages).items()})
    for key in ("source", "content_sha256", "source_sha256", "n_classes"):
        if key in manifest:
            fields[key] = manifest[key]
    for split, count in manifest.get("n_samples", {}).items():
        fields[f"{split} samples"] = count
    for split, counts in manifest.get("class_counts", {}).items():
        for label, count in counts.items():
            fields[f"{split} class {label}"] = count
    return fields


def _code_group(a: RunSnapshot, b: RunSnapshot, repo: Path | None, stages: set[str]) -> GroupDiff:
    """Code files that differ: between the commits (when the repo has both) and in the uncommitted diffs.

    Changes to params.yaml, *.dvc pins, dvc.lock and outputs are left to the data and params groups.
    """
    commit_a, commit_b = a.tags.get("prov.git.commit", ""), b.tags.get("prov.git.commit", "")
    per_file_a, per_file_b = split_diff(a.diff), split_diff(b.diff)
    dirty = {path for path in set(per_file_a) | set(per_file_b) if per_file_a.get(path) != per_file_b.get(path)}
    between: set[str] = set()
    changes = []
    if commit_a != commit_b:
        found = _files_between(repo, commit_a, commit_b)
        if found is None:
            changes.append(Change("git.commit", commit_a, commit_b))
        between = found or set()
    for path in sorted((dirty | between) - {p for p in dirty | between if _NOT_CODE.search(p)}):
        if path in dirty:
            changes.append(Change(f"file {path}", _digest(per_file_a.get(path)), _digest(per_file_b.get(path))))
        else:
            changes.append(Change(f"file {path}", f"as in {commit_a[:10]}", f"as in {commit_b[:10]}"))
    compared, deps = compare_fields(_dvc_deps(a, data=False, stages=stages), _dvc_deps(b, data=False, stages=stages))
    changes += [Change(f"dvc dep {change.key}", change.a, change.b) for change in deps]
    note = f"commit {commit_a[:10] or 'not logged'}" + (
        "" if commit_a == commit_b else f" -> {commit_b[:10] or 'not logged'}"
    )
    if not changes and (dirty or between):
        note += "; only params, data pins or outputs changed there"
    return GroupDiff("code", compared + len(dirty | between | set(per_file_a)) + 1, changes, note)


def split_diff(text: str) -> dict[str, str]:
    """A unified `git diff` split into {path: that file's part}."""
    parts: dict[str, str] = {}
    path, lines = None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            if path is not None:
                parts[path] = "".join(lines)
            path, lines = line.rstrip("\n").split(" b/", 1)[-1], []
        lines.append(line)
    if path is not None:
        parts[path] = "".join(lines)
    return parts


def _files_between(repo: Path | None, commit_a: str, commit_b: str) -> set[str] | None:
    """Paths changed between two commits, or None when the local repository lacks either."""
    if repo is None or not commit_a or not commit_b:
        return None
    from git import GitCommandError, InvalidGitRepositoryError, NoSuchPathError, Repo

    try:
        names = Repo(repo, search_parent_directories=True).git.diff("--name-only", commit_a, commit_b)
    except (GitCommandError, InvalidGitRepositoryError, NoSuchPathError):
        return None
    return set(names.split())


def _digest(text: str | None) -> str | None:
    return None if text is None else "diff sha256 " + hashlib.sha256(text.encode()).hexdigest()[:12]


def find_calibration(
    client: Any, experiment_ids: list[str], run_id: str | None = None
) -> tuple[str, dict[str, Any]] | None:
    """The calibration parent run (`run_id`, else the latest finished one) and its `calibration/noise.json`."""
    if run_id is None:
        found = client.search_runs(
            sorted(set(experiment_ids)),
            order_by=["attributes.start_time DESC"],
            max_results=1,
            filter_string="tags.`noise.role` = 'calibration' and attributes.status = 'FINISHED'",
        )
        if not found:
            return None
        run_id = found[0].info.run_id
    noise = _artifact(client, run_id, NOISE_FILE.as_posix(), json.loads)
    if noise is None:
        raise TrackingError(
            f"run {run_id} has no calibration/noise.json; pass the calibration parent run to --calibration"
        )
    return run_id, noise


def differences(groups: list[GroupDiff], a: RunSnapshot, b: RunSnapshot) -> Differences:
    """What differs between the runs, as the band policy weighs it: causes, seeds, kernel numerics."""
    changed = {group.name: group for group in groups if group.changes}
    causes = tuple(_name_causes(changed[name]) for name in CAUSES if name in changed)
    kernels = [f"op determinism off in {label}" for label, run in (("A", a), ("B", b)) if not run.op_determinism]
    kernels += [f"{name} differs" for name in ("determinism", "software", "hardware") if name in changed]
    return Differences(causes, "seeds" in changed, tuple(kernels))


def logged_compare_metrics(params: dict[str, Any]) -> dict[str, str]:
    """The metrics a run's own configuration judges, each to max or min: its `compare.metrics.*` params, else the
    default of its `data.task` (classification for runs logged before tasks existed)."""
    declared = {
        key.removeprefix("compare.metrics."): str(value)
        for key, value in params.items()
        if key.startswith("compare.metrics.")
    }
    return declared or dict(
        DEFAULT_COMPARE_METRICS.get(
            str(params.get("data.task", CLASSIFICATION)), DEFAULT_COMPARE_METRICS[CLASSIFICATION]
        )
    )


def metric_deltas(
    a: RunSnapshot,
    b: RunSnapshot,
    metrics: list[str],
    bands: dict[str, dict[str, Any]] | None,
    alpha: float,
    baseline_reference: bool = False,
    exact: bool = False,
) -> list[MetricDelta]:
    """B - A per metric; with bands, B judged by the band policy (around the baseline's mean when
    `baseline_reference`, else around A), Holm-corrected over the metrics."""
    rows: list[tuple[str, float, float]] = []
    judgements: dict[str, Judgement] = {}
    for metric in metrics:
        if metric not in a.metrics or metric not in b.metrics:
            continue
        value_a, value_b = a.metrics[metric], b.metrics[metric]
        rows.append((metric, value_a, value_b))
        band = (bands or {}).get(metric)
        if band is not None:
            checked = band_from_summary(metric, band["mean"], band["std"], band["n"], alpha, band.get("source", ""))
            judgements[metric] = judge(value_b, checked, None if baseline_reference else value_a, exact)
    corrected = dict(zip(judgements, judge_family(list(judgements.values()), alpha), strict=False))
    modes = logged_compare_metrics(b.params)
    return [
        MetricDelta(
            metric,
            value_a,
            value_b,
            value_b - value_a,
            corrected.get(metric),
            direction(value_b - value_a, modes.get(metric)),
        )
        for metric, value_a, value_b in rows
    ]


def diff_runs(
    client: Any,
    a: RunSnapshot,
    b: RunSnapshot,
    metrics: list[str] | None = None,
    alpha: float = 0.05,
    calibration: str | None = None,
    repo: Path | None = None,
) -> RunDiff:
    """Everything `tracking diff` reports about two runs; `metrics` None: those run B's configuration judges."""
    metrics = metrics or list(logged_compare_metrics(b.params))
    groups = group_diffs(a, b, repo)
    hash_a, hash_b = a.tags.get(WEIGHTS_TAG), b.tags.get(WEIGHTS_TAG)
    identical = hash_a == hash_b if hash_a and hash_b else None
    found = find_calibration(client, [a.experiment_id, b.experiment_id], calibration)
    band: dict[str, Any] = {
        "variant": None,
        "reason": "no calibration found: run `dvc repro calibrate` for noise bands",
    }
    bands, baseline_reference = None, False
    if found:
        run_id, noise = found
        choice = choose_band(differences(groups, a, b), list(noise["variants"]))
        baseline_reference = is_calibrated_baseline(a.params, a.manifest.get("content_sha256"), noise)
        band = {
            "variant": choice.variant,
            "reason": choice.reason,
            "calibration_run": run_id,
            "repeats": noise.get("repeats"),
            "data_sha256": noise.get("data_sha256"),
            "reference": "the calibrated baseline's mean (run A trained its data and configuration)"
            if baseline_reference
            else "run A",
        }
        if choice.variant is not None:
            bands = noise["variants"][choice.variant]["bands"]
    deltas = metric_deltas(a, b, metrics, bands, alpha, baseline_reference, exact=band["variant"] == CONTROL)
    result = RunDiff(a, b, groups, identical, deltas, band, alpha)
    return RunDiff(**{**result.__dict__, "conclusion": conclude(result)})


def conclude(diff: RunDiff) -> str:
    """One plain sentence: what changed, and whether the metrics' gaps are beyond noise."""
    causes = [_name_causes(group) for group in diff.changed(CAUSES)]
    noise_sources = [group.name for group in diff.changed(("seeds", "determinism", "software", "hardware"))]
    variant = (diff.band.get("variant") or "").upper()
    judged = [delta for delta in diff.deltas if delta.judgement is not None]
    if diff.weights_identical:
        return "weights are bit-identical: the runs trained the same model" + (
            f" ({_join(causes)} changed without effect)" if causes else ""
        )
    subject = f"{_join(causes)} changed" if causes else f"only {_join(noise_sources) or 'nothing logged'} differ"
    if not judged:
        return f"{subject}; no noise band to judge the gap ({diff.band['reason']})"
    exceeded = [delta for delta in judged if delta.verdict == EXCEEDS]
    unjudged = [delta for delta in judged if delta.verdict == CANNOT_JUDGE]
    if exceeded:
        beyond = f"the {_gap(exceeded[0])} is {abs(exceeded[0].z):.1f} sigma beyond the {variant} band"
        if causes:
            return f"{subject}; {beyond}: the change moved it beyond noise"
        return (
            f"{subject}, yet {beyond}: drift that chance does not explain; look at software and hardware, "
            "or re-run with `tracking rerun`"
        )
    if unjudged:
        return f"{subject}; the {variant} band cannot judge {unjudged[0].metric}: {unjudged[0].judgement.note}"
    inside = f"the {_gap(judged[0])} is inside the {variant} band ({abs(judged[0].z):.1f} sigma)"
    return f"{subject}; {inside}: " + ("its effect cannot be told from noise" if causes else "noise")


def _name_causes(group: GroupDiff) -> str:
    if group.name == "params":
        return ", ".join(change.key for change in group.changes)
    if group.name == "code":
        files = [change.key.removeprefix("file ") for change in group.changes if change.key.startswith("file ")]
        more = f" and {len(files) - 3} more files" if len(files) > 3 else ""
        return f"code ({', '.join(files[:3])}{more})" if files else "code"
    return group.name


def _gap(delta: MetricDelta) -> str:
    """The gap that was judged, e.g. "1.1 point test_accuracy gap to the baseline mean"."""
    found = delta.judgement
    size = abs(found.delta if found else delta.delta)
    to = " to the baseline mean" if found and found.reference_runs > 1 else ""
    if "accuracy" in delta.metric:
        return f"{size * 100:.1f} point {delta.metric} gap{to}"
    return f"{size:.4g} {delta.metric} gap{to}"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def _run_summary(run: RunSnapshot) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "name": run.name,
        "status": run.status,
        "experiment_id": run.experiment_id,
        "dvc_exp_name": run.tags.get("dvc.exp_name"),
        "weights_sha256": run.tags.get(WEIGHTS_TAG),
    }
