"""What a band can see: the uncertainty of its std, the power of the verdict's test, and the repeats a shift needs.

A band of n runs estimates the true std sigma with (n-1)s²/sigma² ~ χ²(n-1), so its 1-α interval is
s·sqrt((n-1)/χ²(1-α/2, n-1)) to s·sqrt((n-1)/χ²(α/2, n-1)): at n = 5 and α = 0.05, 0.60 to 2.87 times s.

Power, for a true shift δ of the candidate's mean, in units of the true std:
- one candidate run (N = 1), the prediction test: T = (x - mean)/(s·sqrt(1 + 1/n)) is noncentral t with n-1
  degrees of freedom and noncentrality δ/sqrt(1 + 1/n), exactly, for normal noise;
- N > 1 candidate runs, the pooled two-sample t: noncentral t with n+N-2 degrees of freedom and noncentrality
  δ/sqrt(1/n + 1/N), exactly, for normal noise of equal spread (`bench/verdict_quality.py` checks both by
  simulation through the verdict itself).
Both are two-sided at the level of one test: for a family of k metrics, α/k, Holm's first step, so the figures
are a floor for the family (Holm's later steps test at more than α/k).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tracking.errors import NoiseError

POWER = 0.8
# The most repeats a plan proposes: beyond it the shift is too small for this band to see at any affordable cost.
MOST_REPEATS = 100


def std_interval(std: float, n: int, alpha: float) -> tuple[float, float]:
    """The 1-α confidence interval of the true std, from a sample std of n normal runs (chi-square)."""
    from scipy import stats

    return (
        std * math.sqrt((n - 1) / stats.chi2.ppf(1 - alpha / 2, n - 1)),
        std * math.sqrt((n - 1) / stats.chi2.ppf(alpha / 2, n - 1)),
    )


def power(shift: float, n: int, candidates: int, alpha: float) -> float:
    """The chance that the verdict's two-sided test at `alpha` flags a true shift of `shift` band stds, with n
    calibration runs and `candidates` candidate runs."""
    from scipy import stats

    if candidates == 1:
        df, noncentrality = n - 1, shift / math.sqrt(1 + 1 / n)
    else:
        df, noncentrality = n + candidates - 2, shift / math.sqrt(1 / n + 1 / candidates)
    critical = stats.t.ppf(1 - alpha / 2, df)
    # The far tail is below 1e-15 where scipy's nct returns NaN for it: count it as 0.
    far = float(stats.nct.cdf(-critical, df, noncentrality))
    return float(stats.nct.sf(critical, df, noncentrality)) + (far if math.isfinite(far) else 0.0)


@functools.lru_cache(maxsize=1024)
def detectable_shift(n: int, candidates: int, alpha: float, target: float = POWER) -> float:
    """The smallest true shift, in band stds, that the test at `alpha` detects with probability `target` (cached:
    a verdict asks it once per metric, a bench thousands of times with the same sizes)."""
    from scipy.optimize import brentq

    high = 1.0
    while power(high, n, candidates, alpha) < target:  # widen the bracket: scipy's nct is NaN far out
        high *= 2
    return float(brentq(lambda shift: power(shift, n, candidates, alpha) - target, 0.0, high, xtol=1e-6))


def deciding_runs(shift: float, std: float, n: int, candidates: int, alpha: float, target: float = POWER) -> str:
    """What would let a test at `alpha` (n calibration runs, `candidates` candidate runs, band std `std`) detect a
    true shift of `shift` with probability `target`: more candidate runs, or more calibration runs, in words."""
    if shift <= 0 or std <= 0:
        return "no number of runs sees a shift of 0: name the smallest shift that matters in compare.min_effect"
    size = shift / std
    more = _smallest(lambda m: power(size, n, m, alpha) >= target, candidates + 1)
    calibration = _smallest(lambda k: power(size, k, candidates, alpha) >= target, n + 1)
    options = [f"{more - candidates} more candidate runs ({more} in all)"] if more else []
    options += [f"{calibration - n} more calibration repeats ({calibration} in all)"] if calibration else []
    if not options:
        return (
            f"not even {MOST_REPEATS} runs of either detect a shift of {shift:.4g} ({size:.2f} band stds) "
            f"{target:.0%} of the time at this band's std: name a larger compare.min_effect if it does not matter"
        )
    return f"{' or '.join(options)} detect a shift of {shift:.4g} {target:.0%} of the time at this band's std"


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
    """Repeats that detect `shift` with `target` power: more candidate runs at this calibration's size, more
    calibration runs with one candidate run, or as many of each (None: not within MOST_REPEATS)."""

    metric: str
    shift: float
    std: float
    n: int
    candidates_at_n: int | None
    calibration_at_one: int | None
    balanced: int | None
    target: float
    alpha: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sentence(self) -> str:
        """The planning line, e.g. "to detect a 0.5-point drop in test_accuracy with 80% power: ..."."""
        size = f"{self.shift * 100:.2g}-point" if "accuracy" in self.metric else f"{self.shift:.4g}"
        # Each option is a pair of settings, both needed; the options are alternatives.
        options = []
        if self.candidates_at_n is not None:
            options.append((f"{self.n} (as now)", self.candidates_at_n))
        if self.calibration_at_one is not None and self.candidates_at_n != 1:
            options.append((str(self.calibration_at_one), 1))
        if self.balanced is not None and not options:
            options.append((str(self.balanced), self.balanced))
        found = (
            "set " + ", or ".join(f"calibration.repeats {n} and compare.candidate_repeats {m}" for n, m in options)
            if options
            else f"more than {MOST_REPEATS} repeats of either"
        )
        return (
            f"to detect a {size} shift in {self.metric} with {self.target:.0%} power "
            f"(band std {self.std:.4g}, {self.shift / self.std:.2f} stds; alpha {self.alpha:.3g}): {found}"
        )


def plan(metric: str, shift: float, std: float, n: int, alpha: float, target: float = POWER) -> Plan:
    """The repeats that detect a true shift of `shift` (in the metric's units) given a band std measured over n
    runs, at a per-test `alpha` (α/k for a family of k metrics)."""
    if not math.isfinite(shift) or shift <= 0 or not std > 0:
        raise NoiseError(
            f"planning for {metric} needs a finite shift > 0 and a band with spread; got shift {shift} and std {std}"
        )
    size = shift / std
    at_n = next((m for m in range(1, MOST_REPEATS + 1) if power(size, n, m, alpha) >= target), None)
    at_one = next((k for k in range(3, MOST_REPEATS + 1) if power(size, k, 1, alpha) >= target), None)
    balanced = next((k for k in range(3, MOST_REPEATS + 1) if power(size, k, k, alpha) >= target), None)
    return Plan(metric, shift, std, n, at_n, at_one, balanced, target, alpha)
