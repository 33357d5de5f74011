"""Training core shared by the `train`, `calibrate` and `audit` stages and the benchmarks: build, seed, compile, fit."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.batches import KERAS_VALIDATION_BATCH, in_batches
from tracking.config.params import Params
from tracking.config.project import DVC_FILE
from tracking.config.user_code import describe_callable, load_callable, require_stage_dep
from tracking.data.hashing import weights_sha256
from tracking.determinism.seeding import Created, SeedReport, capturing_weights, reseed, seed_model
from tracking.determinism.seeds import Seeds
from tracking.run.lifecycle import deferred_interrupts
from tracking.training.building import call_builder, check_output, compile_model

# Most training steps Keras runs per call of its compiled train function (fewer where an epoch's steps are not
# a multiple: `steps_per_call`): the same steps in the same order, so the weights are bit-identical
# (tests/test_training.py), with a tenth less time on a small model (fewer Python round trips); a Ctrl-C is
# acted on after at most this many steps.
STEPS_PER_CALL = 8


def require_code_deps(params: Params, stage: str, root: Path, dvc_file: str = DVC_FILE) -> None:
    """The team's code `stage` trains with (model.builder, a "module:function" train.loss) is a DVC dep of it."""
    for key, spec in (("model.builder", params.model.builder), ("train.loss", params.train.loss)):
        if spec and ":" in spec:
            require_stage_dep(load_callable(spec, key, root), key, stage, root, dvc_file)


@dataclass(frozen=True)
class Built:
    """A built, seeded model with what provenance records of it (`prov.model.*`, `prov.seeds.*`), and the
    weights its builder created (to re-seed it)."""

    model: Any
    initial_weights_sha256: str
    seeding: SeedReport
    builder: dict[str, Any]
    created: Created


def build_model(
    params: Params,
    input_shape: tuple[int, ...],
    n_outputs: int,
    seeds: Seeds,
    root: Path = Path("."),
    target_shape: tuple[int, ...] | None = None,
) -> Built:
    """The model `model.builder` returns for `model.kwargs`, checked against the task and seeded by position."""
    import keras

    builder = load_callable(params.model.builder, "model.builder", root)
    with capturing_weights() as created:
        model = call_builder(
            builder,
            params.model.builder,
            input_shape,
            n_outputs,
            params.model.kwargs,
            {"seeds": seeds, "task": params.data.task},
        )
    check_output(model, params.model.builder, params.data.task, n_outputs, target_shape)
    report = seed_model(model, created, seeds, input_shape)
    described = {
        **describe_callable(params.model.builder, builder, root),
        "kwargs": json.dumps(params.model.kwargs, sort_keys=True),
        "dtype_policy": keras.config.dtype_policy().name,
    }
    return Built(model, weights_sha256(model.get_weights()), report, described, created)


def prepare_model(
    params: Params,
    seeds: Seeds,
    input_shape: tuple[int, ...],
    n_outputs: int,
    root: Path = Path("."),
    target_shape: tuple[int, ...] | None = None,
) -> Built:
    """Build, seed and compile (frameworks already seeded): every mistake in the team's code or in params.yaml
    surfaces here, before a stage opens its MLflow run."""
    built = build_model(params, input_shape, n_outputs, seeds, root, target_shape)
    compile_model(built.model, params, root)
    return replace(built, builder={**built.builder, "jit_compile": str(built.model.jit_compile).lower()})


class RepeatedModel:
    """One configuration's model, built and compiled once, then handed to every repeat reset to what a fresh
    build with that repeat's seeds gives: every variable back to its built value, the random initial weights
    and the generators re-drawn from the seeds, the optimizer's state back to its start.

    A repeat then traces no tf.function again (Keras keeps the model's train and test functions), which is
    most of what a repeat of a small model costs beyond its training steps. The weights after training are
    bit-identical to a freshly built model's. A model with randomness no layer's seed covers is built afresh
    for every repeat instead, since the global generator it draws from is not part of its state.
    """

    def __init__(
        self, input_shape: tuple[int, ...], n_outputs: int, root: Path, target_shape: tuple[int, ...] | None
    ) -> None:
        self.shape = (input_shape, n_outputs, root, target_shape)
        self._built: Built | None = None
        self._key: str = ""
        self._fresh: list[Any] = []

    def prepare(self, params: Params, seeds: Seeds) -> Built:
        """A compiled model seeded with `seeds`, as `prepare_model(params, seeds, ...)` builds it."""
        key = json.dumps(
            {name: value for name, value in params.flat().items() if not name.startswith("seeds.")}, default=str
        )
        built = self._built
        if built is None or key != self._key or built.seeding.unattributed:
            built = prepare_model(params, seeds, *self.shape)
            built.model.optimizer.build(built.model.trainable_variables)
            self._built, self._key = built, key
            self._fresh = [variable.numpy() for variable in self._state(built.model)]
            return built
        for variable, value in zip(self._state(built.model), self._fresh, strict=True):
            variable.assign(value)
        init, counts, _ = reseed(built.model, built.created, seeds)
        report = replace(built.seeding, init=init, dropout=counts["dropout"], augment=counts["augment"])
        return replace(built, initial_weights_sha256=weights_sha256(built.model.get_weights()), seeding=report)

    @staticmethod
    def _state(model: Any) -> list[Any]:
        """Every variable training moves: the model's weights and the optimizer's (step count, moments)."""
        return [*model.weights, *model.optimizer.variables]


