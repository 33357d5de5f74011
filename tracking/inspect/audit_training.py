"""The audit's training: R repeats of one determinism mode, traced step by step, in a process of its own.

`python -m tracking.inspect.audit_training --mode det|nondet --repeats R --steps S --out DIR` is started by the
`audit` stage once per mode: op determinism is a process-wide switch, and kernels (and on a GPU the cuDNN
algorithm choices) made under one setting must not serve the other, so each mode gets a fresh process.
Both processes start together; each says `ready` on stdout once set up, then trains one repeat per `go`
line on stdin and answers `done`, so the stage can alternate the modes repeat by repeat and time them fairly.
The step reproduces `tracking.training.fitting.fit_model`: the same model builder, compiled optimizer and loss, seeds and NumPy batch
order (checked bit for bit against Keras' `fit` by the tests); a tf.GradientTape step exposes the gradients.
`det` is the calibration's `control` variant (op determinism on), `nondet` its `impl` variant (op
determinism off and, on a CPU, examples permuted inside each batch with a different seed per repeat).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tracking.config.params import Params
from tracking.config.params_file import load_params
from tracking.data.arrays import map_arrays, rows
from tracking.data.dataset import load_splits
from tracking.data.hashing import array_sha256, weights_sha256
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import as_record, is_determinism_error
from tracking.entry import run_main
from tracking.inspect.audit_measures import (
    DONE,
    GO,
    READY,
    UNSUPPORTED_FILE,
    UNSUPPORTED_OP_EXIT,
    Trace,
    diagnose,
)
from tracking.layout import PREPARED
from tracking.repeats.variants import variant_setup
from tracking.store.location import project_root
from tracking.training.augment import augment_function, step_seed
from tracking.training.batches import batch_orders
from tracking.training.model import BuildInputs, prepare_model
from tracking.training.weighting import training_weights

VARIANT = {"det": "control", "nondet": "impl"}
KERNEL_NOISE = {
    "none": "none",
    "simulated": "simulated (examples permuted inside each batch)",
    "gpu-kernels": "GPU kernels",
    "cpu-kernels": "CPU kernels (deterministic)",
}
PREDICT_BATCH = 1024


def step_batches(
    n: int, batch_size: int, epochs: int, steps: int, seed: int, within_batch_seed: int | None
) -> list[np.ndarray]:
    """The example indices of the first `steps` batches of training, in `fit_model`'s order."""
    needed = min(epochs, math.ceil(steps / math.ceil(n / batch_size)))
    orders = batch_orders(n, batch_size, needed, seed, within_batch_seed)
    return [order[start : start + batch_size] for order in orders for start in range(0, n, batch_size)][:steps]


