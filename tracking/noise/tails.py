"""The verdict's t statistic calibrated for the noise real runs have: heavier tails than the normal, and bad seeds.

The verdict's statistic is the t of the candidate runs' mean against the band's (the prediction test for one
candidate run, the pooled two-sample t for several). Its t distribution is exact for normal noise only; with one
candidate run its false alarms rose to 6.9% at α 5% under t(3) noise and with 10% bad seeds (issue 34), since
the single run's own tail is the test's tail. Here each p-value is the largest of the t distribution's and the
simulated null distributions of the same statistic under `SHAPES` (t with 3 degrees of freedom; 10% of runs
5 stds worse: at 4 stds, the shape first chosen, one candidate run still raised 5.5-6.0% false alarms with issue
47's bad seeds at 5), and each critical value the largest of their quantiles: the test holds its level under each of
those shapes and under the normal, at the price of power where they disagree (one candidate run: the critical
t at n = 5 and α/2 rises from 3.50 to 5.67). The statistic is free of location and scale, so a shape and the
design (band runs, candidate runs, what the reference averages) fix its distribution: `DRAWS` draws, seeded,
cached per design (a verdict, a plan or a bench asks for a few designs thousands of times). The power the
reports print is the least over the same shapes (`shifted_statistics`, `tracking.noise.power`).

A rank or permutation test was not chosen: it holds whatever the noise, but with one candidate run its smallest
p is 1/(n+1), so below 39 band runs it could never reach Holm's α/2 for two metrics, and a run 40 stds off the
band would be `inconclusive`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

# Simulated statistics per shape and design: the quantile at α/2 = 0.0125 has about 250 draws beyond it.
DRAWS = 20_000
SEED = 34
CHUNK = 2_000_000
# The most band or candidate runs simulated: a larger design takes this one's distribution, whose tails are at
# least as heavy (they shrink as runs are added), so its p and critical t err on the side of fewer false alarms;
# it keeps a plan's search up to 100 runs of each to a fraction of a second.
SIMULATED_MOST = 40
BAD_SEEDS, BAD_SHIFT = 0.1, 5.0


def _t3(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    return rng.standard_t(3, size)


def _bad_seeds(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(size) - BAD_SHIFT * (rng.random(size) < BAD_SEEDS)


# The noise shapes the test holds its level under, besides the normal (whose t distribution is exact).
SHAPES: dict[str, Callable[[np.random.Generator, tuple[int, int]], np.ndarray]] = {
    "t with 3 degrees of freedom": _t3,
    f"{BAD_SEEDS:.0%} of runs {BAD_SHIFT:g} stds worse": _bad_seeds,
}


@functools.lru_cache(maxsize=512)
def null_statistics(runs: int, candidates: int, reference: int | None = None) -> tuple[np.ndarray, ...]:
    """|t| under each of `SHAPES`, sorted: `runs` band runs, `candidates` candidate runs, their mean against the
    band's mean (`reference` None) or the mean of `reference` other runs; the spread pooled over the band and the
    candidates, as the verdict's test pools it."""
    rng = np.random.default_rng(SEED)
    chunk = max(1, CHUNK // (runs + candidates + (reference or 0)))  # draws at a time: memory stays bounded
    found = []
    for draw in SHAPES.values():
        parts = []
        for start in range(0, DRAWS, chunk):
            size = min(chunk, DRAWS - start)
            band, chosen = draw(rng, (size, runs)), draw(rng, (size, candidates))
            spread = band.var(axis=1, ddof=1) * (runs - 1)
            if candidates > 1:
                spread += chosen.var(axis=1, ddof=1) * (candidates - 1)
            centre = band.mean(axis=1) if reference is None else draw(rng, (size, reference)).mean(axis=1)
            scale = np.sqrt(spread / (runs + candidates - 2) * (1 / (reference or runs) + 1 / candidates))
            parts.append(np.abs(chosen.mean(axis=1) - centre) / scale)
        found.append(np.sort(np.concatenate(parts)))
    return tuple(found)


@functools.lru_cache(maxsize=128)
def shifted_statistics(
    measured: int, runs: int, candidates: int, reference: int | None = None
) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Per shape of `SHAPES`, seeded draws of the verdict's statistic under no shift (signed, as `null_statistics`
    draws it) and the ratio of the std of the first `measured` band runs to the statistic's scale: a true shift of
    d measured stds moves each draw's statistic by d times its ratio, so a power is a mean over these draws (the
    power of `tracking.noise.power` under each shape). float32: a plan's search caches a few dozen designs."""
    rng = np.random.default_rng(SEED + 1)
    found = []
    for draw in SHAPES.values():
        band, chosen = draw(rng, (DRAWS, runs)), draw(rng, (DRAWS, candidates))
        spread = band.var(axis=1, ddof=1) * (runs - 1)
        if candidates > 1:
            spread += chosen.var(axis=1, ddof=1) * (candidates - 1)
        centre = band.mean(axis=1) if reference is None else draw(rng, (DRAWS, reference)).mean(axis=1)
        scale = np.sqrt(spread / (runs + candidates - 2) * (1 / (reference or runs) + 1 / candidates))
        statistic = (chosen.mean(axis=1) - centre) / scale
        found.append(
            (statistic.astype(np.float32), (band[:, :measured].std(axis=1, ddof=1) / scale).astype(np.float32))
        )
    return tuple(found)


def _simulated(runs: int, candidates: int) -> tuple[int, int]:
    """The design whose simulated statistics stand for this one's (at most `SIMULATED_MOST` runs of each)."""
    return min(runs, SIMULATED_MOST), min(candidates, SIMULATED_MOST)


def other_runs(reference: int | None, runs: int) -> int | None:
    """The `reference` that `p_value` and `critical` take for a test whose reference averages `reference` runs: None
    where that is the band's own mean (unset, or its `runs` runs), else the count of other runs it averages."""
    return None if reference in (None, runs) else reference


def p_value(t: float, runs: int, candidates: int, reference: int | None = None) -> float:
    """The two-sided p of the verdict's statistic `t`: the largest of its t distribution's (runs + candidates - 2
    degrees of freedom) and the share of simulated statistics at least as large under each of `SHAPES`."""
    return float(p_values(np.asarray([t], dtype=float), runs, candidates, reference)[0])


def p_values(t: np.ndarray, runs: int, candidates: int, reference: int | None = None) -> np.ndarray:
    """`p_value` of each statistic in `t` (a sequential design's looks are fitted on many at once)."""
    from scipy import stats

    size = np.abs(t)
    shares = [
        (DRAWS - np.searchsorted(found, size, side="left")) / DRAWS
        for found in null_statistics(*_simulated(runs, candidates), reference)
    ]
    return np.maximum.reduce([2 * stats.t.sf(size, runs + candidates - 2), *shares])


def critical(alpha: float, runs: int, candidates: int, reference: int | None = None) -> float:
    """The |t| beyond which `p_value` is at most `alpha`: the largest of the t distribution's quantile and each
    shape's simulated one."""
    from scipy import stats

    df = runs + candidates - 2
    # Each shape's share of statistics at least |t| is at most alpha exactly beyond its order statistic `index`.
    index = max(0, min(DRAWS, int(np.ceil(DRAWS * (1 - alpha)))) - 1)
    shapes = [found[index] for found in null_statistics(*_simulated(runs, candidates), reference)]
    return float(max([stats.t.ppf(1 - alpha / 2, df), *shapes]))
