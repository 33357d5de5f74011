"""DVC stage `calibrate`: train the frozen baseline `calibration.repeats` times per noise variant.

The variants, and how each repeat's seeds and kernel noise are set, are in `pipelines/variants.py`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.scoring import flat_metrics, scores, summary_metrics
from pipelines.training import Built, RepeatedModel, fit_model, require_code_deps, target_shape, with_model
from pipelines.variants import variant_setup
from tracking.config.baseline import FROZEN_SECTIONS, load_baseline
from tracking.config.params import CLASSIFICATION, Params, load_params
from tracking.config.project import CALIBRATE, CALIBRATION_RUNS, NOISE_FILE, PREPARED
from tracking.data.dataset import load_splits, output_size, read_manifest
from tracking.data.hashing import weights_sha256
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import as_record
from tracking.names import (
    CONTROL_BIT_IDENTICAL_TAG,
    IMPL_NOISE_TAG,
    NOISE_REPEAT_TAG,
    NOISE_ROLE_TAG,
    NOISE_VARIANT_TAG,
)
from tracking.noise.statistics import (
    band_from_values,
    churn_measure,
    off_diagonal_summary,
    pairwise_disagreement,
    pairwise_weight_distance,
)
from tracking.provenance import capture
from tracking.provenance.git import open_repository
from tracking.provenance.software import installed_packages
from tracking.run.tracker import Tracker
from tracking.stage import run_main
from tracking.store.location import project_root

# Intervals stored with the calibration use this alpha; the compare stage re-derives them at compare.alpha,
# so changing compare.alpha never re-runs the calibration.
STORED_ALPHA = 0.05


@dataclass(frozen=True)
class Trained:
    """One repeat's test metrics, predictions (classes, or values for regression) and flattened weights."""

    metrics: dict[str, float]
    predicted: np.ndarray
    weights: np.ndarray
    weights_sha256: str


def train_and_score(
    built: Built,
    params: Params,
    seeds: Seeds,
    train: dict,
    test: dict,
    n_outputs: int,
    within_batch_seed: int | None,
    task: str = CLASSIFICATION,
) -> Trained:
    """Train one repeat's built model (frameworks already seeded) and score it on the test set as evaluate does,
    compiled metrics too. No validation pass: a repeat keeps test metrics only, and validation moves no weight."""
    model = built.model
    fit_model(model, params, seeds, train, None, within_batch_seed=within_batch_seed)
    compiled = model.evaluate(test["x"], test["y"], batch_size=512, verbose=0, return_dict=True)
    result = scores(
        test["y"], np.asarray(model(test["x"], training=False)), task, n_outputs, test.get("groups"), compiled
    )
    model_weights = model.get_weights()
    predicted = result["predicted"].astype(np.int16 if task == CLASSIFICATION else np.float32)
    return Trained(
        flat_metrics(summary_metrics(result)),
        predicted,
        np.concatenate([w.ravel() for w in model_weights]).astype(np.float32),
        weights_sha256(model_weights),
    )


def trained_on(run_params: Params, params: Params) -> dict[str, Any]:
    """The params a calibration run applies: the baseline's training sections, the rest from params.yaml.

    The rest includes `data.*`: the calibration trains on `data/prepared`, which `prepare` made from
    params.yaml, so the baseline's data section would describe data the runs never saw.
    """
    training = set(FROZEN_SECTIONS) - {"data"}
    return {
        **params.flat(),
        **{key: value for key, value in run_params.flat().items() if key.split(".", 1)[0] in training},
    }


def log_repeat_setup(
    child: Tracker, record: dict[str, Any], packages: list[str], flat: dict[str, Any], manifest: dict, train: dict
) -> None:
    """What the candidate's run holds, for one repeat: params, provenance and the training data.

    The record is the calibration's one capture with this repeat's seeds and determinism, so a repeat costs
    no new capture; the writes run on the child's background writer while it trains.
    """
    child.log_params(flat)
    child.log_provenance(record, packages)
    child.log_dataset(manifest, train["x"], train["y"], location=child.root / PREPARED, context="training")


