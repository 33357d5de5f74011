"""How often `within_tolerance` ("real, too small to act on") is the verdict where the true shift is exactly the
named `compare.min_effect`, measured through the public `tracking.judge` (issue 47). The rule calls a gap beyond
noise tolerable only where its 1-alpha interval excludes 0 and lies inside ± min_effect, so that rate must stay at
most alpha/2; beside it, the rate the earlier rule (the gap's point estimate below min_effect) gave on the same
draws, and how the verdicts split.

Each trial draws n band runs and N candidate runs shifted by min_effect (up or down at random) under one noise model
(normal; t with 3 degrees of freedom and 10% bad seeds 5 stds worse, both scaled to unit variance), and judges one
metric with `min_effect` at 2 and 3 true stds. Each rate comes with its 95% Wilson interval; "holds" where that
interval reaches alpha/2 or below (with 3 or more candidate runs under normal noise the rule's rate at the boundary is
alpha/2 itself, since the verdict's critical t is then the t distribution's).

Run from the project root: `nice -n 10 .venv/bin/python bench/tolerance_quality.py [--trials 1000] [--noise NAME]`
(`--noise`, `--band-runs`, `--candidate-runs` repeat and pick cells; each noise model draws from its own seeded
generator).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tracking
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN, WITHIN_TOLERANCE

ALPHA = 0.05
BAND_RUNS, CANDIDATE_RUNS, MIN_EFFECTS = (3, 5, 10, 20), (1, 3, 5), (2.0, 3.0)
BAD_SEEDS, BAD_SHIFT = 0.1, 5.0
MIXTURE_STD = float(np.sqrt(1 + BAD_SHIFT**2 * BAD_SEEDS * (1 - BAD_SEEDS)))


def _t3(rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.standard_t(3, size) / np.sqrt(3)


def _bad_seeds(rng: np.random.Generator, size: int) -> np.ndarray:
    return (rng.standard_normal(size) - BAD_SHIFT * (rng.random(size) < BAD_SEEDS)) / MIXTURE_STD


NOISE: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "normal": lambda rng, size: rng.standard_normal(size),
    "t(3)": _t3,
    f"{BAD_SEEDS:.0%} bad seeds at {BAD_SHIFT:g} stds": _bad_seeds,
}


def wilson(hits: int, trials: int) -> str:
    """hits/trials with its 95% Wilson interval, as text."""
    found = stats.binomtest(hits, trials).proportion_ci(0.95, method="wilson")
    return f"{hits / trials:.3f} ({found.low:.3f} to {found.high:.3f})"


def cell(rng: np.random.Generator, noise: str, n: int, runs: int, effect: float, trials: int) -> str:
    """One cell's line: within_tolerance at a true shift of `effect` (= min_effect), the earlier rule's rate, and the
    verdicts' split."""
    draw = NOISE[noise]
    counts = dict.fromkeys((EXCEEDS, WITHIN_TOLERANCE, WITHIN, INCONCLUSIVE), 0)
    earlier = 0
    for _ in range(trials):
        shift = effect * rng.choice((-1.0, 1.0))
        found = tracking.judge(
            {"m": list(draw(rng, n))}, {"m": list(draw(rng, runs) + shift)}, alpha=ALPHA, min_effect={"m": effect}
        ).checks[0]
        counts[found.verdict] += 1
        earlier += found.verdict in (EXCEEDS, WITHIN_TOLERANCE) and abs(found.delta) < effect
    tolerated = counts[WITHIN_TOLERANCE]
    low = stats.binomtest(tolerated, trials).proportion_ci(0.95, method="wilson").low
    holds = "holds" if low <= ALPHA / 2 else f"ABOVE alpha/2 = {ALPHA / 2}"
    split = ", ".join(f"{verdict} {count / trials:.3f}" for verdict, count in counts.items())
    return (
        f"{noise:>26} n={n:>2} N={runs} min_effect {effect:g} stds: within_tolerance {wilson(tolerated, trials)} "
        f"{holds}; point-estimate rule {wilson(earlier, trials)}; {split}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--noise", choices=list(NOISE), action="append", help="the noise models (all by default)")
    parser.add_argument("--band-runs", type=int, action="append", help=f"n (default {BAND_RUNS})")
    parser.add_argument("--candidate-runs", type=int, action="append", help=f"N (default {CANDIDATE_RUNS})")
    args = parser.parse_args()
    print(f"within_tolerance at a true shift of min_effect, alpha {ALPHA}, {args.trials} trials a cell:")
    for noise in args.noise or NOISE:
        rng = np.random.default_rng([args.seed, list(NOISE).index(noise)])
        for n in args.band_runs or BAND_RUNS:
            for runs in args.candidate_runs or CANDIDATE_RUNS:
                for effect in MIN_EFFECTS:
                    print(cell(rng, noise, n, runs, effect, args.trials), flush=True)


if __name__ == "__main__":
    main()
