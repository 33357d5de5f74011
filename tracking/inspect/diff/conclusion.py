"""The whole diff of two runs (`diff_runs`) and its one-sentence conclusion."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.inspect.diff.bands import choose_calibrated_band
from tracking.inspect.diff.changes import GroupDiff
from tracking.inspect.diff.metrics import MetricDelta, logged_compare_metrics, metric_deltas
from tracking.inspect.diff.ranked_groups import CAUSES, GROUP_ORDER, group_diffs, name_causes
from tracking.inspect.diff.runs import RunSnapshot
from tracking.names import DVC_EXP_NAME_TAG, SCRIPT_COMMAND_TAG, WEIGHTS_TAG
from tracking.noise.knobs import LIBRARY, TEMPLATE, advising
from tracking.noise.metric_family import overall_verdict
from tracking.noise.notes import gist
from tracking.noise.policy import CONTROL, EXCEEDS, INCONCLUSIVE, WITHIN_TOLERANCE
from tracking.noise.statistics import format_p

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


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
        control = self.band.get("variant") == CONTROL
        if not judged and not (control and self.weights_identical is False):
            return None
        return overall_verdict(judged, control, self.weights_identical)

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


def diff_runs(
    client: MlflowClient,
    a: RunSnapshot,
    b: RunSnapshot,
    metrics: list[str] | None = None,
    alpha: float = 0.05,
    calibration: str | None = None,
    repo: Path | None = None,
    min_effect: Mapping[str, float] | None = None,
) -> RunDiff:
    """Everything `tracking diff` reports about two runs; `metrics` None: those run B's configuration judges;
    `min_effect`: smallest shifts that matter beyond those run B logged (`tracking judge --min-effect`). Advice names
    the knobs of run B's route: a team's script's (`tracking calibrate`, `tracking judge`) or the template's."""
    metrics = metrics or list(logged_compare_metrics(b.params))
    groups = group_diffs(a, b, repo)
    hash_a, hash_b = a.tags.get(WEIGHTS_TAG), b.tags.get(WEIGHTS_TAG)
    identical = hash_a == hash_b if hash_a and hash_b else None
    with advising(LIBRARY if SCRIPT_COMMAND_TAG in b.tags else TEMPLATE):
        band = choose_calibrated_band(client, groups, a, b, calibration)
        exact = band.described["variant"] == CONTROL
        deltas = metric_deltas(a, b, metrics, band.bands, alpha, band.baseline_reference, exact, min_effect)
        result = RunDiff(a, b, groups, identical, deltas, band.described, alpha)
        return RunDiff(**{**result.__dict__, "conclusion": conclude(result)})


def conclude(diff: RunDiff) -> str:
    """One plain sentence: what changed, and whether the metrics' gaps are beyond noise; under CONTROL it says
    whether the weights are bit-identical, and never calls a CONTROL drift noise."""
    causes = [name_causes(group) for group in diff.changed(CAUSES)]
    noise_sources = [group.name for group in diff.changed(("seeds", "determinism", "software", "hardware"))]
    variant = (diff.band.get("variant") or "").upper()
    judged = [delta for delta in diff.deltas if delta.judgement is not None]
    if diff.weights_identical:
        return "weights are bit-identical: the runs trained the same model" + (
            f" ({_join(causes)} changed without effect)" if causes else ""
        )
    subject = f"{_join(causes)} changed" if causes else f"only {_join(noise_sources) or 'nothing logged'} differ"
    if diff.band.get("variant") == CONTROL and diff.weights_identical is False:
        moved = [delta for delta in judged if delta.verdict == EXCEEDS]
        metrics = f"the {_gap(moved[0])} shows it" if moved else "the metrics judged are equal"
        return (
            f"{subject}; under CONTROL (same seeds, configuration and environment) the weights are not bit-identical "
            f"and {metrics}: drift that chance does not explain; look at software and hardware, or re-run with "
            "`tracking rerun`"
        )
    if not judged:
        return f"{subject}; no noise band to judge the gap ({diff.band['reason']})"
    exceeded = [delta for delta in judged if delta.verdict == EXCEEDS]
    unjudged = [delta for delta in judged if delta.verdict == INCONCLUSIVE]
    tolerated = [delta for delta in judged if delta.verdict == WITHIN_TOLERANCE]
    if exceeded:
        beyond = f"the {_gap(exceeded[0])} is beyond the {variant} band ({_test(exceeded[0])})"
        if causes:
            return f"{subject}; {beyond}: the change moved it beyond noise"
        return (
            f"{subject}, yet {beyond}: drift that chance does not explain; look at software and hardware, "
            "or re-run with `tracking rerun`"
        )
    if unjudged:
        return f"{subject}; the {variant} band leaves {unjudged[0].metric} inconclusive: {gist(unjudged[0].judgement.note)}"
    if tolerated:
        return (
            f"{subject}; the {_gap(tolerated[0])} is beyond the {variant} band ({_test(tolerated[0])}) but below "
            "compare.min_effect: within tolerance"
        )
    inside = f"the {_gap(judged[0])} is inside the {variant} band ({_test(judged[0])})"
    return f"{subject}; {inside}: " + ("its effect cannot be told from noise" if causes else "noise") + _sees(judged[0])


def _sees(delta: MetricDelta) -> str:
    """How weak a `within noise` is: the shift this band detects 80% of the time, e.g. "; it detects a 5.5 point
    test_accuracy shift 80% of the time"."""
    found = delta.judgement
    if found is None or found.detectable is None:
        return ""
    size = f"{found.detectable * 100:.1f} point" if "accuracy" in delta.metric else f"{found.detectable:.4g}"
    return f" (this band detects a {size} {delta.metric} shift 80% of the time)"


def _test(delta: MetricDelta) -> str:
    """The test behind a gap's verdict, e.g. "t = 0.3, p = 0.8"; under CONTROL, that the runs are identical."""
    found = delta.judgement
    if found is None or found.z is None:
        return "CONTROL runs are identical" if found and found.scale == 0 else "no statistic"
    p = format_p(found.p_value)
    return f"t = {found.z:.1f}, p {'' if p.startswith('<') else '= '}{p}"


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
        "dvc_exp_name": run.tags.get(DVC_EXP_NAME_TAG),
        "weights_sha256": run.tags.get(WEIGHTS_TAG),
    }
