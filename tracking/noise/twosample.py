"""Two groups of runs, the baseline's (n) and the candidate's (N > 1): did the candidate's distribution move?

- The two-sample t with the groups' pooled variance decides. The null hypothesis is that the change has no
  effect: the candidate's runs are then draws of the same training randomness as the baseline's, same spread
  included, and under it the pooled t is exact (for normal noise) and uses every run's spread (n+N-2 degrees
  of freedom). At N = 1 it is the one-run prediction test. Welch's t, which estimates the candidate's variance
  from its N runs alone, is shown beside it: with N = 2 or 3 its degrees of freedom fall to about 1 or 2 and it
  detects less than one candidate run does (docs/noise-statistics.md).
- An exact permutation test of the mean difference where the groups are small (every split of the n + N runs
  into groups of those sizes, at most `EXACT_LIMIT`), shown beside it: under the same null hypothesis the runs
  are exchangeable, so its p is exact whatever the distribution, ties and discrete accuracies included.
- The effect: the mean difference with its interval (Welch's standard error, `gap_interval`) from
  `MIN_GAP_RUNS` candidate runs on, and the
  probability that one candidate run beats one baseline run (Bouthillier et al. 2021; Agarwal et al. 2021), ties
  counted half, without an interval (`probability_of_beating` says why).

The t statistics are computed here from the groups' means and ddof=1 variances, not by scipy, so groups without
spread give None rather than a precision warning and NaN.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tracking.noise.statistics import TIE, tied

EXACT_LIMIT = 100_000
# The fewest candidate runs whose gap gets an interval. The gap's interval must hold when the change moved the
# spread too, so it is Welch's, from the candidates' own spread; with 1 run there is none, and with 2 Welch's
# interval covered 88-91% against 20 calibration runs (the pooled t's 74-78% where the change doubled the spread).
MIN_GAP_RUNS = 3


@dataclass(frozen=True)
class TTest:
    """A two-sample t of candidate minus baseline: the difference, its estimated std (`scale`), the statistic, its
    degrees of freedom, the two-sided p and the difference's 1-α interval; None where neither group has spread."""

    difference: float
    scale: float
    t: float | None
    df: float | None
    p_value: float | None
    low: float | None
    high: float | None


def pooled_t(baseline: Sequence[float], candidate: Sequence[float], alpha: float) -> TTest:
    """Student's two-sample t with the pooled ddof=1 variance (n+N-2 degrees of freedom)."""
    a, b = _arrays(baseline, candidate)
    df = len(a) + len(b) - 2
    pooled = ((len(a) - 1) * _variance(a) + (len(b) - 1) * _variance(b)) / df
    return _t_test(_mean(b) - _mean(a), math.sqrt(pooled * (1 / len(a) + 1 / len(b))), df, alpha)


def welch(baseline: Sequence[float], candidate: Sequence[float], alpha: float) -> TTest:
    """Welch's two-sample t (each group's own variance, Welch-Satterthwaite degrees of freedom)."""
    a, b = _arrays(baseline, candidate)
    va, vb = _variance(a) / len(a), _variance(b) / len(b)
    terms = [v**2 / (len(x) - 1) for v, x in ((va, a), (vb, b)) if v > 0]
    df = (va + vb) ** 2 / sum(terms) if terms else 0.0
    return _t_test(_mean(b) - _mean(a), math.sqrt(va + vb), df, alpha)


