"""The verdict as the candidate's MLflow run page shows it: the run's description, markdown that MLflow renders first
on the page (the `mlflow.note.content` tag), read from the compare stage's record of the verdict (`compare.json`).

The tag `noise.verdict` answers the question the product exists for, but sits among some 140 tags and says nothing
of the band; the description puts the verdict, the band chosen and why, each metric's gap with its interval and
what the comparison could detect where a user looks first, with a link to the full report.
"""

from __future__ import annotations

from typing import Any

from tracking.names import MAX_TAG_CHARS
from tracking.noise.policy import CANNOT_JUDGE
from tracking.noise.statistics import format_p
from tracking.noise.verdict import headline

# Where the compare stage logs the report among the run's artifacts.
REPORT_ARTIFACT = "compare/compare.md"


def describe_verdict(result: dict[str, Any], experiment_id: str, run_id: str) -> str:
    """The candidate run's description: the verdict, its band and why, then one row per metric that decides it (the
    compare stage's `result`). The link opens the report among the run's artifacts in the MLflow UI. Cut to the
    longest tag MLflow keeps, the table last so that a long one loses rows, not the verdict."""
    runs = result["candidate_runs"]
    candidate = "candidate" if runs == 1 else f"mean of {runs} candidate runs"
    report = f"#/experiments/{experiment_id}/runs/{run_id}/artifacts/{REPORT_ARTIFACT}"
    which = headline(result).removesuffix("; ")
    lines = [
        f"### Noise verdict: **{result['verdict']}**" + (f" ({which})" if which else ""),
        "",
        f"Judged against the **{result['band_variant']}** band ({result['calibration_runs']} calibration runs): "
        f"{result['reason']}. Full report: [{REPORT_ARTIFACT}]({report}).",
        "",
        *(f"- Cannot judge {line}." for line in result["cannot_judge"]),
        *([""] if result["cannot_judge"] else []),
        f"| metric | {candidate} | band mean (std) | gap [{_level(result)} interval] | t | p | "
        "shift detected 80% of the time | verdict |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    lines += [_row(row) for row in result["checks"] if row["family"] == "primary"]
    return "\n".join(lines)[:MAX_TAG_CHARS]


def _level(result: dict[str, Any]) -> str:
    """The confidence level of the intervals, from the first check's band (`1 - compare.alpha`)."""
    return f"{1 - result['checks'][0]['band']['alpha']:.0%}"


def _row(row: dict[str, Any]) -> str:
    """One metric's row: its value, the band's mean and std, the gap with its interval, the test, what it can see."""
    band = row["band"]
    gap = _number(row["delta"], "+.4g")
    if row.get("interval") is not None:
        gap += f" [{row['interval'][0]:+.4g}, {row['interval'][1]:+.4g}]"
    cells = (
        row["metric"],
        _number(row["value"], ".4f"),
        f"{band['mean']:.4f} ({band['std']:.4g}, {band['n']} runs)",
        gap,
        _number(row["z"], "+.2f"),
        format_p(row["p_value"]),
        _number(row.get("detectable"), ".4g"),
        row["verdict"] + (f": {row['note']}" if row["verdict"] == CANNOT_JUDGE and row["note"] else ""),
    )
    return "| " + " | ".join(cells) + " |"


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)
