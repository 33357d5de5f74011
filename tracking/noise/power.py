"""What a band can see: the power of the verdict's test, and the repeats a shift needs.

The band's std gets no interval of its own (`NO_STD_INTERVAL`): the chi-square interval is exact for normal runs
but covered 64-90% under t(3) noise and 76-86% with 10% bad seeds (issue 34), and no interval from 3 to 20 runs
can do better there, since a std's sampling error depends on the noise's fourth moment, which t(3) does not have.
The std's error is instead counted where it matters, in the power below.

Power is stated for a true shift of X = d·s, d times the band's *measured* std s (the only std a user sees), so
that the std's own error is counted. The verdict's test is T = gap / (s_test·κ) on `df` degrees of freedom:
- one candidate run (N = 1), the prediction test: s_test the band's std over its k runs, df = k - 1,
  κ = sqrt(1 + 1/k) (sqrt(1 + 1/r) around a reference of r runs: 1 for `tracking diff` around one run);
- N > 1 candidate runs, the pooled two-sample t: s_test pooled over the band and the candidates, df = k + N - 2,
  κ = sqrt(1/k + 1/N).
The band's n measured runs are among the test's k >= n (a calibration given more repeats keeps its runs, and a
repeat trained again is bit-identical), so s²·(n-1) is part of s_test²·df: with B = (n-1)s²/(df·s_test²), which is
Beta((n-1)/2, (df-n+1)/2) and independent of s_test for normal noise, T = t_df - (d/κ)·sqrt(B·df/(n-1)) exactly
(t_df central). The power is the mean over B of P(|T| > c), by Gauss-Jacobi quadrature, with c the verdict's
critical t (`tracking.noise.tails`: t(1-α/2, df), widened where heavier-tailed noise needs it): the power of the
test the verdict runs, for normal noise; the power returned is the least of it and the power under each heavier
shape the test is calibrated for (`tracking.noise.tails.SHAPES`, from seeded draws of the same statistic, a rise
and a drop), so "detected 80% of the time" holds under t(3) noise and bad seeds too, where the normal's power
delivered 75.5-77.1% (issue 47). The normal's power is at once
the frequentist power over calibrations (the shift a report prints, d·s, followed by a true shift of it) and the
predictive power given this s (sigma's posterior under the prior 1/sigma). The noncentral t at the measured std, as
if it were sigma, overstates it where candidates' spread is pooled in (at 5 calibration and 3 candidate runs its
"2.88 band stds" delivered 73.5%, issue 34).
Both tests are two-sided at the level of one test: for a family of k metrics, α/k, Holm's first step, so the
figures are a floor for the family (Holm's later steps test at more than α/k).

A ceiling. Where two or more band runs tie at the band's highest (or lowest) value, as an accuracy does on a
fixed test set whose last few examples no seed gets right, the measured std understates the spread a shift
brings: a drop takes the runs off the ceiling, and they spread as the model's accuracy does, not as the tied
band. Followed, "detected 80% of the time" delivered 72-76% there (issue 47: 360 examples capped at 356, 47% of
runs on the cap). The shift is then stated for the std of a normal censored at the tied value
(`tracking.noise.ceiling.ceiling_std`), where it exceeds the measured std; a floor, since the runs a shift moves
halfway off the ceiling spread less.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tracking.errors import NoiseError
from tracking.noise import tails
from tracking.noise.knobs import knobs

POWER = 0.8
# The most repeats a plan proposes: beyond it the shift is too small for this band to see at any affordable cost.
MOST_REPEATS = 100
# Gauss-Jacobi nodes for the mean over B: the power's error is below 1e-6 from n = 2 on (tests/test_verdict.py).
NODES = 64
# How every line states a power: a floor, the least over the noise shapes the test is calibrated for, which it names
# (followed under normal noise a shift of that size is detected more often, 78-95%; under a ceiling 90-99%; no one
# figure is the realised rate under each: docs/noise-statistics.md).
DETECTED = f"at least {POWER:.0%} of the time, under normal noise, {' or '.join(tails.SHAPES)}"
# Why a band's std is printed without an interval (docs/noise-statistics.md#intervals-that-cover).
NO_STD_INTERVAL = "no interval: a std's interval from few runs covers 64-90% under heavy-tailed noise, short of 95%"


def ceiling_clause(found_std: float, ceiling: float | None) -> str:
    """Why a printed shift is stated for a ceiling's spread (`ceiling_std`), after the shift; "" where it is not."""
    if ceiling is None:
        return ""
    return (
        f" (band runs tie at its extreme, as at a ceiling: stated for the std a shift off it brings, {ceiling:.4g} "
        f"from a normal censored there, not the measured {found_std:.4g})"
    )


