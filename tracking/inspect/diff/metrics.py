"""The metric gaps: B minus A for each metric the runs judge, tested against the chosen band."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracking.config.params import CLASSIFICATION, DEFAULT_COMPARE_METRICS
from tracking.inspect.diff.runs import RunSnapshot
from tracking.noise.judging import judge
from tracking.noise.policy import Judgement, direction
from tracking.noise.statistics import band_from_summary, finite


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
        """The gap as JSON holds it: no NaN or infinity (None; `note` says why). `scale` is the gap's estimated
        std under noise and `z` the t statistic, gap / scale, its p calibrated as `tracking.noise.tails` says."""
        found = self.judgement
        keys = ("reference", "reference_runs", "scale", "z", "p_value", "verdict", "detectable")
        tested = {key: getattr(found, key) for key in keys} if found else dict.fromkeys(keys)
        return {
            "metric": self.metric,
            "a": finite(self.a),
            "b": finite(self.b),
            "delta": finite(self.delta),
            "direction": self.direction,
            **{key: finite(value) if isinstance(value, float) else value for key, value in tested.items()},
            "note": found.note if found else "",
            "within_noise": self.within_noise,
        }


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


def logged_min_effects(params: dict[str, Any]) -> dict[str, float]:
    """A run's `compare.min_effect.*` params: the smallest gap that matters per metric."""
    prefix = "compare.min_effect."
    return {key.removeprefix(prefix): float(value) for key, value in params.items() if key.startswith(prefix)}


def metric_deltas(
    a: RunSnapshot,
    b: RunSnapshot,
    metrics: list[str],
    bands: dict[str, dict[str, Any]] | None,
    alpha: float,
    baseline_reference: bool = False,
    exact: bool = False,
    min_effect: Mapping[str, float] | None = None,
) -> list[MetricDelta]:
    """B - A per metric; with bands, B judged by `tracking.judge` (around the baseline's mean when
    `baseline_reference`, else around A), Holm-corrected over the metrics, with run B's `compare.min_effect` and,
    over it, `min_effect`."""
    rows = [
        (metric, a.metrics[metric], b.metrics[metric])
        for metric in metrics
        if metric in a.metrics and metric in b.metrics
    ]
    banded = {metric: (bands or {}).get(metric) for metric, _, _ in rows if (bands or {}).get(metric) is not None}
    checked = {
        metric: band_from_summary(metric, band["mean"], band["std"], band["n"], alpha, band.get("source", ""))
        for metric, band in banded.items()
    }
    verdict = judge(
        checked,
        {metric: [b.metrics[metric]] for metric in checked},
        alpha=alpha,
        min_effect={  # the run's own for the metrics judged here, and every one the user named
            **{metric: shift for metric, shift in logged_min_effects(b.params).items() if metric in checked},
            **(min_effect or {}),
        },
        control=exact,
        reference=None if baseline_reference else {metric: a.metrics[metric] for metric in checked},
    )
    corrected = dict(zip(checked, verdict.checks, strict=True))
    modes = logged_compare_metrics(b.params)
    return [
        MetricDelta(
            metric,
            value_a,
            value_b,
            value_b - value_a,
            corrected.get(metric),
            direction(judged_gap(value_a, value_b, corrected.get(metric)), modes.get(metric)),
        )
        for metric, value_a, value_b in rows
    ]


def judged_gap(value_a: float, value_b: float, found: Judgement | None) -> float:
    """The gap a metric's better/worse is read from: the one its t is, B - the baseline mean when B was judged
    around that mean, else B - A. Read from B - A beside a t from the baseline mean, the two could disagree (B
    better than A, worse than the baseline)."""
    return found.delta if around_baseline_mean(found) else value_b - value_a


def around_baseline_mean(found: Judgement | None) -> bool:
    """B was judged around the mean of the baseline's runs (more than one), not around run A."""
    return found is not None and found.reference_runs > 1
