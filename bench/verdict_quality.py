"""Statistical quality of the compare verdict: false alarms and power, measured through the verdict's own functions.

The compare stage judges a family of metrics (the default two: test_accuracy to max, test_loss to min) with
`judge_values`, `judge_family` and `family_verdict`; this script calls exactly those on simulated statistics:
each calibration draws n band runs per metric, each candidate N runs, from normal noise (the two metrics
independent, a band std of 1). A team lives with one calibration, so the false-alarm rate is measured over many
independent calibrations, each judging many null candidates (no effect): the rate with its 95% interval
(calibrations resampled, since candidates of one calibration share its band), and the spread of the
per-calibration rate. Then the power: a true shift of 1, 2 and 3 band stds in the worse direction of
test_accuracy, for N = 1 and N = 5 candidate runs. A second null row rounds each test_accuracy to a test example
(k/360 around 0.987 with a std of 0.0058, the default model's band), where ties leave some bands without
spread (`inconclusive`, counted apart).

`--real` adds the real path: a tiny model trained `--real-repeats` times as a band and `--real-candidates` more
times as seed-only candidates, judged by the compare stage's `judge_candidate` (slow: each is a training).
Run from the project root: `.venv/bin/python bench/verdict_quality.py [--calibrations 100 --candidates 40]`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracking.noise.candidates import judge_values
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, family_verdict, judge_family
from tracking.noise.power import detectable_shift, power

METRICS = {"test_accuracy": "max", "test_loss": "min"}
ALPHA = 0.05
TEST_EXAMPLES, ACCURACY, ACCURACY_STD = 360, 0.987, 0.0058


def verdicts(
    rng: np.random.Generator, calibrations: int, candidates: int, n: int, runs: int, shift: float, discrete: bool
) -> np.ndarray:
    """(calibrations, candidates) verdicts of the default family, the accuracy shifted by `shift` band stds worse."""
    out = np.empty((calibrations, candidates), dtype=object)

    def draw(metric: str, size: int, moved: float = 0.0) -> np.ndarray:
        noise = rng.standard_normal(size) - moved
        if discrete and metric == "test_accuracy":
            return np.round((ACCURACY + ACCURACY_STD * noise) * TEST_EXAMPLES) / TEST_EXAMPLES
        return noise

    for c in range(calibrations):
        bands = {metric: draw(metric, n) for metric in METRICS}
        for k in range(candidates):
            judged = [
                judge_values(
                    metric, bands[metric], draw(metric, runs, shift if metric == "test_accuracy" else 0.0), ALPHA, "sim"
                )
                for metric in METRICS
            ]
            out[c, k] = family_verdict(judge_family(judged, ALPHA))
    return out


def rates(found: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """The share flagged, its 95% interval with calibrations resampled (percentile bootstrap, 2000), and each
    calibration's own rate."""
    per = (found == EXCEEDS).mean(axis=1)
    rng = np.random.default_rng(1)
    means = per[rng.integers(0, len(per), (2000, len(per)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(per.mean()), float(low), float(high), per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibrations", type=int, default=100, help="independent calibrations (default 100)")
    parser.add_argument("--candidates", type=int, default=40, help="null candidates per calibration (default 40)")
    parser.add_argument("--power-calibrations", type=int, default=100, help="calibrations per power cell (default 100)")
    parser.add_argument("--power-candidates", type=int, default=40, help="candidates per calibration (default 40)")
    parser.add_argument("--repeats", type=int, default=5, help="calibration runs n (default 5)")
    parser.add_argument("--real", action="store_true", help="also train a tiny model (slow)")
    parser.add_argument("--real-repeats", type=int, default=5, help="real band runs (default 5)")
    parser.add_argument("--real-candidates", type=int, default=10, help="real seed-only candidates (default 10)")
    parser.add_argument("--epochs", type=int, default=3, help="real path: epochs per training (default 3)")
    args = parser.parse_args()
    rng = np.random.default_rng(26)
    started = time.perf_counter()
    n, family = args.repeats, f"{len(METRICS)} metrics ({', '.join(METRICS)}), Holm at alpha {ALPHA}"
    print(f"simulated statistics through judge_values/judge_family/family_verdict; n = {n} calibration runs; {family}")
    for runs in (1, 5):
        for discrete in (False, True):
            found = verdicts(rng, args.calibrations, args.candidates, n, runs, 0.0, discrete)
            rate, low, high, per = rates(found)
            p10, p50, p90 = np.quantile(per, [0.1, 0.5, 0.9])
            kind = f"test_accuracy in steps of 1/{TEST_EXAMPLES}" if discrete else "normal values"
            unjudged = float((found == INCONCLUSIVE).mean())
            print(
                f"null, N={runs}, {kind}: {found.size} candidates over {args.calibrations} calibrations: false alarms "
                f"{rate:.4f} (95% interval {low:.4f} to {high:.4f}); per calibration: median {p50:.3f}, 10th "
                f"percentile {p10:.3f}, 90th {p90:.3f}, max {per.max():.3f}"
                + (f"; inconclusive {unjudged:.3f}" if discrete else "")
            )
    print(f"power (a true drop of test_accuracy, in band stds; {args.power_calibrations} calibrations x "
          f"{args.power_candidates} candidates a cell), measured vs the noncentral t at alpha/2 for one metric:")  # fmt: skip
    for runs in (1, 5):
        cells = []
        for shift in (1.0, 2.0, 3.0):
            found = verdicts(rng, args.power_calibrations, args.power_candidates, n, runs, shift, False)
            rate, low, high, _ = rates(found)
            cells.append(
                f"{shift:.0f} std: {rate:.3f} ({low:.3f} to {high:.3f}; model {power(shift, n, runs, ALPHA / 2):.3f})"
            )
        print(f"  N={runs}: " + "; ".join(cells))
    print("smallest true shift (band stds) detected with 80% power by the noncentral t, at alpha/2 (two metrics):")
    for size in (3, 5, 10, 20):
        row = ", ".join(f"N={runs}: {detectable_shift(size, runs, ALPHA / 2):.2f}" for runs in (1, 2, 3, 5, 10))
        print(f"  n={size} calibration runs: {row}")
    print(f"simulation: {time.perf_counter() - started:.0f} s")
    if args.real:
        real(args)


def real(args: argparse.Namespace) -> None:
    """Train a tiny model as a band and as seed-only candidates, and judge each candidate as compare does."""
    from tracking.config.params import load_params
    from tracking.data.dataset import load_source
    from tracking.data.prepare import split
    from tracking.determinism.process import reproducible_process, seed_frameworks
    from tracking.noise.statistics import pairwise_churn
    from tracking.noise.variants import variant_setup
    from tracking.noise.verdict import judge_candidate
    from tracking.noise.worker import train_and_score
    from tracking.training.model import BuildInputs, RepeatedModel

    started = time.perf_counter()
    params = load_params()
    params = params.model_copy(update={"train": params.train.model_copy(update={"epochs": args.epochs})})
    seeds = reproducible_process(params)
    source = load_source(params.data.source)
    splits = split(source, params.data, params.data.split_seed)
    train = splits["train"]
    n_classes = int(source.y.max()) + 1
    models = RepeatedModel(BuildInputs(train, n_classes, None, Path(".")))
    trained = []
    for repeat in range(args.real_repeats + args.real_candidates):
        run_params, run_seeds, within, _ = variant_setup("algo", repeat, params, seeds, False, False)
        seed_frameworks(run_params, run_seeds)
        trained.append(
            train_and_score(models.prepare(run_params, run_seeds), run_params, run_seeds, splits, n_classes, within)
        )
    band, candidates = trained[: args.real_repeats], trained[args.real_repeats :]
    values = {name: [t.metrics[name] for t in band] for name in METRICS}
    variant = {"name": "algo", "weights_sha256": [t.weights_sha256 for t in band]}
    flagged = 0
    for candidate in candidates:
        churn = pairwise_churn(np.stack([candidate.predicted] + [t.predicted for t in band]))
        found = judge_candidate(params, variant, values, [candidate.metrics], churn, [candidate.weights_sha256], False)
        flagged += found["verdict"] == EXCEEDS
    accuracy = values["test_accuracy"]
    print(
        f"real: {params.model.builder}, {args.epochs} epochs, {args.real_repeats} band runs (test accuracy "
        f"{np.mean(accuracy):.4f} +- {np.std(accuracy, ddof=1):.4f}), {args.real_candidates} seed-only candidates: "
        f"{flagged} flagged ({_wilson(flagged, args.real_candidates)}); {time.perf_counter() - started:.0f} s"
    )


def _wilson(hits: int, trials: int) -> str:
    """The 95% Wilson interval of hits/trials, as text."""
    z, p = 1.96, hits / trials
    centre, half = (p + z * z / (2 * trials)), z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    scale = 1 + z * z / trials
    return f"95% interval {max(0.0, (centre - half) / scale):.3f} to {min(1.0, (centre + half) / scale):.3f}"


if __name__ == "__main__":
    main()
