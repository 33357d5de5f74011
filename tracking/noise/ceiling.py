"""A band at its ceiling: runs that tie at the band's highest (or lowest) value, as an accuracy does on a fixed test
set whose last few examples no seed gets right, modelled as a normal censored there (issue 47).

- `ceiling_std`: the spread a shift off the ceiling brings, which the tied runs hide; powers and detectable shifts
  are stated for it (tracking/noise/power.py).
- `ceiling_interval`: the gap's interval where the band has such a ceiling. A capped metric is skewed (a tail
  below, a wall above), so a few candidate runs' mean and spread move together: runs near the cap have a high mean
  and a small spread, and Welch's interval from them is too short on the high side (it covered 91.9% at 20 band
  runs and 3 candidate runs of a one-example drop). Here each gap g tried is judged with the spread the
  candidates would have at that gap, from the band's censored fit (a score interval, as Wilson's for a
  proportion): g is in the interval where |gap - g| <= t(1-α/2, n+N-2)·sqrt(s²/n + v(g)/N), s² the band's
  measured variance and v(g) the variance of the censored normal whose capped mean is the band's mean plus g.
  Candidates all on the cap then get an interval reaching down as far as such runs allow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracking.noise.statistics import DDOF, residue

# The fewest band runs off the ceiling from which the censored fit's spread is trusted for the gap's interval; with
# fewer, Welch's interval is printed. Measured (4,000-8,000 trials a cell, 5 band runs, 3 or 5 candidate runs): from
# 4, the 5-run bands kept Welch's, which covered 97.3% under issue 47's capped accuracy with no drop; from 3, 96.3-96.6%
# there and 94.1-96.1% for accuracies in steps of 1/360 and 1/180 with no cap, whose top runs tie too; from 2,
# 95.7-95.9% capped but 93.5% in steps of 1/180.
MIN_FREE_RUNS = 3
HALF_LOG_TAU = 0.5 * math.log(2 * math.pi)  # the log of the normal density's constant
# How closely the interval's ends are found, in units of the censored fit's spread.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Censored:
    """A normal of `spread` censored at `high` and/or `low`, the values band runs tie at, with `free` runs between
    them; `measured` is the runs' own std (ddof=1), which the tied runs hold down."""

    spread: float
    measured: float
    high: float | None
    low: float | None
    free: int


