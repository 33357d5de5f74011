"""A verdict's report (Markdown) and plots (PNG), as the compare stage writes them: what people would rather see
than read. A team's own pipeline renders its verdicts with the same functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tracking.config.params import REGRESSION
from tracking.noise.groups import in_range
from tracking.noise.notes import NOTES_ANCHOR, NOTES_HEADING, shown_note
from tracking.noise.power import DETECTED, NO_STD_INTERVAL, ceiling_clause
from tracking.noise.record import NoiseRecord
from tracking.noise.statistics import format_p, metric_range, pairwise_disagreement

# Why P(beat) has no interval (`tracking.noise.twosample.probability_of_beating`): a stratified bootstrap's
# covered the true probability 42-65% of the time with one candidate run and 81-93% with 3 to 5 (issue 34).
BEATS_UNBOUNDED = "no interval: its bootstrap interval covers 42-93% of the time, short of 95%"


def render_report(result: dict[str, Any]) -> str:
    """A readable account of the verdict: the band used and why, what it can see, then one row per check."""
    runs = result.get("candidate_runs", 1)
    lines = [
        f"# Compare: **{result['verdict']}**",
        "",
        f"- Judged against the **{result['band_variant']}** band ({result['calibration_runs']} calibration runs): "
        f"{result['reason']}.",
        f"- {result['correction']}. "
        + (
            "One candidate run: t = (value - band mean) / (std * sqrt(1 + 1/n)), std with ddof=1 (the prediction "
            "test), p from the t distribution on n-1 degrees of freedom or, where larger, from heavier-tailed noise."
            if runs == 1
            else f"{runs} candidate runs: the pooled two-sample t on the means, p from the t distribution on n+N-2 "
            "degrees of freedom or, where larger, from heavier-tailed noise; Welch's and the exact permutation p "
            "beside it."
        )
        + " t is the test statistic, not a count of band stds.",
        f"- Candidate churn against those runs: mean {result['candidate_churn']['mean']:.4f}, max {result['candidate_churn']['max']:.4f} "
        f"(churn: {result.get('churn_measure', 'fraction of test predictions whose class differs between two runs')}); "
        "more churn than reseeding gives is drift (one-sided, exact permutation test over the runs).",
    ]
    if "sequential" in result:
        design = result["sequential"]
        lines.append(
            f"- Candidate runs until decided (compare.candidate_repeats auto): {design['runs']} of at most "
            f"{design['cap']}, stopped: **{design['stopped']}**; each look judged at its nominal alpha, this one's "
            f"{design['nominal_alpha']:.4g}, so that false alarms over all looks stay at the family's alpha "
            f"({design['design']}; docs/noise-statistics.md)."
        )
    if result["bit_identical_to_control"] is not None:
        lines.append(f"- Weights bit-identical to the CONTROL runs: **{result['bit_identical_to_control']}**.")
    if result.get("worse") or result.get("better"):
        lines.append(
            f"- Beyond noise, worse: {', '.join(result.get('worse', [])) or 'none'}; "
            f"better: {', '.join(result.get('better', [])) or 'none'} (only worse fails compare.fail_on_drift)."
        )
    lines.append(
        f"- Churn, per-class and per-group checks beyond noise (they do not decide the verdict): {result['secondary_exceeding']}."
    )
    lines += [f"- Inconclusive: {shown_note(line, NOTES_ANCHOR)}." for line in result["inconclusive"]]
    lines += ["", "What this comparison can see:", ""]
    lines += [f"- {_sees(row, runs)}" for row in result["checks"] if row["family"] == "primary"]
    lines += [
        "",
        "| family | check | value | band mean | band std | interval | delta | better/worse | t | p | verdict |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for row in result["checks"]:
        band = in_range(row["band"])  # an accuracy's interval never reaches above 1
        goal = f"{row['direction']} ({row['mode']})" if row.get("direction") else "n/a"
        lines.append(
            f"| {row['family']} | {row['metric']} | {_number(row['value'], '.4f')} | {band['mean']:.4f} | {band['std']:.4f} | "
            f"[{band['low']:.4f}, {band['high']:.4f}] | {_number(row['delta'], '+.4f')} | {goal} | {_number(row['z'], '+.2f')} | "
            f"{format_p(row['p_value'])} | {row['verdict'] if row['family'] == 'primary' else _beside(row['verdict'])} |"
        )
    return "\n".join(lines + _notes_in_full(result)) + "\n"


def _notes_in_full(result: dict[str, Any]) -> list[str]:
    """The report's last section: each deciding metric's note whole, which the lines above show short and link."""
    notes = [
        f"- {row['metric']}: {row['note']}" for row in result["checks"] if row["family"] == "primary" and row["note"]
    ]
    return ["", f"## {NOTES_HEADING}", "", *notes] if notes else []


def _sees(row: dict[str, Any], runs: int) -> str:
    """One metric's line of what the comparison can see: the band's std, the shift it detects with 80% power, and
    the gap's interval."""
    band = row["band"]
    if not band["std"] > 0 or row["detectable"] is None:
        note = shown_note(row["note"], NOTES_ANCHOR)
        return f"{row['metric']}: the band has no spread" + (f" ({note})" if note else "")
    alpha = band["alpha"]
    text = (
        f"{row['metric']}: band std {band['std']:.4g} ({band['n']} runs; {NO_STD_INTERVAL}); with {runs} candidate run{'s' if runs > 1 else ''} a true shift of "
        f"{row['detectable']:.4g} ({row['detectable'] / band['std']:.2f} band stds) is detected {DETECTED}"
        f"{ceiling_clause(band['std'], row.get('ceiling_std'))}"
    )
    if row["interval"] is not None:
        text += f"; gap {row['delta']:+.4g}, {1 - alpha:.0%} interval {row['interval'][0]:+.4g} to {row['interval'][1]:+.4g}"
    if row.get("beats"):
        beats = row["beats"]
        text += f"; a candidate run beats a band run with probability {beats['probability']:.2f} ({BEATS_UNBOUNDED})"
    return text


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _beside(verdict: str) -> str:
    """A churn, per-class or per-group row's outcome, marked as not deciding the verdict (a reader took a class's
    `within_noise` row for the verdict)."""
    return f"{verdict} (beside the verdict)"


