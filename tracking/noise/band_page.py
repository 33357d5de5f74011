"""The band as the calibration parent run's MLflow page shows it: a description (the `mlflow.note.content` tag, the
first thing on the page) and one metric per figure, so a user who opens the calibration sees each variant's n, mean,
std and interval rather than child links and tags, with the band kept in `calibration/noise.json`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tracking.layout import NOISE_FILE
from tracking.names import MAX_TAG_CHARS
from tracking.noise.record import NoiseRecord
from tracking.noise.statistics import metric_range

BAND_IMAGE = "calibration/band.png"  # the band drawn, an artifact of the calibration parent run
BAND_METRIC_PREFIX = "band"  # `band.<variant>.<metric>.<figure>` on the calibration parent run
FIGURES = ("n", "mean", "std", "low", "high")


def shown_metrics(noise: NoiseRecord, wanted: Iterable[str] | None = None) -> list[str]:
    """The metrics the page shows: `wanted` (the compare stage's metrics) where some variant bands them, else every
    metric some variant bands, in the order first banded."""
    banded = list(dict.fromkeys(metric for variant in noise.variants.values() for metric in variant.bands))
    chosen = [metric for metric in wanted or () if metric in banded]
    return chosen or banded


def band_metrics(noise: NoiseRecord, metrics: list[str]) -> dict[str, float]:
    """`band.<variant>.<metric>.<figure>` for each variant and shown metric (`algo+impl` as `algo-impl`): what the
    chart view and a search filter (`metrics."band.algo.test_accuracy.std" > 0.01`) read."""
    return {
        f"{BAND_METRIC_PREFIX}.{metric_safe(name)}.{metric}.{figure}": float(
            bounded(metric, variant.bands[metric])[figure]
        )
        for name, variant in noise.variants.items()
        for metric in metrics
        if metric in variant.bands
        for figure in FIGURES
    }


def bounded(metric: str, band: dict) -> dict:
    """`band` with its interval inside the values `metric` can take (an accuracy's up to 1), as compare.md shows it."""
    low, high = metric_range(metric)
    return {**band, "low": max(band["low"], low), "high": min(band["high"], high)}


def metric_safe(variant: str) -> str:
    """A variant's name as an MLflow metric name takes it: `algo+impl` -> `algo-impl` (MLflow refuses a `+`)."""
    return re.sub(r"[^\w\-. :/]", "-", variant)


def describe_band(noise: NoiseRecord, metrics: list[str], experiment_id: str, run_id: str) -> str:
    """The calibration run's description: one table row per variant and metric, with the interval a new run of that
    variant falls in, a link that opens the band drawn among the run's artifacts, and where the whole record is."""
    alpha = noise.alpha
    lines = [
        f"**Noise band: {len(noise.runs)} calibration runs over {len(noise.variants)} variant(s)**"
        + (f", {len(noise.reused)} reused from earlier calibrations" if noise.reused else ""),
        "",
        f"| variant | metric | n | mean | std | {1 - alpha:.0%} interval for one new run |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for name, variant in noise.variants.items():
        for metric in metrics:
            if metric not in variant.bands:
                continue
            band = bounded(metric, variant.bands[metric])
            spread = "identical runs" if band["std"] == 0 else f"{band['low']:.4g} to {band['high']:.4g}"
            lines.append(f"| {name} | {metric} | {band['n']} | {band['mean']:.4g} | {band['std']:.3g} | {spread} |")
    lines += [
        "",
        f"Drawn: [{BAND_IMAGE}](#/experiments/{experiment_id}/runs/{run_id}/artifacts/{BAND_IMAGE}). Every banded "
        f"metric, each run and its seeds: `{NOISE_FILE.as_posix()}`.",
    ]
    return "\n".join(lines)[:MAX_TAG_CHARS]


def band_figure(noise: NoiseRecord, metrics: list[str]) -> Any:
    """The band drawn, one chart per shown metric: each variant's runs as dots and the interval one new run falls
    in as a bar, inside the metric's bounds (an accuracy's up to 1), so the page's table has a picture."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(3.2 * max(1, len(metrics)), 3.4), layout="tight")
    axes = figure.subplots(1, max(1, len(metrics)), squeeze=False)[0]
    names = list(noise.variants)
    for axis, metric in zip(axes, metrics, strict=False):
        for index, name in enumerate(names):
            if metric not in noise.variants[name].bands:
                continue
            band = bounded(metric, noise.variants[name].bands[metric])
            label = index == 0
            axis.vlines(
                index, band["low"], band["high"], color="lightgray", linewidth=8, label="interval" if label else None
            )
            values = [run["metrics"][metric] for run in noise.runs_of(name) if run["metrics"].get(metric) is not None]
            axis.scatter(
                [index] * len(values), values, color="tab:blue", s=14, zorder=3, label="runs" if label else None
            )
        axis.set_xticks(range(len(names)), names)
        axis.set_title(metric, fontsize=9)
        axis.legend(fontsize=7)
    return figure
