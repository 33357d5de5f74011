"""The verdict as the candidate's MLflow run page shows it: the run's description, markdown that MLflow renders first
on the page (the `mlflow.note.content` tag), read from the compare stage's record of the verdict (`compare.json`).

The tag `noise.verdict` answers the question the product exists for, but sits among some 140 tags and says nothing
of the band; the description puts the verdict, the band chosen and why, each metric's gap with its interval and
what the comparison could detect where a user looks first, with a link to the full report and one to the chart
view of every run's judged metrics (tracking/noise/judged_view.py).
"""

from __future__ import annotations

from typing import Any

from tracking.names import MAX_TAG_CHARS
from tracking.noise.judged_view import view_link
from tracking.noise.notes import shown_note
from tracking.noise.policy import CONTROL, OUTCOMES
from tracking.noise.power import DETECTED
from tracking.noise.statistics import format_p
from tracking.noise.verdict import headline

# Where the compare stage logs the report among the run's artifacts.
REPORT_ARTIFACT = "compare/compare.md"


def describe_verdict(result: dict[str, Any], experiment_id: str, run_id: str) -> str:
    """The candidate run's description (the compare stage's `result`): the verdict and its band, one line per metric
    that decides it, what each outcome means, then why that band and a link that opens the report among the run's artifacts. The UI shows the
    first lines until *Show more*: they hold the answer; the last links the experiment's runs charted on the judged
    metrics. Cut to the longest tag MLflow keeps."""
    runs = result["candidate_runs"]
    which = headline(result).removesuffix("; ")
    report = f"#/experiments/{experiment_id}/runs/{run_id}/artifacts/{REPORT_ARTIFACT}"
    lines = [
        f"**Noise verdict: {result['verdict']}**"
        + (f" ({which})" if which else "")
        + f", against the **{result['band_variant']}** band of {result['calibration_runs']} calibration runs"
        + (f", for the mean of {runs} candidate runs" if runs > 1 else ""),
        "",
        *(
            f"- {_line(row, result['band_variant'] == CONTROL)}"
            for row in result["checks"]
            if row["family"] == "primary"
        ),
        *(f"- Inconclusive: {shown_note(line, report)}." for line in result["inconclusive"]),
        "",
        "Outcomes: " + "; ".join(f"**{verdict}**: {meaning}" for verdict, meaning in OUTCOMES.items()) + ".",
        "",
        f"Why this band: {result['reason']}. Full report: [{REPORT_ARTIFACT}]({report}).",
        "",
        f"Every run of the experiment on {', '.join(judged_metrics(result))}: [chart view]({view_link(experiment_id)}).",
    ]
    return "\n".join(lines)[:MAX_TAG_CHARS]


def judged_metrics(result: dict[str, Any]) -> list[str]:
    """The metrics that decide the verdict (`compare.metrics`, the primary family), in the order they were judged."""
    return list(dict.fromkeys(row["metric"] for row in result["checks"] if row["family"] == "primary"))


def _line(row: dict[str, Any], control: bool) -> str:
    """One metric's line: its value against the band's mean and std, the gap with its interval and the test's t and
    p, what the comparison detects, and the metric's own verdict."""
    band = row["band"]
    alpha = band["alpha"]
    text = f"{row['metric']} {_number(row['value'], '.4f')}, band mean {band['mean']:.4f} (std {band['std']:.2g}): gap "
    text += _number(row["delta"], "+.4g")
    if row.get("interval") is not None:
        text += f" ({1 - alpha:.0%} interval {row['interval'][0]:+.4g} to {row['interval'][1]:+.4g})"
    text += f", t {_number(row['z'], '+.2f')}, p {format_p(row['p_value'])}"
    if row.get("detectable") is not None:
        text += f"; detects a shift of {row['detectable']:.3g} {DETECTED}"
    elif control:
        text += "; any change is drift"
    return f"{text}: **{row['verdict']}**"


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)
