"""Candidate runs until decided (`compare.candidate_repeats: auto`): a group sequential design over the candidate's
runs, one look after each, that stops as soon as the verdict is `exceeds_noise`, `within_noise` or
`within_tolerance` (Chromium Pinpoint's "different / same / unknown, collect more samples").

Each look k (k candidate runs, at most `cap`) is the fixed design's verdict (`tracking.judge`) at a nominal level
α_k, chosen so that the chance of a false alarm over all the looks is alpha: Lan and DeMets' (1983) alpha spending
with the Pocock-type function α·ln(1 + (e - 1)·t) (Kim and DeMets 1987), t the look's share of the information
at the cap, I_k = 1 / (1/n + 1/k) for n band runs. The looks' statistics share the band (its mean and spread), so
they are strongly correlated; the boundaries are those of the pooled t's sequence itself under no shift, found
by a seeded simulation (`nominal_levels`), not Bonferroni's sum. Stopping for `within_noise` never adds a false
alarm (the rule only stops earlier, a non-binding futility bound); its equivalence interval is at twice the look's
level (`equivalence_level`). A look that no further run can decide (a
candidate run that is not a number, a band without spread) stops at once; at the cap the verdict stays
`inconclusive`, with what would decide it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracking.noise.judging import Verdict, judge
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN, WITHIN_TOLERANCE
from tracking.noise.statistics import Band

DESIGN = "group sequential, Lan-DeMets alpha spending, Pocock-type function (Kim and DeMets 1987)"
DECIDED, CAP_REACHED, UNDECIDABLE = "decided", "cap reached", "undecidable"
# Simulated draws of the looks' statistics under no shift per (band runs, cap): the boundary's tail share, at
# least a few hundredths of alpha's 100,000 draws, holds thousands of draws per shape.
DRAWS = 100_000
DRAWS_SEED = 0


@dataclass(frozen=True)
class Look:
    """One look of the design: the verdict on the first `runs` candidate runs at the look's nominal `level`, and
    why it stops (DECIDED, CAP_REACHED or UNDECIDABLE), or None to train another run."""

    runs: int
    cap: int
    level: float
    verdict: Verdict
    stop: str | None

    def line(self) -> str:
        """The progress line: "candidate run 3 of at most 10: inconclusive, training another"."""
        then = "training another" if self.stop is None else f"stopping ({self.stop})"
        return f"candidate run {self.runs} of at most {self.cap}: {self.verdict.verdict}, {then}"

    def as_dict(self) -> dict[str, Any]:
        """How the design ended, as compare.json holds it."""
        return {
            "design": DESIGN,
            "runs": self.runs,
            "cap": self.cap,
            "stopped": self.stop,
            "nominal_alpha": self.level,
            "verdict": self.verdict.verdict,
        }


def spent(alpha: float, share: float) -> float:
    """The Pocock-type spending function: the false-alarm chance spent once `share` of the information is in."""
    return alpha * math.log(1 + (math.e - 1) * share)


@functools.lru_cache(maxsize=64)
def nominal_levels(band_runs: int, cap: int, alpha: float) -> tuple[float, ...]:
    """The nominal level of the verdict's p (calibrated for heavy tails, `tracking.noise.tails`) at each look 1 to
    `cap` against `band_runs` band runs, such that the chance of crossing by look k under no shift is at most the
    spending function's at k under normal noise and under each shape the p is calibrated for (the least level
    over them, so the design spends its alpha under the shape that binds). The first look's is exact; the later
    ones come from `DRAWS` seeded simulations of the looks' statistics per shape."""
    from scipy import stats

    from tracking.noise import tails

    information = [1 / (1 / band_runs + 1 / k) for k in range(1, cap + 1)]
    budget = [spent(alpha, found / information[-1]) for found in information]
    levels = [budget[0]]
    if cap == 1:
        return tuple(levels)
    rng = np.random.default_rng(DRAWS_SEED)
    p_values = []
    for draw in (_normal, *tails.SHAPES.values()):
        t = np.abs(_looks(draw(rng, (DRAWS, band_runs)), draw(rng, (DRAWS, cap))))
        # A p above alpha crosses no level: only a t beyond the t distribution's critical one at alpha needs its p.
        found = np.ones_like(t)
        for k in range(1, cap + 1):
            beyond = t[:, k - 1] > stats.t.isf(alpha / 2, band_runs + k - 2)
            found[beyond, k - 1] = tails.p_values(t[beyond, k - 1], band_runs, k)
        p_values.append(found)
    crossed = [found[:, 0] <= levels[0] for found in p_values]
    for look in range(1, cap):
        bounds = []
        for found, hit in zip(p_values, crossed, strict=True):
            alive = np.sort(found[~hit, look])
            spend = min(max(int((budget[look] - hit.mean()) * DRAWS), 0), len(alive) - 1)  # may cross first here
            bounds.append(float(np.nextafter(alive[spend], 0)))  # below the next p: at most `spend` cross
        levels.append(max(min(bounds), np.finfo(float).tiny))
        crossed = [hit | (found[:, look] <= levels[-1]) for found, hit in zip(p_values, crossed, strict=True)]
    return tuple(levels)