def target_shape(manifest: dict) -> tuple[int, ...] | None:
    """The regression targets' shape per sample as prepare recorded it (None when the manifest predates it)."""
    shape = manifest.get("target_shape")
    return None if shape is None else tuple(shape)


def with_model(record: dict[str, Any], built: Built) -> dict[str, Any]:
    """The provenance record with the builder (`prov.model.*`: spec, kwargs, file hash, package version, dtype
    policy, jit_compile, seeded counts) and the randomness no seed covers (`prov.seeds.unattributed`)."""
    seeding = built.seeding.as_record()
    unattributed = {"unattributed": seeding.pop("unattributed")} if "unattributed" in seeding else {}
    return {**record, "seeds": {**record["seeds"], **unattributed}, "model": {**built.builder, **seeding}}


def batch_orders(n: int, batch_size: int, epochs: int, seed: int, within_batch_seed: int | None = None) -> np.ndarray:
    """The (epochs, n) example order of each epoch, drawn from `seed` alone.

    The order comes from NumPy's generator rather than tf.data's shuffle, whose op seed mixes in the global
    seed: here changing any other seed leaves the order as it was. With `within_batch_seed`, examples are
    also permuted inside each batch: the batch and its mathematical gradient stay the same, but the
    floating-point summation order changes, as it does with non-deterministic GPU reductions.
    """
    rng = np.random.default_rng(seed)
    orders = np.stack([rng.permutation(n) for _ in range(epochs)])
    if within_batch_seed is not None:
        noise = np.random.default_rng(within_batch_seed)
        for order in orders:
            for start in range(0, len(order), batch_size):
                order[start : start + batch_size] = noise.permutation(order[start : start + batch_size])
    return orders


def epoch_batches(
    x: np.ndarray, y: np.ndarray, batch_size: int, epochs: int, seed: int, within_batch_seed: int | None = None
) -> Any:
    """A tf.data pipeline of `epochs` passes in the orders of `batch_orders`."""
    import tensorflow as tf

    orders = batch_orders(len(y), batch_size, epochs, seed, within_batch_seed)
    x_t, y_t = tf.constant(x), tf.constant(y)
    return (
        tf.data.Dataset.from_tensor_slices(orders)
        .flat_map(lambda order: tf.data.Dataset.from_tensor_slices(order).batch(batch_size))
        .map(lambda index: (tf.gather(x_t, index), tf.gather(y_t, index)))
        .prefetch(2)
    )


def train_model(
    params: Params,
    seeds: Seeds,
    train: dict[str, np.ndarray],
    val: dict[str, np.ndarray] | None,
    n_outputs: int,
    callbacks: list[Any] = (),
    within_batch_seed: int | None = None,
) -> tuple[Any, dict[str, list[float]]]:
    """Build and fit the configured model; return it with its per-epoch history."""
    model = prepare_model(params, seeds, tuple(train["x"].shape[1:]), n_outputs).model
    return model, fit_model(model, params, seeds, train, val, callbacks, within_batch_seed)


def steps_per_call(steps: int) -> int:
    """The most steps, at most `STEPS_PER_CALL`, that divide an epoch's `steps`: Keras runs whole calls and
    counts an epoch in calls, so a call that did not end where the epoch does would train extra steps."""
    return max(n for n in range(1, min(steps, STEPS_PER_CALL) + 1) if steps % n == 0)


def run_steps_per_call(model: Any, steps: int) -> None:
    """Have Keras run `steps` training steps per call of its compiled function (its `steps_per_execution`);
    functions compiled for another count are dropped so that the next fit compiles them again."""
    if model.steps_per_execution != steps:
        model.steps_per_execution = steps
        model.train_function = model.test_function = model.predict_function = None


def fit_model(
    model: Any,
    params: Params,
    seeds: Seeds,
    train: dict[str, np.ndarray],
    val: dict[str, np.ndarray] | None,
    callbacks: list[Any] = (),
    within_batch_seed: int | None = None,
) -> dict[str, list[float]]:
    """Fit a compiled model on the seeded batch order; return its per-epoch history."""
    from tracking.training.callback import FirstStep, InterruptCheck

    steps = math.ceil(len(train["y"]) / params.train.batch_size)
    run_steps_per_call(model, steps_per_call(steps))
    batches = epoch_batches(
        train["x"], train["y"], params.train.batch_size, params.train.epochs, seeds.shuffle, within_batch_seed
    )
    validation = in_batches((val["x"], val["y"]), KERAS_VALIDATION_BATCH) if val is not None and len(val["y"]) else None
    with deferred_interrupts():
        history = model.fit(
            batches,
            epochs=params.train.epochs,
            steps_per_epoch=steps,
            validation_data=validation,
            callbacks=[InterruptCheck(), FirstStep(), *callbacks],
            shuffle=False,
            verbose=0,
        )
    return history.history
