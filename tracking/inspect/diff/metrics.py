"""The metric gaps: B minus A for each metric the runs judge, tested against the chosen band."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracking.config.params import CLASSIFICATION, DEFAULT_COMPARE_METRICS
from tracking.inspect.diff.runs import RunSnapshot
from tracking.noise.policy import Judgement, direction, judge, judge_family
from tracking.noise.statistics import band_from_summary


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
