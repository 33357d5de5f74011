"""Candidate runs until decided (`compare.candidate_repeats: auto`, issue 34) against fixed designs of 1 to 12
candidate runs, by Monte Carlo through the public functions: `tracking.judge` for each fixed design,
`tracking.noise.sequential.until_decided` for the sequential one (the rule the compare stage applies after each run).

Each trial draws a band of n runs and 12 candidate runs shifted down by 0, 1, 2 or 3 true band stds (test_accuracy
0.9, one metric, `compare.min_effect` named at 0.02 and the std set so that it is the setting's number of true
stds: 0.00667 for 3), under normal noise or t(3) noise scaled to unit std; every design judges the same draws. The
min_effect is named, not left to the default (the larger of 4 band stds and 0.02: here about 4 estimated band
stds, moving with each band's draw), so that the shift that matters is the setting's; a gap beyond noise whose interval lies inside
±0.02 is then `within_tolerance`, counted as its own outcome. Per design and shift: how often the verdict is
`exceeds_noise` (the false-alarm rate at shift 0, the power at the others), `within_tolerance`, `within_noise` and
`inconclusive`, each with its 95% Wilson interval, and the mean number of candidate runs trained (the train
stage's included). Then the fixed design that matches the sequential one (the fewest runs that
leave no shift undecided at most as often and detect the shift that matters at least as often) and the trainings
the sequential design saves against it at each shift.
Run from the project root: `nice -n 10 .venv/bin/python bench/sequential_design.py [--trials 2000]`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tracking
from tracking.noise.metric_family import ACCURACY_MIN_EFFECT
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN, WITHIN_TOLERANCE
from tracking.noise.sequential import until_decided

METRIC, MEAN = "test_accuracy", 0.9
ALPHA = 0.05
SHIFTS = (0, 1, 2, 3)
MOST_FIXED = 12
WORDS = (EXCEEDS, WITHIN_TOLERANCE, WITHIN, INCONCLUSIVE)


def wilson(hits: int, trials: int) -> str:
    """The rate with its 95% Wilson score interval."""
    z = 1.959964
    rate = hits / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return f"{rate:.3f} ({max(centre - half, 0):.3f}-{min(centre + half, 1):.3f})"


def _draw(rng: np.random.Generator, noise: str, size: int) -> np.ndarray:
    if noise == "t3":
        return rng.standard_t(3, size) / math.sqrt(3)  # t(3) scaled to unit std
    return rng.standard_normal(size)


def cell(task: tuple[str, int, float, float, int, int, int]) -> dict[str, dict[str, int] | float]:
    """Verdict counts per design (`fixed N` for N = 1 to MOST_FIXED, `auto`) and the sequential design's mean runs,
    over `trials` draws of one setting (noise, band runs, min_effect in true stds, shift in true stds)."""
    noise, n, min_effect, shift, cap, trials, seed = task
    rng = np.random.default_rng(seed)
    std = ACCURACY_MIN_EFFECT / min_effect  # the named min_effect, 0.02, is `min_effect` true stds
    counts: dict[str, dict[str, int]] = {name: dict.fromkeys(WORDS, 0) for name in _designs()}
    runs = 0
    options = {"modes": {METRIC: "max"}, "min_effect": {METRIC: ACCURACY_MIN_EFFECT}}
    for _ in range(trials):
        band = {METRIC: list(MEAN + std * _draw(rng, noise, n))}
        drawn = list(MEAN - shift * std + std * _draw(rng, noise, max(MOST_FIXED, cap)))
        for fixed in range(1, MOST_FIXED + 1):
            verdict = tracking.judge(band, {METRIC: drawn[:fixed]}, alpha=ALPHA, **options).verdict
            counts[f"fixed {fixed}"][verdict] += 1
        found = until_decided(band, {METRIC: drawn[:cap]}, cap=cap, alpha=ALPHA, **options)
        counts["auto"][found.verdict.verdict] += 1
        runs += found.runs
    return {**counts, "auto runs": runs / trials}


def _designs() -> list[str]:
    return [*(f"fixed {fixed}" for fixed in range(1, MOST_FIXED + 1)), "auto"]


def matched(results: dict[float, dict], min_effect: float) -> int | None:
    """The fewest fixed runs that leave no shift undecided at most as often, and detect the shift that matters at
    least as often, as the sequential design does (None: not even MOST_FIXED). Both hold their false alarms to
    alpha; the fixed design spends all of it, the sequential one less (the table shows both)."""
    calm, shifted = results[0], results[min_effect]
    for fixed in range(1, MOST_FIXED + 1):
        name = f"fixed {fixed}"
        if (
            calm[name][INCONCLUSIVE] <= calm["auto"][INCONCLUSIVE]
            and shifted[name][EXCEEDS] >= shifted["auto"][EXCEEDS]
        ):
            return fixed
    return None


def _change(runs: float, fixed: int) -> str:
    """The sequential design's mean trainings against the fixed design's, in words."""
    change = runs / fixed - 1
    return f"{-change:.0%} fewer" if change <= 0 else f"{change:.0%} more"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument(
        "--settings", nargs="+", default=["5:3", "10:2"], help="band runs:min_effect in true stds, e.g. 5:3"
    )
    parser.add_argument("--noises", nargs="+", default=["normal", "t3"])
    parser.add_argument("--cap", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--shifts", nargs="+", type=float, default=list(SHIFTS), help="true shifts in band stds (min_effect is added)"
    )
    args = parser.parse_args()
    print(f"{args.trials} trials a cell, alpha {ALPHA}, one metric, auto capped at {args.cap} runs")
    started = time.perf_counter()
    tasks = []
    for setting in args.settings:
        n, min_effect = int(setting.split(":")[0]), float(setting.split(":")[1])
        for noise in args.noises:
            for index, shift in enumerate(sorted({*args.shifts, min_effect})):
                seed = 100_000 * n + 1000 * index + (7 if noise == "t3" else 0)
                tasks.append((noise, n, min_effect, shift, args.cap, args.trials, seed))
    with ProcessPoolExecutor(args.workers) as pool:
        done = dict(zip(tasks, pool.map(cell, tasks), strict=True))
    for setting in args.settings:
        n, min_effect = int(setting.split(":")[0]), float(setting.split(":")[1])
        for noise in args.noises:
            results = {task[3]: found for task, found in done.items() if task[:3] == (noise, n, min_effect)}
            print(f"\n### {noise} noise, {n} band runs, min_effect {min_effect:g} true stds\n")
            print(
                "| design | shift (true stds) | exceeds_noise | within_tolerance | within_noise | inconclusive "
                "| mean trainings |"
            )
            print("| --- | ---: | --- | --- | --- | --- | ---: |")
            for name in _designs():
                for shift, found in sorted(results.items()):
                    rates = " | ".join(wilson(found[name][word], args.trials) for word in WORDS)
                    mean = found["auto runs"] if name == "auto" else float(name.split()[1])
                    print(f"| {name} | {shift:g} | {rates} | {mean:.2f} |")
            fixed = matched(results, min_effect)
            if fixed is None:
                print(f"\nno fixed design of at most {MOST_FIXED} runs matches auto")
                continue
            saved = ", ".join(
                f"{shift:g}: {found['auto runs']:.2f} ({_change(found['auto runs'], fixed)})"
                for shift, found in sorted(results.items())
            )
            print(f"\nmatched fixed design: {fixed} runs; auto's mean trainings by shift: {saved}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