def power(
    size: float, n: int, candidates: int, alpha: float, calibration: int | None = None, reference: int | None = None
) -> float:
    """The chance that the verdict's two-sided test at `alpha` flags a true shift of `size` times the std measured
    over n calibration runs, when it is run with `calibration` runs (those n and more; default n) and
    `candidates` candidate runs, around a reference that averages `reference` runs (default: the calibration's
    mean; 1 for `tracking diff` around one run): the std's own error counted, the least over the normal and each
    shape the test is calibrated for."""
    normal, runs, critical = _normal_power(size, n, candidates, alpha, calibration, reference)
    return min([normal, *_shape_powers(size, n, runs, candidates, reference, critical)])


def _detects(size: float, n: int, candidates: int, alpha: float, target: float, calibration: int | None = None) -> bool:
    """Whether `power` reaches `target`; the shapes are simulated only where the normal's power does (they only
    lower it), which halves a plan's searches."""
    normal, runs, critical = _normal_power(size, n, candidates, alpha, calibration, None)
    return normal >= target and min(_shape_powers(size, n, runs, candidates, None, critical)) >= target


def _normal_power(
    size: float, n: int, candidates: int, alpha: float, calibration: int | None, reference: int | None
) -> tuple[float, int, float]:
    """`power` under normal noise (exact, by quadrature over B), with the test's band runs and critical t."""
    from scipy import stats

    runs = n if calibration is None else calibration
    if runs < n:
        raise ValueError(f"the test's calibration ({runs} runs) keeps the {n} measured runs")
    df = runs + candidates - 2
    kappa = math.sqrt(1 / (runs if reference is None else reference) + 1 / candidates)
    # A reference of the test's own band runs is the band's mean (the verdict passes its reference_runs).
    critical = tails.critical(alpha, runs, candidates, tails.other_runs(reference, runs))
    share, weights = _beta_nodes(n - 1, df - (n - 1))
    shift = size / kappa * (share * df / (n - 1)) ** 0.5
    flagged = stats.t.sf(critical - shift, df) + stats.t.cdf(-critical - shift, df)
    return float(min(1.0, (weights * flagged).sum())), runs, critical


def _shape_powers(
    size: float, n: int, runs: int, candidates: int, reference: int | None, critical: float
) -> list[float]:
    """The power under each heavier-tailed shape the test is calibrated for (`tracking.noise.tails.SHAPES`), the
    lesser of a rise and a drop (bad seeds fall one way), from the shape's seeded draws of the statistic; a design
    beyond `tails.SIMULATED_MOST` runs takes that many, which errs low."""
    most = tails.SIMULATED_MOST
    drawn = tails.shifted_statistics(
        min(n, most), min(runs, most), min(candidates, most), tails.other_runs(reference, runs)
    )
    return [
        min(float((abs(statistic + sign * size * ratio) > critical).mean()) for sign in (1, -1))
        for statistic, ratio in drawn
    ]


@functools.lru_cache(maxsize=256)
def _beta_nodes(measured: int, added: int) -> tuple[Any, Any]:
    """Nodes and weights (summing to 1) of the mean over B ~ Beta(measured/2, added/2); B = 1 when nothing is added."""
    import numpy as np
    from scipy.special import roots_jacobi

    if added == 0:
        return np.ones(1), np.ones(1)
    nodes, weights = roots_jacobi(NODES, added / 2 - 1, measured / 2 - 1)
    return (nodes + 1) / 2, weights / weights.sum()


@functools.lru_cache(maxsize=1024)
def detectable_shift(
    n: int, candidates: int, alpha: float, reference: int | None = None, target: float = POWER
) -> float:
    """The smallest true shift, in measured band stds (n runs), that the test at `alpha` with `candidates`
    candidate runs (around `reference` runs, default the band's mean) detects with probability `target`, the
    std's error counted (cached: a verdict asks it once per metric, a bench thousands of times with the same sizes)."""
    from scipy.optimize import brentq

    def flagged(shift: float) -> float:
        return power(shift, n, candidates, alpha, reference=reference)

    high = 1.0
    while flagged(high) < target:
        high *= 2
    return float(brentq(lambda shift: flagged(shift) - target, 0.0, high, xtol=1e-6))


