"""What picking the best of a sweep is worth: the expected best as trials are added, and the winner confirmed.

- `expected_best`: the expected best value of n trials drawn from a sweep's trial values, as a function of n
  (Dodge et al. 2019, "expected validation performance"): with the N values sorted worst to best,
  E[best of n] = sum_i v_(i) · ((i/N)^n - ((i-1)/N)^n), n draws with replacement from the values as they came.
  Beside it, its bootstrap band: the 2.5 and 97.5% percentiles of the curve over trials resampled with
  replacement (`BOOTSTRAPS` resamples, seeded), how much the curve moves had the sweep drawn other trials. It is
  not a 95% interval of the true expected best: `bench/sweep_family.py --only expected-best` measured it covering
  90% at n = 1 and 46% at n = N of 8 normal trials (the estimate is biased low as n nears N, and no resampling of N
  trials sees the tail beyond their best). It says what more budget of the same search buys within what was
  seen; it cannot extrapolate past the best value seen (the curve flattens at it). Trials whose value is not a
  number (a diverged training) are left out.
- `judge_confirmation`: the selected candidate's runs were picked because they came out best, so their gap is
  biased upward (the winner's curse). Fresh runs of the same configuration (new seeds), judged alone against
  the band by `tracking.judge` at alpha (one hypothesis, chosen on other data, so no family correction), give a
  gap free of that selection; the record keeps the selection-biased gap beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracking.errors import NoiseError
from tracking.names import as_logged
from tracking.noise.judging import Verdict, judge
from tracking.noise.statistics import finite
from tracking.noise.sweep import SweepRow

BOOTSTRAPS = 2_000
SEED = 66
LEVEL = 0.95


def expected_best(
    values: Sequence[float], mode: str, trials: Sequence[int] | None = None
) -> list[tuple[int, float, float, float]]:
    """Per n in `trials` (default 1 to the number of values), the expected best of n trials drawn from `values`
    (the largest for `mode` max, the smallest for min) with its bootstrap band (the module's docstring says what
    it covers): (n, expected, low, high). Values as MLflow's SQL store hands them back are read as logged; those that are not finite are left
    out."""
    if mode not in ("max", "min"):
        raise NoiseError(f"mode {mode!r} is neither max nor min", fix="say which way is better: max or min")
    finite_values = np.asarray([as_logged(value) for value in values], dtype=float)
    finite_values = finite_values[np.isfinite(finite_values)]
    if len(finite_values) == 0:
        raise NoiseError(
            f"none of the {len(values)} trial values is a finite number: no expected best",
            fix="give the values of the sweep's trials that finished",
        )
    counts = list(range(1, len(finite_values) + 1)) if trials is None else [int(n) for n in trials]
    if any(n < 1 for n in counts):
        raise NoiseError(f"trials {counts}: a number of trials is at least 1", fix="ask for 1 or more trials")
    sign = 1.0 if mode == "max" else -1.0
    ordered = np.sort(sign * finite_values)
    rng = np.random.default_rng(SEED)
    resampled = np.sort(rng.choice(ordered, size=(BOOTSTRAPS, len(ordered)), replace=True), axis=1)
    found = []
    for n in counts:
        weights = _weights(len(ordered), n)
        curve = resampled @ weights
        low, high = np.quantile(curve, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        found.append((n, sign * float(ordered @ weights), *sorted((sign * float(low), sign * float(high)))))
    return found


def _weights(size: int, n: int) -> np.ndarray:
    """The chance that the i-th smallest of `size` values is the largest of n draws with replacement."""
    share = np.arange(size + 1) / size
    return np.diff(share**n)


@dataclass(frozen=True)
class Confirmation:
    """The selected candidate judged on fresh runs alone: the verdict word, its checks (`tracking.judge`'s), the
    primary metric's gap as the sweep selected it (biased by the selection) and as the fresh runs measure it, the
    confirmed gap's 95% interval (the single verdict's printed gap interval, from 3 runs on), and the runs."""

    verdict: str
    checks: tuple[Any, ...]
    metric: str
    selected_gap: float
    confirmed_gap: float
    confirmed_interval: tuple[float, float] | None
    runs: int
    name: str = ""

    @property
    def selection_bias(self) -> float:
        """How much the selected gap exceeds the confirmed one: the winner's curse as measured here."""
        return self.selected_gap - self.confirmed_gap

    def as_dict(self) -> dict[str, Any]:
        """The confirmation as strict JSON holds it."""
        return {
            "name": self.name,
            "verdict": self.verdict,
            "metric": self.metric,
            "runs": self.runs,
            "selected_gap": finite(self.selected_gap),
            "confirmed_gap": finite(self.confirmed_gap),
            "selection_bias": finite(self.selection_bias),
            "confirmed_interval": None
            if self.confirmed_interval is None
            else [finite(value) for value in self.confirmed_interval],
            "checks": [found.as_dict() for found in self.checks],
        }


def judge_confirmation(
    band: Mapping[str, Sequence[float]],
    selected: SweepRow,
    confirmation: Mapping[str, Sequence[float]],
    *,
    modes: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    min_effect: Mapping[str, float] | None = None,
) -> Confirmation:
    """The `selected` row's candidate judged on its fresh `confirmation` runs alone (`tracking.judge`, at alpha),
    with the gap the sweep selected it at beside the confirmed gap of its primary metric."""
    metric = selected.metric or selected.checks[0].metric
    if metric not in confirmation:
        raise NoiseError(
            f"the confirmation runs hold no {metric}, the metric the sweep ranked by "
            f"(they hold {', '.join(confirmation) or 'no metric'})",
            fix=f"give the confirmation runs' values of {metric}",
        )
    found: Verdict = judge(band, confirmation, modes=modes, alpha=alpha, min_effect=min_effect)
    main = next(check for check in found.checks if check.metric == metric)
    return Confirmation(
        verdict=found.verdict,
        checks=found.checks,
        metric=metric,
        selected_gap=selected.gap,
        confirmed_gap=main.delta,
        confirmed_interval=main.interval,
        runs=len(confirmation[metric]),
        name=selected.name,
    )
