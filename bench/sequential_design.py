"""Candidate runs until decided (`compare.candidate_repeats: auto`, issue 34) against the fixed design of 3 candidate
runs, by Monte Carlo through the public functions: `tracking.judge` for the fixed design,
`tracking.noise.sequential.until_decided` for the sequential one (the rule the compare stage applies after each run).

Each trial draws a band of n runs (normal noise, test_accuracy 0.9 with std 0.00667, so that its default
min_effect, 0.02, is 3 true band stds and no named min_effect turns a gap into `within_tolerance`) and up to `cap`
candidate runs shifted down by 0, 1, 2 or 3 true band stds. Per design and shift: how often the verdict is
`exceeds_noise` (the false-alarm rate at shift 0, the power at the others), `within_noise` and `inconclusive`,
each with its 95% Wilson interval, and the mean number of candidate runs trained (the train stage's included).
Run from the project root: `nice -n 10 .venv/bin/python bench/sequential_design.py [--trials 2000]`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tracking
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN
from tracking.noise.sequential import until_decided

METRIC, MEAN, STD = "test_accuracy", 0.9, 0.02 / 3
ALPHA = 0.05
SHIFTS = (0, 1, 2, 3)
FIXED = 3


def wilson(hits: int, trials: int) -> str:
    """The rate with its 95% Wilson score interval."""
    z = 1.959964
    rate = hits / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return f"{rate:.3f} ({max(centre - half, 0):.3f}-{min(centre + half, 1):.3f})"


def cell(n: int, shift: float, cap: int | None, trials: int, seed: int) -> tuple[dict[str, int], float]:
    """Verdict counts and the mean candidate runs over `trials`: the fixed design (`cap` None) or the sequential
    one with `cap`."""
    rng = np.random.default_rng(seed)
    counts = {EXCEEDS: 0, WITHIN: 0, INCONCLUSIVE: 0}
    runs = 0
    for _ in range(trials):
        band = {METRIC: list(MEAN + STD * rng.standard_normal(n))}
        drawn = list(MEAN - shift * STD + STD * rng.standard_normal(cap or FIXED))
        if cap is None:
            verdict, used = tracking.judge(band, {METRIC: drawn}, modes={METRIC: "max"}, alpha=ALPHA).verdict, FIXED
        else:
            found = until_decided(band, {METRIC: drawn}, cap=cap, alpha=ALPHA, modes={METRIC: "max"})
            verdict, used = found.verdict.verdict, found.runs
        counts[verdict] = counts.get(verdict, 0) + 1
        runs += used
    return counts, runs / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--band-runs", type=int, nargs="+", default=[5, 3])
    parser.add_argument("--caps", type=int, nargs="+", default=[10, 5])
    args = parser.parse_args()
    print(f"{args.trials} trials a cell, alpha {ALPHA}, min_effect 0.02 = 3 band stds (test_accuracy's default)")
    print("| band runs | design | shift (band stds) | exceeds_noise | within_noise | inconclusive | mean trainings |")
    print("| ---: | --- | ---: | --- | --- | --- | ---: |")
    started = time.perf_counter()
    for n in args.band_runs:
        for design in (None, *args.caps):
            name = f"fixed {FIXED}" if design is None else f"auto, cap {design}"
            for index, shift in enumerate(SHIFTS):
                counts, mean = cell(n, shift, design, args.trials, seed=1000 * n + index)
                rates = " | ".join(wilson(counts[word], args.trials) for word in (EXCEEDS, WITHIN, INCONCLUSIVE))
                print(f"| {n} | {name} | {shift} | {rates} | {mean:.2f} |", flush=True)
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
