"""Bands and group comparisons over existing MLflow runs, chosen by experiment and filter string.

Runs without the metric are skipped and counted; fewer than two runs is an error. `compare_groups` puts two
groups side by side: each std, their ratio, Welch's t-test on the means and the Brown-Forsythe test
(Levene's test centred on the median) on the spreads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracking.errors import NoiseError, RunSelectionError, TrackingServerError
from tracking.noise.statistics import DDOF, band_from_values

_PAGE = 1000


@dataclass(frozen=True)
class MetricValues:
    """One metric's values over the selected runs, and how many runs lacked it."""

    metric: str
    values: list[float]
    skipped: int


def fetch_metric_values(experiment: str, filter_string: str, metrics: list[str]) -> dict[str, MetricValues]:
    """The latest value of each metric in every run of `experiment` matching `filter_string`."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    try:
        found = client.get_experiment_by_name(experiment)
    except MlflowException as err:
        raise TrackingServerError(
            f"MLflow store cannot be read ({str(err).splitlines()[0]}); check MLFLOW_TRACKING_URI"
        ) from err
    if found is None:
        raise RunSelectionError(
            f"MLflow experiment '{experiment}' not found; check --experiment (see `mlflow experiments search`)"
        )
    runs, token = [], None
    try:
        while True:
            page = client.search_runs(
                [found.experiment_id], filter_string=filter_string, max_results=_PAGE, page_token=token
            )
            runs.extend(page)
            token = page.token
            if not token:
                break
    except MlflowException as err:
        raise RunSelectionError(
            f"filter {filter_string!r} rejected by MLflow: {str(err).splitlines()[0]}; fix the filter string "
            "(e.g. metrics.test_accuracy > 0.9, tags.\"noise.variant\" = 'algo')"
        ) from err
    if not runs:
        matching = f" match filter {filter_string!r}" if filter_string else ""
        raise RunSelectionError(
            f"no runs in MLflow experiment '{experiment}'{matching}; run the pipeline there first "
            "(`dvc repro`) or change --experiment / the filter"
        )
    result = {}
    for metric in metrics:
        values = [run.data.metrics[metric] for run in runs if metric in run.data.metrics]
        result[metric] = MetricValues(metric, values, len(runs) - len(values))
    return result


def bands(experiment: str, filter_string: str, metrics: list[str], alpha: float) -> dict[str, Any]:
    """The band of each metric over the selected runs, with the count of runs skipped for lacking it."""
    source = f"mlflow:{experiment}" + (f" [{filter_string}]" if filter_string else "")
    out = {}
    for metric, found in fetch_metric_values(experiment, filter_string, metrics).items():
        out[metric] = {**band_from_values(metric, found.values, alpha, source).as_dict(), "skipped_runs": found.skipped}
    return out


def compare_groups(a: list[float], b: list[float], alpha: float) -> dict[str, Any]:
    """Two groups of one metric: stds and their ratio, Welch's t-test, Brown-Forsythe, and a plain verdict."""
    import numpy as np
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        raise NoiseError(
            f"each group needs at least 2 runs with the metric; got {len(a)} and {len(b)}: "
            "widen the filters or run more repeats"
        )
    std_a, std_b = float(np.std(a, ddof=DDOF)), float(np.std(b, ddof=DDOF))
    welch = stats.ttest_ind(a, b, equal_var=False)
    spread = stats.levene(a, b, center="median")
    means_differ, spreads_differ = bool(welch.pvalue < alpha), bool(spread.pvalue < alpha)
    ratio = std_a / std_b if std_b else (math.inf if std_a else 1.0)
    verdict = (
        f"means {'differ' if means_differ else 'do not differ'} (Welch p={welch.pvalue:.3g}); "
        f"spreads {'differ' if spreads_differ else 'do not differ'} (Brown-Forsythe p={spread.pvalue:.3g}) at alpha={alpha}"
    )
    return {
        "n_a": len(a),
        "n_b": len(b),
        "mean_a": float(np.mean(a)),
        "mean_b": float(np.mean(b)),
        "std_a": std_a,
        "std_b": std_b,
        "ddof": DDOF,
        "std_ratio_a_over_b": ratio,
        "welch_t": _finite(welch.statistic),
        "welch_p": _finite(welch.pvalue),
        "brown_forsythe_w": _finite(spread.statistic),
        "brown_forsythe_p": _finite(spread.pvalue),
        "means_differ": means_differ,
        "spreads_differ": spreads_differ,
        "verdict": verdict,
    }


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
