"""How often the verdicts that say a gap is small come out where they should not, measured through the public
`tracking.judge`: `within_tolerance` at a true shift of the named `compare.min_effect` (issue 47), and the defaults'
`within_noise` (issue 66).

`--only tolerance`: the rule calls a gap beyond noise tolerable only where its 1-alpha interval excludes 0 and lies
inside ± min_effect, so that rate must stay at most alpha/2; beside it, the rate the earlier rule (the gap's point
estimate below min_effect) gave on the same draws, and how the verdicts split. Each trial draws n band runs and N
candidate runs shifted by min_effect (up or down at random) under one noise model (normal; t with 3 degrees of freedom
and 10% bad seeds 5 stds worse, both scaled to unit variance), and judges one metric with `min_effect` at 2 and 3
true stds. "holds" where the rate's 95% Wilson interval reaches alpha/2 or below (with 3 or more candidate runs
under normal noise the rule's rate at the boundary is alpha/2 itself, since the verdict's critical t is then the t
distribution's).

`--only defaults`: the default design (calibration.repeats 5, compare.candidate_repeats 3, test_accuracy and
test_loss, compare.min_effect {}: each metric's default, `tracking.noise.metric_family.min_effect`) under
bench/verdict_quality.py's normal, t(3), 10% bad seeds and capped-accuracy noise (test_accuracy; test_loss normal):
what each design sees of the default's 4 band stds; a candidate without effect, how often `within_noise` (goal: at
least 80%) and `exceeds_noise` (false alarms: at most alpha plus the Monte Carlo error); a true drop of
test_accuracy's default min_effect (as the verdict computes it from the trial's band), how often `exceeds_noise`
(at least 80%); and under the cap, a true drop of a named min_effect below what 20 band runs and 3 candidate runs
see, how often `within_noise` (only equivalence can say it: at most alpha/2 plus the Monte Carlo error), beside the
rate the band's tied std gave it before its interval took the ceiling's std.

Run from the project root: `nice -n 10 .venv/bin/python bench/tolerance_quality.py [--trials 1000] [--only SECTION]
[--noise NAME]` (`--only`, `--noise`, `--band-runs`, `--candidate-runs` repeat and pick cells; each noise model
draws from its own seeded generator).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import verdict_quality as quality

import tracking
from tracking.noise import tails
from tracking.noise.ceiling import ceiling_std
from tracking.noise.metric_family import DEFAULT_STDS, min_effect
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN, WITHIN_TOLERANCE
from tracking.noise.power import detectable_shift

ALPHA = 0.05
BAND_RUNS, CANDIDATE_RUNS, MIN_EFFECTS = (3, 5, 10, 20), (1, 3, 5), (2.0, 3.0)
BAD_SEEDS, BAD_SHIFT = 0.1, 5.0
MIXTURE_STD = float(np.sqrt(1 + BAD_SHIFT**2 * BAD_SEEDS * (1 - BAD_SEEDS)))
# bench/verdict_quality.py's noise models of test_accuracy that the defaults section draws from.
DEFAULT_NOISE = ["normal", "t(3)", "10% bad seeds", "accuracy capped at 356/360"]


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


DEFAULT_BAND, DEFAULT_CANDIDATES = 5, 3
# Under the cap: the design and the named min_effects (in the capped accuracy's true stds) below what it sees.
CAPPED_BAND, CAPPED_CANDIDATES, CAPPED_EFFECTS = 20, 3, (1.5, 2.0)


def _rate(hits: int, trials: int) -> tuple[float, float]:
    found = stats.binomtest(hits, trials).proportion_ci(0.95, method="wilson")
    return found.low, found.high


def _default_trial(rng: np.random.Generator, noise: str, drop: bool) -> tracking.Verdict:
    """The default design's verdict on one calibration: test_accuracy under `noise` (lowered by its default
    min_effect as the verdict computes it from this band where `drop`), test_loss normal and unchanged."""
    draw, centre, scale = quality.NOISE[noise]
    capped = noise.startswith("accuracy capped")
    accuracy = centre + scale * draw(rng, DEFAULT_BAND)
    shift = 0.0
    if drop:
        std = ceiling_std(accuracy) or float(np.std(accuracy, ddof=1))
        shift = min_effect("test_accuracy", float(accuracy.mean()), {}, std)[0]
    if capped:
        candidates = quality._capped(rng, DEFAULT_CANDIDATES, quality._capped_drop(shift))
    else:
        candidates = centre + scale * draw(rng, DEFAULT_CANDIDATES) - shift
    return tracking.judge(
        {
            "test_accuracy": list(accuracy),
            "test_loss": list(quality.LOSS + quality.LOSS_STD * rng.standard_normal(DEFAULT_BAND)),
        },
        {
            "test_accuracy": list(candidates),
            "test_loss": list(quality.LOSS + quality.LOSS_STD * rng.standard_normal(DEFAULT_CANDIDATES)),
        },
        alpha=ALPHA,
    )


def default_sight() -> None:
    """What each design sees: the shift its test detects 80% of the time under every noise shape, in band stds,
    for two metrics (Holm's first step, alpha/2), against the default's 4 band stds."""
    print(f"the shift each design detects at least 80% of the time (band stds, two metrics: alpha/2 = {ALPHA / 2}),")
    print(
        f"against the default min_effect's {DEFAULT_STDS:g} band stds (within_noise by power where it is at most that):"
    )
    for n in BAND_RUNS:
        seen = [(runs, detectable_shift(n, runs, ALPHA / 2)) for runs in CANDIDATE_RUNS]
        print(
            f"  n={n:>2}: "
            + "; ".join(f"N={runs}: {shift:.2f}{' sees' if shift <= DEFAULT_STDS else ''}" for runs, shift in seen)
        )


def default_design(rng: np.random.Generator, noise: str, trials: int) -> None:
    """A candidate without effect and a true drop of the default min_effect, at the default design."""
    null = dict.fromkeys((WITHIN, EXCEEDS, INCONCLUSIVE, WITHIN_TOLERANCE), 0)
    for _ in range(trials):
        null[_default_trial(rng, noise, drop=False).verdict] += 1
    detected = sum(_default_trial(rng, noise, drop=True).checks[0].verdict == EXCEEDS for _ in range(trials))
    same, alarms = null[WITHIN], null[EXCEEDS]
    goal = "holds" if _rate(same, trials)[0] >= 0.8 else "SHORT of 0.8"
    level = "holds" if _rate(alarms, trials)[0] <= ALPHA else f"ABOVE alpha {ALPHA}"
    power = "holds" if _rate(detected, trials)[1] >= 0.8 else "SHORT of 0.8"
    print(
        f"  {noise}: no effect: within_noise {wilson(same, trials)} {goal}; exceeds_noise {wilson(alarms, trials)} "
        f"{level}; inconclusive {null[INCONCLUSIVE] / trials:.3f} | a drop of min_effect: test_accuracy exceeds_noise "
        f"{wilson(detected, trials)} {power}",
        flush=True,
    )


def capped_equivalence(rng: np.random.Generator, effect: float, trials: int) -> None:
    """Under the cap, a true drop of a named min_effect (`effect` true stds) that the design does not see: how often
    within_noise (equivalence alone), and how often the band's tied std's interval lay inside ± min_effect."""
    shift = effect * quality._capped_std()
    drop = quality._capped_drop(shift)
    within = before = 0
    for _ in range(trials):
        found = tracking.judge(
            {"test_accuracy": list(quality._capped(rng, CAPPED_BAND))},
            {"test_accuracy": list(quality._capped(rng, CAPPED_CANDIDATES, drop))},
            alpha=ALPHA,
            min_effect={"test_accuracy": shift},
        ).checks[0]
        within += found.verdict == WITHIN
        if found.p_value is not None and found.p_value > ALPHA and found.scale:
            half = tails.critical(ALPHA, found.band.n, found.candidates, None) * found.scale
            seen = found.detectable is not None and found.detectable <= shift
            before += seen or (-shift <= found.delta - half and found.delta + half <= shift)
    holds = "holds" if _rate(within, trials)[0] <= ALPHA / 2 else f"ABOVE alpha/2 = {ALPHA / 2}"
    print(
        f"  min_effect {effect:g} true stds ({shift:.4g}): within_noise {wilson(within, trials)} {holds}; "
        f"from the band's tied std (before) {wilson(before, trials)}",
        flush=True,
    )


def defaults(args: argparse.Namespace) -> None:
    """The `defaults` section (module docstring)."""
    started = time.perf_counter()
    default_sight()
    print(
        f"the default design (calibration.repeats {DEFAULT_BAND}, compare.candidate_repeats {DEFAULT_CANDIDATES}, "
        f"test_accuracy and test_loss, compare.min_effect {{}}), alpha {ALPHA}, {args.trials} trials a cell:"
    )
    for noise in [noise for noise in args.noise or DEFAULT_NOISE if noise in DEFAULT_NOISE]:
        default_design(np.random.default_rng([args.seed, 66, DEFAULT_NOISE.index(noise)]), noise, args.trials)
    seen = detectable_shift(CAPPED_BAND, CAPPED_CANDIDATES, ALPHA)
    print(
        f"accuracy capped at 356/360, n={CAPPED_BAND}, N={CAPPED_CANDIDATES}, a true drop of a named min_effect it "
        f"does not see (it detects {seen:.2f} ceiling stds, {seen * quality.CEILING_STD:.4g} at the model's "
        f"{quality.CEILING_STD}):"
    )
    for effect in CAPPED_EFFECTS:
        capped_equivalence(np.random.default_rng([args.seed, 66, 10 + int(10 * effect)]), effect, args.trials)
    print(f"defaults: {time.perf_counter() - started:.0f} s")


def tolerance(args: argparse.Namespace) -> None:
    """The `tolerance` section (module docstring)."""
    print(f"within_tolerance at a true shift of min_effect, alpha {ALPHA}, {args.trials} trials a cell:")
    for noise in args.noise or NOISE:
        if noise not in NOISE:
            continue
        rng = np.random.default_rng([args.seed, list(NOISE).index(noise)])
        for n in args.band_runs or BAND_RUNS:
            for runs in args.candidate_runs or CANDIDATE_RUNS:
                for effect in MIN_EFFECTS:
                    print(cell(rng, noise, n, runs, effect, args.trials), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--only", choices=("tolerance", "defaults"), action="append", help="sections (all by default)")
    parser.add_argument("--noise", choices=[*NOISE, *DEFAULT_NOISE], action="append", help="noise models (all)")
    parser.add_argument("--band-runs", type=int, action="append", help=f"n (default {BAND_RUNS})")
    parser.add_argument("--candidate-runs", type=int, action="append", help=f"N (default {CANDIDATE_RUNS})")
    args = parser.parse_args()
    sections = args.only or ["tolerance", "defaults"]
    if "tolerance" in sections:
        tolerance(args)
    if "defaults" in sections:
        defaults(args)


if __name__ == "__main__":
    main()