def summarise(
    runs: list[dict[str, Any]],
    predictions: np.ndarray,
    weights: np.ndarray,
    alpha: float,
    task: str = CLASSIFICATION,
    target_std: float | None = None,
) -> dict[str, Any]:
    """Bands of every metric and pairwise churn (the task's) / weight-distance summaries, per variant."""
    summary = {}
    for variant in dict.fromkeys(run["variant"] for run in runs):
        index = [i for i, run in enumerate(runs) if run["variant"] == variant]
        chosen = [runs[i] for i in index]
        metrics = {
            name: [run["metrics"][name] for run in chosen]
            for name in chosen[0]["metrics"]
            if sum(np.isfinite(run["metrics"][name]) for run in chosen) >= 2
        }
        hashes = sorted({run["weights_sha256"] for run in chosen})
        summary[variant] = {
            "runs": index,
            "bands": {
                name: band_from_values(name, values, alpha, f"calibration:{variant}").as_dict()
                for name, values in metrics.items()
            },
            "churn": off_diagonal_summary(pairwise_disagreement(predictions[index], task, target_std)),
            "weight_distance": off_diagonal_summary(pairwise_weight_distance(weights[index])),
            "bit_identical": len(hashes) == 1,
            "weights_sha256": hashes,
            "impl_noise": chosen[0]["impl_noise"],
        }
    return summary


@dataclass
class Calibration:
    """What every repeat of one calibration shares: the configuration, the data, the one provenance capture,
    and the model reused across repeats."""

    params: Params
    baseline: Params
    base_seeds: Seeds
    root: Path
    manifest: dict[str, Any]
    splits: dict[str, dict]
    record: dict[str, Any]
    packages: list[str]
    gpu: bool
    models: RepeatedModel

    @property
    def task(self) -> str:
        return self.manifest.get("task", CLASSIFICATION)


def open_calibration(
    params: Params,
    baseline: Params,
    base_seeds: Seeds,
    root: Path,
    data: tuple[dict[str, Any], dict[str, dict]],
    parent: Tracker,
) -> Calibration:
    """Seed the frameworks, capture provenance once and log it with the params and `data` (the manifest and
    the splits) to the parent run."""
    import tensorflow as tf

    manifest, splits = data
    train = splits["train"]
    effective = seed_frameworks(baseline, base_seeds)
    record = capture(root, base_seeds.as_dict(), as_record(baseline.determinism, effective), stages=("prepare",))
    packages = installed_packages()
    parent.log_params(trained_on(baseline, params))
    parent.log_provenance(record, packages)
    parent.log_dataset(manifest, train["x"], train["y"], location=root / PREPARED, context="training")
    models = RepeatedModel(tuple(train["x"].shape[1:]), output_size(manifest), root, target_shape(manifest))
    gpu = bool(tf.config.list_physical_devices("GPU"))
    return Calibration(params, baseline, base_seeds, root, manifest, splits, record, packages, gpu, models)