def candidate_label(result: dict, metric: str) -> str:
    """The candidate's legend entry on `metric`'s chart: that metric's own outcome, which the verdict may not be
    (test_loss beyond noise made the verdict `exceeds_noise` where test_accuracy was inconclusive)."""
    own = next(row["verdict"] for row in result["checks"] if row["family"] == "primary" and row["metric"] == metric)
    return f"candidate ({metric}: {own})"


def render_plots(
    paths: dict[str, Path],
    noise: NoiseRecord,
    calibration: Any,
    predictions: np.ndarray,
    candidate: dict[str, float],
    result: dict,
) -> None:
    """Per-variant spread of the first compare metric with the candidate marked, a churn heat map, and the
    spread of the per-class (or per-group; else every other banded) metrics. `candidate` holds the candidate's
    metrics under their banded names."""
    from matplotlib.figure import Figure

    runs = noise.runs
    variants = list(noise.variants)
    primary = next(row["metric"] for row in result["checks"] if row["family"] == "primary")
    bounds = metric_range(primary)
    figure = Figure(figsize=(7, 4), layout="tight")
    axis = figure.subplots()
    for index, variant in enumerate(variants):
        values = [run["metrics"][primary] for run in runs if run["variant"] == variant and primary in run["metrics"]]
        band = noise.variant(variant).bands.get(primary)
        if band:
            axis.vlines(
                index,
                max(band["low"], bounds[0]),  # an accuracy's interval drawn up to 1, as compare.md states it
                min(band["high"], bounds[1]),
                color="lightgray",
                linewidth=8,
                label="interval" if index == 0 else None,
            )
        axis.scatter(
            np.full(len(values), index) + np.linspace(-0.1, 0.1, len(values)),
            values,
            color="tab:blue",
            zorder=3,
            label="calibration runs" if index == 0 else None,
        )
    axis.axhline(candidate[primary], color="tab:red", linestyle="--", label=candidate_label(result, primary))
    axis.set_xticks(range(len(variants)), variants)
    axis.set_ylabel(primary)
    axis.set_title(f"spread of {primary} per variant (judged against {result['band_variant']})")
    axis.legend(fontsize=8)
    figure.savefig(paths["accuracy"], dpi=110)

    task = noise.task
    matrix = pairwise_disagreement(
        np.concatenate([predictions[None], calibration["predictions"]]), task, noise.target_std
    )
    labels = ["candidate"] + [f"{run['variant']}#{run['repeat']}" for run in runs]
    figure = Figure(figsize=(1.2 + 0.45 * len(labels), 1 + 0.45 * len(labels)), layout="tight")
    axis = figure.subplots()
    image = axis.imshow(matrix, cmap="viridis")
    axis.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    axis.set_yticks(range(len(labels)), labels, fontsize=7)
    axis.set_title("pairwise churn (mean |difference| / target std)" if task == REGRESSION else "pairwise churn")
    figure.colorbar(image)
    figure.savefig(paths["churn"], dpi=110)

    chosen = noise.runs_of(result["band_variant"])
    banded = noise.variant(result["band_variant"]).bands
    breakdown = [name for name in banded if name.startswith(("test_accuracy_class_", "test_group_"))]
    names = [name for name in (breakdown or list(banded)) if name in candidate]
    figure = Figure(figsize=(max(7.0, 0.5 * len(names)), 4), layout="tight")
    axis = figure.subplots()
    for index, name in enumerate(names):
        values = [run["metrics"][name] for run in chosen if name in run["metrics"]]
        axis.scatter(
            np.full(len(values), index),
            values,
            color="tab:blue",
            s=12,
            label="calibration runs" if index == 0 else None,
        )
        axis.scatter(
            index, candidate[name], color="tab:red", marker="x", s=50, label="candidate" if index == 0 else None
        )
    axis.set_xticks(range(len(names)), [name.removeprefix("test_") for name in names], rotation=60, fontsize=7)
    axis.set_ylabel("value")
    axis.set_title(f"per-class / per-group metrics: {result['band_variant']} runs and the candidate")
    axis.legend(fontsize=8)
    figure.savefig(paths["classes"], dpi=110)