def gap_interval(baseline: Sequence[float], candidate: Sequence[float], alpha: float) -> TTest:
    """The gap's printed 1-α interval: Welch's standard error, on degrees of freedom between two guesses, the
    geometric mean of Welch-Satterthwaite's (from each group's own spread: optimistic where a few runs happen to
    carry little of it) and those of groups of these sizes with equal spreads (optimistic where the change truly
    moved the spread). Each alone missed 93-97% in some of issue 34's cells (Welch's 92.0-97.5%, the equal
    spreads' 92.7-98.4%); together they cover 92.9-96.8% (docs/noise-statistics.md#intervals-that-cover).

    A group whose runs tie has not measured its spread (three runs of an accuracy at its ceiling, issue 47: the
    interval from the other group's spread alone covered 87% at 20 and 3 runs): it takes the pooled variance of
    both groups, on their pooled degrees of freedom. A baseline at its ceiling (runs tied at an extreme, enough of
    them off it) gives the ceiling's score interval instead (`tracking.noise.ceiling.ceiling_interval`)."""
    from tracking.noise.ceiling import ceiling_interval

    a, b = _arrays(baseline, candidate)
    n, m = len(a), len(b)
    own = [(_variance(a), n), (_variance(b), m)]
    pooled = sum(variance * (size - 1) for variance, size in own) / (n + m - 2)
    parts = [(pooled, size, n + m - 2) if variance == 0 else (variance, size, size - 1) for variance, size in own]
    shares = [variance / size for variance, size, _ in parts]
    if sum(shares) == 0:
        return _t_test(_mean(b) - _mean(a), 0.0, 0.0, alpha)
    separate = sum(shares) ** 2 / sum(share**2 / df for share, (_, _, df) in zip(shares, parts, strict=True))
    equal = (1 / n + 1 / m) ** 2 / ((1 / n) ** 2 / (n - 1) + (1 / m) ** 2 / (m - 1))
    found = _t_test(_mean(b) - _mean(a), math.sqrt(sum(shares)), math.sqrt(separate * equal), alpha)
    ceiling = ceiling_interval(a, b, alpha) if found.low is not None else None
    return found if ceiling is None else replace(found, low=ceiling[0], high=ceiling[1])


def _t_test(difference: float, scale: float, df: float, alpha: float) -> TTest:
    from scipy import stats

    if scale == 0:
        return TTest(difference, 0.0, None, None, None, None, None)
    t = difference / scale
    half = float(stats.t.ppf(1 - alpha / 2, df)) * scale
    return TTest(difference, scale, t, df, float(2 * stats.t.sf(abs(t), df)), difference - half, difference + half)


def _arrays(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)


def _mean(values: np.ndarray) -> float:
    """The mean; for tied values (`tied`) their median, exactly the value for equal ones (a float sum divided by n
    can miss it by one ulp)."""
    return float(np.median(values)) if tied(values) else float(values.mean())


def _variance(values: np.ndarray) -> float:
    """The ddof=1 variance, exactly 0 for tied values (`tied`: numpy's leaves ~1e-32 for equal values, float32
    residue ~1e-17) and for one value."""
    return 0.0 if len(values) < 2 or tied(values) else float(values.var(ddof=1))


def permutation_p(baseline: Sequence[float], candidate: Sequence[float]) -> float | None:
    """The exact two-sided permutation p of the mean difference: the share of every split of the pooled runs into
    groups of these sizes whose |difference| is at least the observed one (None: more splits than EXACT_LIMIT)."""
    a, b = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    pooled = np.concatenate([a, b])
    total, size = len(pooled), len(b)
    if math.comb(total, size) > EXACT_LIMIT:
        return None
    splits = np.array(list(itertools.combinations(range(total), size)))
    chosen = pooled[splits].sum(axis=1)
    differences = chosen / size - (pooled.sum() - chosen) / (total - size)
    observed = b.mean() - a.mean()
    # Splits whose differences are one value by the tie rule count as at least as extreme.
    return float(np.mean(np.abs(differences) >= abs(observed) - TIE * float(np.abs(pooled).max())))


def probability_of_beating(baseline: Sequence[float], candidate: Sequence[float], mode: str | None) -> float:
    """P(candidate run better than baseline run) for a metric to `mode` (max, min; None reads as max), ties half.
    It has no interval: a stratified percentile bootstrap's covered it 42-65% of the time with one candidate run
    and 81-93% with 3 to 5 (issue 34), and with so few runs no resampling scheme reaches 95%."""
    sign = -1.0 if mode == "min" else 1.0
    a, b = sign * np.asarray(baseline, dtype=float), sign * np.asarray(candidate, dtype=float)
    return float(_beats(a[None], b[None])[0])


def _beats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, the share of (baseline, candidate) pairs the candidate wins, ties counted half."""
    wins = (b[:, :, None] > a[:, None, :]).mean(axis=(1, 2))
    ties = (b[:, :, None] == a[:, None, :]).mean(axis=(1, 2))
    return wins + ties / 2