def run_repeat(calibration: Calibration, variant: str, repeat: int) -> tuple[dict[str, Any], Trained]:
    """Train and score one repeat of one variant as a child run of the open calibration run."""
    c = calibration
    train, test = c.splits["train"], c.splits["test"]
    run_params, seeds, within, source = variant_setup(
        variant, repeat, c.baseline, c.base_seeds, c.params.calibration.simulate_impl_noise, c.gpu
    )
    tags = {NOISE_VARIANT_TAG: variant, NOISE_REPEAT_TAG: repeat, IMPL_NOISE_TAG: source}
    with Tracker(
        c.params.mlflow.experiment,
        c.root,
        stage=CALIBRATE,
        run_name=f"{variant} #{repeat}",
        nested=True,
        tags=tags,
        system_metrics=c.params.compute.system_metrics,
    ) as child:
        actual = seed_frameworks(run_params, seeds)
        own = {**c.record, "seeds": seeds.as_dict(), "determinism": as_record(run_params.determinism, actual)}
        built = c.models.prepare(run_params, seeds)
        child.in_background(
            partial(
                log_repeat_setup,
                child,
                with_model(own, built),
                c.packages,
                trained_on(run_params, c.params),
                c.manifest,
                train,
            )
        )
        trained = train_and_score(built, run_params, seeds, train, test, output_size(c.manifest), within, c.task)
        child.log_metrics({name: value for name, value in trained.metrics.items() if np.isfinite(value)})
        child.log_weights(trained=trained.weights_sha256, initial=built.initial_weights_sha256)
    run = {
        "variant": variant,
        "repeat": repeat,
        "run_id": child.run_id,
        "impl_noise": source,
        "weights_sha256": trained.weights_sha256,
        "metrics": trained.metrics,
        "seeds": seeds.as_dict(),
    }
    return run, trained


def main() -> None:
    from tqdm import tqdm

    params = load_params()
    baseline = load_baseline(params.calibration.baseline)
    base_seeds = reproducible_process(baseline)
    root = project_root()
    require_code_deps(baseline, CALIBRATE, root)
    manifest = read_manifest(root / PREPARED)
    data = manifest, load_splits(root / PREPARED, manifest)
    open_repository(root)
    plan = list(product(params.calibration.variants, range(params.calibration.repeats)))
    runs, predictions, weights = [], [], []
    with Tracker(
        params.mlflow.experiment, root, stage=CALIBRATE, run_name="calibration", tags={NOISE_ROLE_TAG: "calibration"}
    ) as parent:
        calibration = open_calibration(params, baseline, base_seeds, root, data, parent)
        task, test = calibration.task, calibration.splits["test"]
        target_std = float(np.std(test["y"].astype(np.float64))) if task != CLASSIFICATION else None
        for variant, repeat in tqdm(plan, desc="calibrate", unit="run", file=sys.stderr):
            run, trained = run_repeat(calibration, variant, repeat)
            runs.append(run)
            predictions.append(trained.predicted)
            weights.append(trained.weights)
        stacked_predictions, stacked_weights = np.stack(predictions), np.stack(weights)
        noise = {
            "baseline": baseline.flat(),
            "data_sha256": calibration.manifest["content_sha256"],
            "alpha": STORED_ALPHA,
            "repeats": params.calibration.repeats,
            "simulate_impl_noise": params.calibration.simulate_impl_noise,
            "gpu": calibration.gpu,
            "parent_run_id": parent.run_id,
            "runs": runs,
            "task": task,
            "churn_measure": churn_measure(task),
            "target_std": target_std,
            "variants": summarise(runs, stacked_predictions, stacked_weights, STORED_ALPHA, task, target_std),
        }
        control = noise["variants"].get("control")
        parent.set_tags({CONTROL_BIT_IDENTICAL_TAG: str(control["bit_identical"]).lower() if control else "n/a"})
        parent.log_json(noise, NOISE_FILE.as_posix())
        (root / NOISE_FILE).parent.mkdir(parents=True, exist_ok=True)
        (root / CALIBRATION_RUNS).parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            root / CALIBRATION_RUNS,
            predictions=stacked_predictions,
            weights=stacked_weights,
            variants=np.array([run["variant"] for run in runs]),
        )
        (root / NOISE_FILE).write_text(json.dumps(noise, indent=2) + "\n")
    if control and not control["bit_identical"]:
        print(
            "WARNING: non-determinism detected: CONTROL repeats (same seeds, op determinism on) gave different "
            f"weights: {', '.join(control['weights_sha256'])}",
            file=sys.stderr,
        )
    print(f"calibrated {len(runs)} runs over {len(noise['variants'])} variant(s); MLflow parent run {parent.run_id}")


if __name__ == "__main__":
    run_main(main)
