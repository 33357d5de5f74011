"""What a judged sweep shows: reports/sweep.md (the ranked table first, then what more tuning would buy and the
confirmation), the expected-best plot, and its MLflow parent run, whose description is the same table (the UI shows a
run's description first), with the plot and report as artifacts, metrics the chart view draws, and on each
candidate's run the sweep's tag, its rank and its verdict in the family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from tracking.layout import SWEEP_PLOT, SWEEP_REPORT
from tracking.names import (
    MAX_TAG_CHARS,
    MLFLOW_NOTE_TAG,
    SWEEP_RANK_TAG,
    SWEEP_TAG,
    SWEEP_VERDICT_TAG,
    tag_is,
)
from tracking.noise.judged_view import view_link
from tracking.sweeps.members import Sweep

if TYPE_CHECKING:
    from tracking.noise.selection import Confirmation
    from tracking.noise.study import Study
    from tracking.noise.sweep import SweepVerdict
    from tracking.run.tracker import Tracker

ARTIFACTS = "sweep"  # the parent run's artifact folder


@dataclass(frozen=True)
class JudgedSweep:
    """A sweep and what judging it found: the family's verdict, the expected best of the primary metric after n
    trials (n, mean, low, high), the selected best's confirmation on `confirmation_runs` fresh runs (or None), and the
    study of one param's values (or None: `--study`)."""

    sweep: Sweep
    verdict: SweepVerdict
    primary: str
    curve: list[tuple[int, float, float, float]]
    confirmation: Confirmation | None = None
    confirmation_runs: int = 0
    study: Study | None = None

    def headline(self) -> str:
        """One line: the family's verdict, what beat the baseline beyond noise, and the confirmation's."""
        v = self.verdict
        line = (
            f"sweep {self.sweep.name}: {v.verdict} ({len(v.rows)} candidates, {v.method} at {v.alpha:g} over "
            f"{v.family_size} checks): {len(v.better)} better, {len(v.worse)} worse, {len(v.within)} within noise, "
            f"{len(v.undecided)} undecided"
        )
        if self.confirmation is not None:
            c = self.confirmation
            line += (
                f"; {v.rows[0].name} confirmed on {self.confirmation_runs} fresh runs: {c.verdict}, gap "
                f"{c.confirmed_gap:+.4g} against {c.selected_gap:+.4g} as selected"
            )
        if self.study is not None:
            shown = ", ".join(self.study.better) or "none"
            line += f"; {self.study.scientific} values whose best beats the baseline beyond selection: {shown}"
        return line


def report(judged: JudgedSweep, plot_name: str = SWEEP_PLOT.name) -> str:
    """reports/sweep.md: the ranked table first, then how it was judged, the expected best and the confirmation."""
    sweep, v = judged.sweep, judged.verdict
    lines = [
        f"# Sweep {sweep.name}: {v.verdict}",
        "",
        v.table(),
        "",
        f"Judged as one family: {len(v.rows)} candidates on {', '.join(sweep.modes)} ({v.family_size} checks), "
        f"{_method(v.method)} at {v.alpha:g}, each against the **{sweep.variant}** band of "
        f"{len(sweep.band()[judged.primary])} calibration runs ({sweep.source}). A candidate's own verdict (its "
        "compare stage's, alone at its alpha) stays on its run; the note says where the family's differs.",
        "",
        f"## What more tuning would buy: the expected best {judged.primary} of n trials",
        "",
        f"![expected best]({plot_name})",
        "",
        "| trials | expected best | bootstrap band |",
        "| ---: | ---: | --- |",
        *(f"| {n} | {mean:.4g} | {low:.4g} to {high:.4g} |" for n, mean, low, high in judged.curve),
        "",
        "From each candidate's mean over its runs (Dodge et al. 2019): the best of n trials drawn from this "
        "sweep's, with its bootstrap band (how much the curve moves had the sweep drawn other trials; not a 95% "
        "interval of the true expected best: docs/noise-statistics.md). A curve still rising at the sweep's size says more trials would "
        "likely find better; a flat one, that they would not.",
        "",
        "## Confirmation",
        "",
        *_confirmation_lines(judged),
    ]
    if judged.study is not None:
        lines += ["", f"## Study: {judged.study.scientific}", "", judged.study.table()]
    return "\n".join(lines) + "\n"


def _method(method: str) -> str:
    return {"holm": "family-wise error (Holm)", "fdr": "false discovery rate (Benjamini-Hochberg)"}.get(method, method)


def _confirmation_lines(judged: JudgedSweep) -> list[str]:
    best = judged.verdict.rows[0]
    if judged.confirmation is None:
        return [
            f"Not confirmed. {best.name}'s gap of {best.gap:+.4g} was selected as the best of "
            f"{len(judged.verdict.rows)}, so it is biased upwards: `tracking sweep ... --confirm N` re-trains it on N "
            "fresh seeds and judges those runs alone."
        ]
    c = judged.confirmation
    interval = c.confirmed_interval
    shown = f" ({interval[0]:+.4g} to {interval[1]:+.4g})" if interval else ""
    return [
        f"| {judged.primary} of {best.name} | gap | runs |",
        "| --- | ---: | ---: |",
        f"| as selected (biased by the selection) | {c.selected_gap:+.4g} | {_runs(judged)} |",
        f"| confirmed on fresh seeds | {c.confirmed_gap:+.4g}{shown} | {judged.confirmation_runs} |",
        "",
        f"Confirmation verdict on the fresh runs alone: **{c.verdict}**.",
    ]


