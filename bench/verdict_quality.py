"""Statistical quality of the compare verdict, measured by training real models.

Calibrates the ALGO+IMPL band of the configuration in params.yaml (seeds vary; kernel noise simulated on a
CPU), then judges candidates exactly as the compare stage does:
- N candidates that differ only by seed: the share flagged `exceeds_noise` is the false-alarm rate, which
  must not exceed alpha;
- candidates with real changes (learning rate x10, 20% of training labels shuffled, one class removed from
  training): the share flagged is the detection rate.
Run from the project root: `.venv/bin/python bench/verdict_quality.py [--repeats 10 --candidates 20]`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.compare import judge_candidate
from pipelines.prepare import split
from tracking.config.params import load_params
from tracking.data.dataset import load_source
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.noise.calibration import summarise
from tracking.noise.statistics import pairwise_churn
from tracking.noise.variants import variant_setup
from tracking.noise.worker import train_and_score
from tracking.training.model import BuildInputs, RepeatedModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="calibration runs (default 10)")
    parser.add_argument("--candidates", type=int, default=20, help="seed-only candidates (default 20)")
    parser.add_argument("--per-change", type=int, default=2, help="candidates per real change (default 2)")
    parser.add_argument("--epochs", type=int, help="override train.epochs for a quicker run")
    args = parser.parse_args()
    from tqdm import tqdm

    params = load_params()
    if args.epochs:
        params = params.model_copy(update={"train": params.train.model_copy(update={"epochs": args.epochs})})
    seeds = reproducible_process(params)
    source = load_source(params.data.source)
    splits = split(source, params.data, params.data.split_seed)
    n_classes = int(source.y.max()) + 1
    train, test = splits["train"], splits["test"]
    simulate = params.calibration.simulate_impl_noise
    rng = np.random.default_rng(0)
    shuffled = dict(train, y=train["y"].copy())
    chosen = rng.random(len(shuffled["y"])) < 0.2
    shuffled["y"][chosen] = rng.permutation(shuffled["y"][chosen])
    without_zero = {key: array[train["y"] != 0] for key, array in train.items()}
    faster = params.model_copy(
        update={"train": params.train.model_copy(update={"learning_rate": params.train.learning_rate * 10})}
    )
    changes = {
        "learning rate x10": (faster, train),
        "20% labels shuffled": (params, shuffled),
        "class 0 removed from training": (params, without_zero),
    }
    plan = (
        [("calibration", repeat, params, train) for repeat in range(args.repeats)]
        + [("seed-only", 1000 + i, params, train) for i in range(args.candidates)]
        + [(name, 2000 + i, cfg, data) for name, (cfg, data) in changes.items() for i in range(args.per_change)]
    )
    import tensorflow as tf

    gpu = bool(tf.config.list_physical_devices("GPU"))
    results: dict[str, list] = {}
    models = RepeatedModel(BuildInputs(train, n_classes, None, Path(".")))
    started = time.perf_counter()
    for group, repeat, config, data in tqdm(plan, desc="train", unit="run", file=sys.stderr):
        run_params, run_seeds, within, source_kind = variant_setup("algo+impl", repeat, config, seeds, simulate, gpu)
        seed_frameworks(run_params, run_seeds)
        built = models.prepare(run_params, run_seeds)
        trained = train_and_score(built, run_params, run_seeds, {"train": data, "test": test}, n_classes, within)
        results.setdefault(group, []).append(trained)
    calibration = results["calibration"]
    runs = [
        {"variant": "algo+impl", "metrics": t.metrics, "weights_sha256": t.weights_sha256, "impl_noise": source_kind}
        for t in calibration
    ]
    predictions = np.stack([t.predicted for t in calibration])
    variant = summarise(runs, predictions, np.stack([t.weights for t in calibration]), params.compare.alpha)[
        "algo+impl"
    ]
    baseline_churn = pairwise_churn(predictions)[np.triu_indices(len(calibration), k=1)]

    def flagged(candidate) -> bool:
        churn = pairwise_churn(np.vstack([candidate.predicted[None, :], predictions]))[0, 1:]
        verdict = judge_candidate(
            params, variant, candidate.metrics, churn, baseline_churn, candidate.weights_sha256, control=False
        )
        return verdict["verdict"] == "exceeds_noise"

    band = variant["bands"]["test_accuracy"]
    print(
        f"model {params.model.builder}, {params.train.epochs} epochs; {args.repeats} calibration runs "
        f"(kernel noise: {source_kind}); test accuracy {band['mean']:.4f} +- {band['std']:.4f} (std, ddof=1)"
    )
    false_alarms = sum(flagged(c) for c in results["seed-only"])
    rate = false_alarms / len(results["seed-only"])
    print(
        f"false-alarm rate (seed-only candidates flagged): {false_alarms}/{len(results['seed-only'])} = {rate:.3f} "
        f"(nominal alpha {params.compare.alpha}) {'OK' if rate <= params.compare.alpha else 'ABOVE ALPHA'}"
    )
    detected_total = 0
    for name in changes:
        detected = sum(flagged(c) for c in results[name])
        detected_total += detected
        accuracy = np.mean([c.metrics["test_accuracy"] for c in results[name]])
        print(f"detection, {name}: {detected}/{len(results[name])} (mean test accuracy {accuracy:.4f})")
    total = sum(len(results[name]) for name in changes)
    print(f"detection rate over real changes: {detected_total}/{total} = {detected_total / total:.3f}")
    print(f"{len(plan)} trainings in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