def censored_fit(values: Sequence[float]) -> Censored | None:
    """The normal censored at the band's highest and lowest values where two or more of its finite `values` tie
    there (by the tie rule, `tracking.noise.statistics.residue`), fit by maximum likelihood; None where no run ties
    at an extreme, or the runs lie at two values only, which no censored normal fits."""
    from scipy import optimize
    from scipy.special import log_ndtr

    array = np.asarray([value for value in values if value is not None and math.isfinite(value)], dtype=float)
    if len(array) < 3 or not array.std() > 0:
        return None
    magnitude = float(np.abs(array).max())
    top = np.array([residue(float(array.max() - value), magnitude) for value in array])
    bottom = np.array([residue(float(value - array.min()), magnitude) for value in array])
    top &= top.sum() >= 2
    bottom &= bottom.sum() >= 2
    if not (top.any() or bottom.any()) or (top | bottom).all():
        return None
    measured = float(array.std(ddof=DDOF))
    # In units of the measured spread around the mean, so that the simplex's first steps fit the data's scale.
    free = (array[~(top | bottom)] - array.mean()) / measured
    high, low = (array.max() - array.mean()) / measured, (array.min() - array.mean()) / measured

    above, below = int(top.sum()), int(bottom.sum())

    def unlikely(point: np.ndarray) -> float:
        """The negative log-likelihood (scipy.special's functions: scipy.stats' checks cost 10x over a fit)."""
        centre, spread = float(point[0]), math.exp(float(point[1]))
        found = -0.5 * float(np.sum(((free - centre) / spread) ** 2)) - len(free) * (point[1] + HALF_LOG_TAU)
        found += above * float(log_ndtr((centre - high) / spread)) + below * float(log_ndtr((low - centre) / spread))
        return -found

    fit = optimize.minimize(unlikely, [0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
    return Censored(
        spread=measured * math.exp(float(fit.x[1])),
        measured=measured,
        high=float(array.max()) if top.any() else None,
        low=float(array.min()) if bottom.any() else None,
        free=len(free),
    )


def ceiling_std(values: Sequence[float]) -> float | None:
    """The spread of the band's censored normal (`censored_fit`) where it exceeds the measured std (ddof=1); else
    None: no tie at an extreme, no run between the ties, or the tied runs hide no spread."""
    fit = censored_fit(values)
    if fit is None:
        return None
    return fit.spread if fit.spread > fit.measured and math.isfinite(fit.spread) else None


def ceiling_interval(baseline: Sequence[float], candidate: Sequence[float], alpha: float) -> tuple[float, float] | None:
    """The candidate-minus-baseline gap's 1-α score interval where the baseline ties at one extreme with at least
    `MIN_FREE_RUNS` runs off it and no candidate run lies beyond it (module docstring); else None."""
    from scipy import stats
    from scipy.optimize import brentq

    if not (np.isfinite(baseline).all() and np.isfinite(candidate).all()):
        return None  # a gap with an infinite or missing run has no interval (the callers say which runs)
    fit = censored_fit(baseline)
    if fit is None or fit.free < MIN_FREE_RUNS or (fit.high is None) == (fit.low is None):
        return None
    side = 1.0 if fit.high is not None else -1.0  # a floor is a ceiling of the negated metric
    bound = side * (fit.high if fit.high is not None else fit.low)
    a, b = side * np.asarray(baseline, dtype=float), side * np.asarray(candidate, dtype=float)
    if any(value > bound and not residue(value - bound, bound) for value in b):
        return None  # a candidate run beyond the band's tie: not a ceiling for the candidate
    n, m = len(a), len(b)
    mean, gap = float(a.mean()), float(b.mean() - a.mean())
    band_share = float(a.var(ddof=DDOF)) / n
    critical = float(stats.t.ppf(1 - alpha / 2, n + m - 2))
    spread, top = fit.spread, bound - mean

    def excess(g: float) -> float:
        """|gap - g| over its allowance at a true gap g: negative inside the interval."""
        shortfall = (top - g) / spread  # E[(bound - X)+] / spread for the candidates' capped mean mean + g
        share = 0.0 if shortfall <= 0 else spread**2 * _capped_variance(_capped_offset(shortfall)) / m
        return abs(gap - g) - critical * math.sqrt(band_share + share)

    step = spread  # the lower end: far enough below, the gap's distance outgrows any allowance
    while excess(gap - step) <= 0:
        step *= 2
    low = brentq(excess, gap - step, gap, xtol=TOLERANCE * spread)
    high = top if excess(top) <= 0 else brentq(excess, gap, top, xtol=TOLERANCE * spread)
    ends = sorted((side * float(low), side * float(high)))
    return ends[0], ends[1]


def _capped_offset(shortfall: float) -> float:
    """z = (bound - mu)/spread of the normal whose E[(bound - X)+]/spread is `shortfall` (> 0): z·Φ(z) + φ(z)
    rises from 0 to infinity."""
    from scipy.optimize import brentq

    return float(brentq(lambda z: _mean_shortfall(z) - shortfall, -40.0, shortfall + 1.0, xtol=TOLERANCE))


def _mean_shortfall(z: float) -> float:
    """E[(bound - X)+]/spread for X normal, z = (bound - mu)/spread."""
    from scipy.special import ndtr

    return z * float(ndtr(z)) + _density(z)


def _capped_variance(z: float) -> float:
    """Var[min(X, bound)]/spread² for X normal, z = (bound - mu)/spread."""
    from scipy.special import ndtr

    return max((z * z + 1) * float(ndtr(z)) + z * _density(z) - _mean_shortfall(z) ** 2, 0.0)


def _density(z: float) -> float:
    """The standard normal density at z."""
    return math.exp(-z * z / 2 - HALF_LOG_TAU)