def deciding_runs(
    shift: float, std: float, n: int, candidates: int, alpha: float, target: float = POWER, spread: str = "band"
) -> str:
    """What would let a test at `alpha` (n calibration runs, `candidates` candidate runs, band std `std`) detect a
    true shift of `shift` with probability `target`, the std's error counted: more candidate runs against this
    band, or more calibration repeats (these n among them), or where neither alone does, as many of each, in words.
    `spread` names whose std `std` is: the band's, or the `ceiling`'s (`ceiling_std`)."""
    if shift <= 0 or std <= 0:
        return f"no number of runs sees a shift of 0: name the smallest shift that matters in {knobs().shift}"
    size = shift / std
    more = _smallest(lambda m: _detects(size, n, m, alpha, target), candidates + 1)
    calibration = _smallest(lambda k: _detects(size, n, candidates, alpha, target, k), n + 1)
    options = [f"{more - candidates} more candidate runs ({more} in all)"] if more else []
    options += [f"{calibration - n} more calibration repeats ({calibration} in all)"] if calibration else []
    both = None if options else _smallest(lambda k: _detects(size, n, k, alpha, target, k), max(n, candidates) + 1)
    if both:
        options = [f"{both - n} more calibration repeats and {both - candidates} more candidate runs ({both} of each)"]
    if not options:
        return (
            f"not even {MOST_REPEATS} runs of either (nor {MOST_REPEATS} of each) detect a shift of {shift:.4g} ({size:.2f} {spread} stds) "
            f"at least {target:.0%} of the time at this {spread}'s std: name a larger {knobs().shift} if it does "
            "not matter"
        )
    return (
        f"{' or '.join(options)} detect a shift of {shift:.4g} at least {target:.0%} of the time at this {spread}'s std"
    )


def _smallest(enough: Callable[[int], bool], low: int) -> int | None:
    """The smallest count from `low` to MOST_REPEATS that is `enough` (power grows with either count, so a
    bisection finds it), or None."""
    if low > MOST_REPEATS or not enough(MOST_REPEATS):
        return None
    high = MOST_REPEATS
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


@dataclass(frozen=True)
class Plan:
    """Repeats that detect `shift` with `target` power, the measured std's error counted: more candidate runs
    against this calibration, or as many calibration runs (these n among them) as candidate runs (None: not within
    MOST_REPEATS). More calibration runs with one candidate run is not offered: followed, it delivered 39% at 2
    stds where its power model said 80% (issue 34), so one candidate run is offered only as this calibration's."""

    metric: str
    shift: float
    std: float
    n: int
    candidates_at_n: int | None
    balanced: int | None
    target: float
    alpha: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def options(self) -> list[tuple[int, int]]:
        """The options the planning line offers, each a pair of settings both needed: (calibration.repeats,
        compare.candidate_repeats); the pairs are alternatives."""
        options = []
        if self.candidates_at_n is not None:
            options.append((self.n, self.candidates_at_n))
        if self.balanced is not None and not options:
            options.append((self.balanced, self.balanced))
        return options

    def sentence(self) -> str:
        """The planning line, e.g. "to detect a 0.5-point drop in test_accuracy with 80% power: ..."."""
        size = f"{self.shift * 100:.2g}-point" if "accuracy" in self.metric else f"{self.shift:.4g}"
        found = (
            "set "
            + ", or ".join(
                f"calibration.repeats {n}{' (as now)' if n == self.n else ''} and compare.candidate_repeats {m}"
                for n, m in self.options()
            )
            if self.options()
            else f"more than {MOST_REPEATS} repeats of either"
        )
        return (
            f"to detect a {size} shift in {self.metric} with {self.target:.0%} power "
            f"(band std {self.std:.4g}, {self.shift / self.std:.2f} stds; alpha {self.alpha:.3g}): {found}"
        )


def plan(metric: str, shift: float, std: float, n: int, alpha: float, target: float = POWER) -> Plan:
    """The repeats that detect a true shift of `shift` (in the metric's units) given a band std measured over n
    runs, at a per-test `alpha` (α/k for a family of k metrics). A calibration given more repeats keeps its n runs,
    so each option's power is that of this band's std and the runs it adds."""
    if not math.isfinite(shift) or shift <= 0 or not std > 0:
        raise NoiseError(
            f"planning for {metric} needs a finite shift > 0 and a band with spread; got shift {shift} and std {std}"
        )
    size = shift / std
    at_n = _smallest(lambda m: _detects(size, n, m, alpha, target), 1)
    balanced = _smallest(lambda k: _detects(size, n, k, alpha, target, k), n)
    return Plan(metric, shift, std, n, at_n, balanced, target, alpha)
