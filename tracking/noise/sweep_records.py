"""The records of a sweep judged as one family (`tracking.noise.sweep.judge_sweep`): a candidate as it comes in,
its row as the family judged it, and the sweep's verdict with its table, as JSON and Markdown hold them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracking.noise.policy import Judgement
from tracking.noise.statistics import finite

HOLM, FDR = "holm", "fdr"
# How a table names each family correction, at alpha (in %) over its tests.
METHODS = {
    HOLM: "Holm over {tests} tests",
    FDR: "a {alpha:.3g}% false discovery rate over {tests} tests (Benjamini-Hochberg)",
}


@dataclass(frozen=True)
class SweepCandidate:
    """One candidate of a sweep: its name (a DVC experiment's or an MLflow run's), each metric's values over its
    runs, the params that differ from the baseline (for the table) and the verdict its own compare stage gave."""

    name: str
    values: Mapping[str, Sequence[float]]
    changed: Mapping[str, Any] = field(default_factory=dict)
    single_verdict: str | None = None


@dataclass(frozen=True)
class SweepRow:
    """One candidate as the family judged it: its verdict and checks, its gap on the `metric` that ranks
    (`primary`) with that gap's simultaneous interval, the verdict it got alone and why the two differ ("" if not),
    and for an undecided candidate what would decide it (`decide`)."""

    name: str
    verdict: str
    checks: tuple[Judgement, ...]
    gap: float
    interval: tuple[float, float] | None
    single_verdict: str | None
    note: str
    metric: str = ""
    changed: Mapping[str, Any] = field(default_factory=dict)
    decide: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The row as strict JSON holds it (no NaN or infinity)."""
        return {
            "name": self.name,
            "verdict": self.verdict,
            "metric": self.metric,
            "gap": finite(self.gap),
            "interval": None if self.interval is None else [finite(value) for value in self.interval],
            "single_verdict": self.single_verdict,
            "note": self.note,
            "decide": self.decide,
            "changed": dict(self.changed),
            "checks": [found.as_dict() for found in self.checks],
        }


@dataclass(frozen=True)
class SweepVerdict:
    """The sweep's verdict (`exceeds_noise` where a candidate is beyond noise), its rows ranked best first, the
    candidates better, worse, within noise and undecided (`moved`: beyond noise on a metric without a mode, so
    neither better nor worse), how the family was corrected and over how many tests."""

    verdict: str
    rows: tuple[SweepRow, ...]
    better: tuple[str, ...]
    worse: tuple[str, ...]
    within: tuple[str, ...]
    undecided: tuple[str, ...]
    method: str
    alpha: float
    family_size: int
    primary: str = ""
    moved: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The verdict as strict JSON holds it."""
        return {
            "verdict": self.verdict,
            "method": self.method,
            "alpha": self.alpha,
            "family_size": self.family_size,
            "primary": self.primary,
            "better": list(self.better),
            "worse": list(self.worse),
            "within": list(self.within),
            "undecided": list(self.undecided),
            "moved": list(self.moved),
            "rows": [row.as_dict() for row in self.rows],
        }

    def table(self) -> str:
        """The family verdict as Markdown: a summary line, then rank, candidate, changed params, the primary gap,
        its simultaneous interval, the family's verdict and the note."""
        corrected = METHODS[self.method].format(tests=self.family_size, alpha=100 * self.alpha)
        level = 100 * (1 - self.alpha)
        groups = [
            f"{label}: {', '.join(names)}"
            for label, names in (
                ("better", self.better),
                ("worse", self.worse),
                ("moved", self.moved),
                ("within noise", self.within),
                ("undecided", self.undecided),
            )
            if names
        ]
        lines = [
            f"**{self.verdict}**: {len(self.rows)} candidates judged as one family, {corrected} at alpha "
            f"{self.alpha:g}; {'; '.join(groups)}.",
            "",
            f"| rank | candidate | changed | {self.primary} gap | {level:.3g}% simultaneous interval | verdict | note |",
            "| ---: | --- | --- | ---: | --- | --- | --- |",
        ]
        for rank, row in enumerate(self.rows, 1):
            changed = ", ".join(f"{key}={value}" for key, value in row.changed.items()) or "-"
            interval = "-" if row.interval is None else f"{row.interval[0]:.4g} to {row.interval[1]:.4g}"
            gap = f"{row.gap:+.4g}" if math.isfinite(row.gap) else "not a number"
            cells = [str(rank), _cell(row.name), _cell(changed), gap, interval, row.verdict]
            note = "; ".join(filter(None, [row.note, row.decide]))
            lines.append("| " + " | ".join([*cells, _cell(note)]) + " |")
        return "\n".join(lines)


def _cell(text: str) -> str:
    """`text` as one Markdown table cell: its pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")