def train_traced(
    model: Any, params: Params, seeds: Seeds, train: dict, test: dict, steps: int, within_batch_seed: int | None
) -> dict[str, Any]:
    """Train `steps` steps of the compiled `model` (frameworks already seeded) as `fit`'s train step does, with the
    configured loss and optimizer, hashing loss, gradients and weights after every step."""
    import tensorflow as tf

    optimizer = model.optimizer
    variables = model.trainable_variables

    @tf.function
    def step(x: Any, y: Any, weights: Any = None) -> tuple[Any, list[Any]]:
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = optimizer.scale_loss(
                model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=weights, training=True)
            )
        gradients = tape.gradient(loss, variables)
        gradients = [tf.zeros_like(v) if g is None else g for g, v in zip(gradients, variables, strict=False)]
        optimizer.apply(gradients, variables)
        return loss, gradients

    batches = step_batches(
        len(train["y"]), params.train.batch_size, params.train.epochs, steps, seeds.shuffle, within_batch_seed
    )
    names = ["loss", *(f"gradient/{v.path}" for v in variables), *(f"weight/{v.path}" for v in model.weights)]
    hashes, seconds, kept = [], [], []
    weights = training_weights(params.train, train)
    augment = augment_function(params.train, project_root())
    for index, batch in enumerate(batches):
        x, y = map_arrays(tf.constant, rows(train["x"], batch)), tf.constant(train["y"][batch])
        if augment is not None:
            x, y = augment(x, y, step_seed(seeds.augment, index))
        start = time.perf_counter()
        loss, gradients = step(x, y) if weights is None else step(x, y, tf.constant(weights[batch]))
        loss_value = loss.numpy()
        seconds.append(time.perf_counter() - start)
        gradient_values = [g.numpy() for g in gradients]
        hashes.append(
            [
                array_sha256(loss_value),
                *map(array_sha256, gradient_values),
                *(array_sha256(w.numpy()) for w in model.weights),
            ]
        )
        if index in (0, len(batches) - 1):
            kept.append((float(loss_value), np.concatenate([g.ravel() for g in gradient_values])))
    probabilities = np.concatenate(
        [
            np.asarray(model(rows(test["x"], slice(i, i + PREDICT_BATCH)), training=False))
            for i in range(0, len(test["y"]), PREDICT_BATCH)
        ]
    )
    return {
        "names": names,
        "hashes": hashes,
        "seconds": seconds,
        "loss": [kept[0][0], kept[-1][0]],
        "gradients": [kept[0][1], kept[-1][1]],
        "probabilities": probabilities,
        "weights_sha256": weights_sha256(model.get_weights()),
        "test_accuracy": float((probabilities.argmax(axis=1) == test["y"]).mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tracking.inspect.audit_training")
    parser.add_argument("--mode", choices=sorted(VARIANT), required=True)
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    params = load_params()
    base_seeds = reproducible_process(params)
    root = project_root()
    manifest = Manifest.read(root / PREPARED)
    splits = load_splits(root / PREPARED, manifest)
    train, test = splits["train"], splits["test"]
    import keras
    import tensorflow as tf

    from tracking.provenance import capture

    gpu = bool(tf.config.list_physical_devices("GPU"))
    runs, record = [], None
    print(READY, flush=True)
    for repeat in range(args.repeats):
        if sys.stdin.readline().strip() != GO:
            sys.exit(1)  # the stage stopped: nothing to save
        run_params, seeds, within, source = variant_setup(VARIANT[args.mode], repeat, params, base_seeds, True, gpu)
        keras.backend.clear_session()  # fresh layer names, so variable paths match across repeats
        effective = seed_frameworks(run_params, seeds)
        model = None
        try:
            model = prepare_model(run_params, seeds, BuildInputs.of(manifest, train, root)).model
            runs.append(train_traced(model, run_params, seeds, train, test, args.steps, within))
        except Exception as err:
            if not (effective.op_determinism and is_determinism_error(err)):
                raise
            found = diagnose(err, model.layers if model is not None else [])
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / UNSUPPORTED_FILE).write_text(json.dumps(found, indent=2) + "\n")
            sys.exit(UNSUPPORTED_OP_EXIT)
        if record is None:
            record = capture(root, seeds.as_dict(), as_record(run_params.determinism, effective), stages=("prepare",))
        runs[-1].update(
            within_batch_seed=within, kernel_noise=KERNEL_NOISE[source], op_determinism=effective.op_determinism
        )
        print(DONE, flush=True)
    steps_per_epoch = math.ceil(len(train["y"]) / params.train.batch_size)
    meta = {
        "mode": args.mode,
        "op_determinism": runs[0]["op_determinism"],
        "kernel_noise": runs[0]["kernel_noise"],
        "within_batch_seeds": [run["within_batch_seed"] for run in runs],
        "weights_sha256": [run["weights_sha256"] for run in runs],
        "test_accuracy": [run["test_accuracy"] for run in runs],
        "final_loss": [run["loss"][1] for run in runs],
        "gpu": gpu,
        "tensorflow": tf.__version__,
        "configured_steps": params.train.epochs * steps_per_epoch,
        "provenance": record,
    }
    Trace(
        args.mode,
        runs[0]["names"],
        np.array([run["hashes"] for run in runs]),
        np.array([run["loss"] for run in runs], dtype=np.float32),
        np.array([run["gradients"] for run in runs]),
        np.stack([run["probabilities"] for run in runs]),
        np.array([run["seconds"] for run in runs]),
        meta,
    ).save(args.out)


if __name__ == "__main__":
    run_main(main, startup_line=False)  # one line per audit: its trainers' start-up is the audit stage's work