def _runs(judged: JudgedSweep) -> int:
    return len(judged.sweep.member(judged.verdict.rows[0].name).values[judged.primary])


def draw_plot(judged: JudgedSweep, path: Path) -> None:
    """The expected best of the primary metric after n trials with its bootstrap band, and the noise band's mean."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    trials = [point[0] for point in judged.curve]
    figure = Figure(figsize=(6, 3.6))
    axes = figure.subplots()
    axes.fill_between(
        trials, [p[2] for p in judged.curve], [p[3] for p in judged.curve], alpha=0.25, label="bootstrap band"
    )
    axes.plot(trials, [p[1] for p in judged.curve], marker="o", label="expected best")
    band = [value for value in judged.sweep.band()[judged.primary] if math.isfinite(value)]
    if band:
        axes.axhline(sum(band) / len(band), color="grey", linestyle="--", label="baseline band mean")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("trials")
    axes.set_ylabel(f"best {judged.primary}")
    axes.set_title(f"Expected best of n trials, sweep {judged.sweep.name}", fontsize=10)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def description(judged: JudgedSweep, experiment_id: str, run_id: str) -> str:
    """The parent run's description: the ranked table first (the UI shows it before anything else), then the
    headline and a link to the chart view of the sweep's runs. Cut to the longest tag MLflow keeps."""
    shown = quote(tag_is(SWEEP_TAG, judged.sweep.name))
    text = "\n".join(
        [
            judged.verdict.table(),
            "",
            f"**{judged.headline()}**",
            "",
            f"The sweep's runs charted: [chart view]({view_link(experiment_id)}&searchFilter={shown}). Report: "
            f"[{ARTIFACTS}/{SWEEP_REPORT.name}](#/experiments/{experiment_id}/runs/{run_id}/artifacts).",
        ]
    )
    return text[:MAX_TAG_CHARS]


def publish(judged: JudgedSweep, parent: Tracker, root: Path) -> None:
    """Write the report and plot under `root`, log them to the sweep's `parent` run with its description, tags and
    metrics, and mark each candidate's run with the sweep's tag, its rank and its family verdict."""
    draw_plot(judged, root / SWEEP_PLOT)
    (root / SWEEP_REPORT).write_text(report(judged), encoding="utf-8")
    primary, v = judged.primary, judged.verdict
    parent.set_tags(
        {MLFLOW_NOTE_TAG: description(judged, parent.experiment_id, parent.run_id), SWEEP_TAG: judged.sweep.name}
    )
    for n, mean, low, high in judged.curve:
        parent.log_metrics(
            {
                f"expected_best_{primary}": mean,
                f"expected_best_{primary}_low": low,
                f"expected_best_{primary}_high": high,
            },
            step=n,
        )
    for rank, row in enumerate(v.rows, start=1):
        parent.log_metrics({f"sweep_gap_{primary}": row.gap}, step=rank)
    summary: dict[str, Any] = {"candidates": len(v.rows), "better": len(v.better), "worse": len(v.worse)}
    summary |= {"within_noise": len(v.within), "undecided": len(v.undecided)}
    if judged.confirmation is not None:
        summary |= {
            f"selected_gap_{primary}": judged.confirmation.selected_gap,
            f"confirmed_gap_{primary}": judged.confirmation.confirmed_gap,
        }
    parent.log_metrics({key: float(value) for key, value in summary.items() if math.isfinite(float(value))})
    for path in (SWEEP_REPORT, SWEEP_PLOT):
        parent.log_artifact(root / path, ARTIFACTS)
    parent.log_json(_record(judged), f"{ARTIFACTS}/sweep.json")
    for rank, row in enumerate(v.rows, start=1):
        run_id = judged.sweep.member(row.name).run_id
        for key, value in {SWEEP_TAG: judged.sweep.name, SWEEP_RANK_TAG: rank, SWEEP_VERDICT_TAG: row.verdict}.items():
            parent.client.set_tag(run_id, key, str(value))
        if math.isfinite(row.gap):
            parent.client.log_metric(run_id, f"sweep_gap_{primary}", row.gap)


def _record(judged: JudgedSweep) -> dict[str, Any]:
    """The sweep's record, as the parent run keeps it (sweep/sweep.json)."""
    sweep = judged.sweep
    return {
        "sweep": sweep.name,
        "calibration": sweep.source,
        "band_variant": sweep.variant,
        "candidates": {member.name: member.run_id for member in sweep.members},
        "verdict": judged.verdict.as_dict(),
        "expected_best": [list(point) for point in judged.curve],
        "confirmation": judged.confirmation.as_dict() if judged.confirmation else None,
        "confirmation_runs": judged.confirmation_runs,
        "study": judged.study.as_dict() if judged.study else None,
    }