def equivalence_level(level: float, alpha: float) -> float:
    """The level of a look's equivalence stop: Schuirmann's two one-sided tests each at the look's own `level`
    (the gap's 1 - 2·level interval inside ±min_effect), as the textbook pairs a test at level with the 1 - 2·level
    interval; never beyond the fixed design's `alpha`. Over the looks a true shift of min_effect stops there about
    alpha of the time (the looks' levels spend alpha two-sided, so one side's at twice them spends about as much),
    well inside the 20% that "detected 80% of the time" allows; the look's own 1 - level interval (alpha/2 over the
    looks) made `auto` train as many runs as the fixed design it matches at 10 band runs (issue 47)."""
    return min(2 * level, alpha)


def _normal(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(size)


def _looks(band: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """The verdict's statistic at each look (column k-1: the first k candidate runs against the band), per draw:
    the prediction t at one run, the pooled two-sample t after."""
    band_runs, cap = band.shape[1], runs.shape[1]
    counts = np.arange(1, cap + 1)
    means = runs.cumsum(axis=1) / counts
    squares = (runs**2).cumsum(axis=1) - counts * means**2
    centre = band.mean(axis=1, keepdims=True)
    pooled = (((band - centre) ** 2).sum(axis=1, keepdims=True) + squares) / (band_runs + counts - 2)
    return (means - centre) / np.sqrt(pooled * (1 / band_runs + 1 / counts))


def look(
    band: Mapping[str, Sequence[float] | Band],
    candidates: Mapping[str, Sequence[float]],
    *,
    cap: int,
    alpha: float = 0.05,
    modes: Mapping[str, str] | None = None,
    min_effect: Mapping[str, float] | None = None,
    source: str = "band",
) -> Look:
    """The look after the candidate runs so far (`candidates`, each metric's values, one per run; arguments as
    `tracking.judge` takes them): their verdict at the look's nominal level, and whether to stop. The level is
    that of the band with the fewest runs that are numbers (a declared `Band`'s n for a declared one)."""
    runs = len(next(iter(candidates.values())))
    if not 1 <= runs <= cap:
        raise ValueError(f"a look needs 1 to cap={cap} candidate runs, got {runs}")
    sizes = [found.n if isinstance(found, Band) else sum(map(_finite, found)) for found in band.values()]
    level = nominal_levels(max(min(sizes), 2), cap, alpha)[runs - 1]
    verdict = judge(
        band,
        candidates,
        modes=modes,
        alpha=level,
        min_effect=min_effect,
        source=source,
        equivalence_alpha=equivalence_level(level, alpha),
    )
    return Look(runs, cap, level, verdict, _stop(verdict, runs, cap))


def until_decided(
    band: Mapping[str, Sequence[float] | Band], candidates: Mapping[str, Sequence[float]], **options: Any
) -> Look:
    """The look at which the design stops over candidate runs already made (each metric's values in run order;
    runs past the stop are not looked at; `options` as `look` takes them, `cap` among them): for runs logged
    anywhere, and for measuring the design."""
    total = min(len(next(iter(candidates.values()))), options["cap"])
    for runs in range(1, total + 1):
        found = look(band, {metric: values[:runs] for metric, values in candidates.items()}, **options)
        if found.stop is not None or runs == total:
            return found
    raise ValueError("until_decided needs at least one candidate run")


def _stop(verdict: Verdict, runs: int, cap: int) -> str | None:
    """Why the design stops at this look, or None to train another run."""
    if verdict.verdict in (EXCEEDS, WITHIN, WITHIN_TOLERANCE):
        return DECIDED
    if any(found.verdict == INCONCLUSIVE and found.p_value is None for found in verdict.checks):
        return UNDECIDABLE  # a run that is not a number, or a band without spread: more runs cannot decide it
    return CAP_REACHED if runs == cap else None


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
