"""The compare stage's report (Markdown) and plots (PNG): what people would rather see than read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tracking.noise import pairwise_churn


def render_report(result: dict[str, Any]) -> str:
    """A readable account of the verdict: the band used and why, then one row per check."""
    lines = [
        f"# Compare: **{result['verdict']}**",
        "",
        f"- Judged against the **{result['band_variant']}** band ({result['calibration_runs']} calibration runs): {result['reason']}.",
        f"- {result['correction']}; intervals are t-based prediction intervals for one new run (std with ddof=1); "
        "z = (value - band mean) / (std * sqrt(1 + 1/n)), the statistic whose t-distribution gives p.",
        f"- Candidate churn against those runs: mean {result['candidate_churn']['mean']:.4f}, max {result['candidate_churn']['max']:.4f}.",
    ]
    if result["bit_identical_to_control"] is not None:
        lines.append(f"- Weights bit-identical to the CONTROL runs: **{result['bit_identical_to_control']}**.")
    lines.append(f"- Churn, per-class and per-group checks beyond noise (they do not decide the verdict): {result['secondary_exceeding']}.")
    lines += [f"- Cannot judge {line}." for line in result["cannot_judge"]]
    lines += ["", "| family | check | value | band mean | band std | interval | delta | z | p | verdict |",
              "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for row in result["checks"]:
        band = row["band"]
        lines.append(f"| {row['family']} | {row['metric']} | {row['value']:.4f} | {band['mean']:.4f} | {band['std']:.4f} | "
                     f"[{band['low']:.4f}, {band['high']:.4f}] | {row['delta']:+.4f} | {_number(row['z'], '+.2f')} | "
                     f"{_number(row['p_value'], '.3g')} | {row['verdict']} |")
    return "\n".join(lines) + "\n"


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def render_plots(paths: dict[str, Path], noise: dict, calibration: Any, predictions: np.ndarray, evaluation: dict,
                 result: dict) -> None:
    """Per-variant accuracy spread with the candidate marked, a churn heat map, and the per-class spread."""
    from matplotlib.figure import Figure

    runs = noise["runs"]
    variants = list(noise["variants"])
    figure = Figure(figsize=(7, 4), layout="tight")
    axis = figure.subplots()
    for index, variant in enumerate(variants):
        values = [run["metrics"]["test_accuracy"] for run in runs if run["variant"] == variant]
        band = noise["variants"][variant]["bands"]["test_accuracy"]
        axis.vlines(index, band["low"], band["high"], color="lightgray", linewidth=8, label="interval" if index == 0 else None)
        axis.scatter(np.full(len(values), index) + np.linspace(-0.1, 0.1, len(values)), values, color="tab:blue", zorder=3,
                     label="calibration runs" if index == 0 else None)
    axis.axhline(evaluation["test_accuracy"], color="tab:red", linestyle="--", label=f"candidate ({result['verdict']})")
    axis.set_xticks(range(len(variants)), variants)
    axis.set_ylabel("test accuracy")
    axis.set_title(f"spread of test accuracy per variant (judged against {result['band_variant']})")
    axis.legend(fontsize=8)
    figure.savefig(paths["accuracy"], dpi=110)

    matrix = pairwise_churn(np.vstack([predictions[None, :], calibration["predictions"]]))
    labels = ["candidate"] + [f"{run['variant']}#{run['repeat']}" for run in runs]
    figure = Figure(figsize=(1.2 + 0.45 * len(labels), 1 + 0.45 * len(labels)), layout="tight")
    axis = figure.subplots()
    image = axis.imshow(matrix, cmap="viridis")
    axis.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    axis.set_yticks(range(len(labels)), labels, fontsize=7)
    axis.set_title("pairwise predictive churn (fraction of test predictions that differ)")
    figure.colorbar(image)
    figure.savefig(paths["churn"], dpi=110)

    chosen = [runs[i] for i in noise["variants"][result["band_variant"]]["runs"]]
    classes = sorted(evaluation["per_class_accuracy"], key=int)
    figure = Figure(figsize=(7, 4), layout="tight")
    axis = figure.subplots()
    for index, label in enumerate(classes):
        values = [run["metrics"][f"test_accuracy_class_{label}"] for run in chosen]
        axis.scatter(np.full(len(values), index), values, color="tab:blue", s=12, label="calibration runs" if index == 0 else None)
        axis.scatter(index, evaluation["per_class_accuracy"][label], color="tab:red", marker="x", s=50,
                     label="candidate" if index == 0 else None)
    axis.set_xticks(range(len(classes)), classes)
    axis.set_xlabel("class")
    axis.set_ylabel("test accuracy")
    axis.set_title(f"per-class accuracy: {result['band_variant']} runs and the candidate")
    axis.legend(fontsize=8)
    figure.savefig(paths["classes"], dpi=110)
