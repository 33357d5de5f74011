"""Fitting a prepared model: the seeded batch order, validation included, with Ctrl-C acted on between steps.

The one fit of every path (the train stage, each calibration repeat, a team's script): validation draws from the
generators of layers that draw at inference, so a path that skipped it would train other weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tracking.config.params import Params
from tracking.data.arrays import n_rows
from tracking.determinism.backend import TORCH, configured
from tracking.determinism.seeds import Seeds
from tracking.run.lifecycle import deferred_interrupts
from tracking.training.augment import augment_function
from tracking.training.batches import KERAS_VALIDATION_BATCH, epoch_batches, fit_arrays, in_batches
from tracking.training.weighting import training_weights

# Most training steps Keras runs per call of its compiled train function (fewer where an epoch's steps are not
# a multiple: `steps_per_call`): the same steps in the same order, so the weights are bit-identical
# (tests/test_training.py), with a tenth less time on a small model (fewer Python round trips); a Ctrl-C is
# acted on after at most this many steps.
STEPS_PER_CALL = 8


def steps_per_call(steps: int) -> int:
    """The most steps, at most `STEPS_PER_CALL`, that divide an epoch's `steps`: Keras runs whole calls and
    counts an epoch in calls, so a call that did not end where the epoch does would train extra steps. One on
    PyTorch, whose Keras trainer runs one step per call."""
    if configured() == TORCH:
        return 1
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
    callbacks: Sequence[Any] = (),
    within_batch_seed: int | None = None,
    root: Path = Path("."),
) -> dict[str, list[float]]:
    """Fit a compiled model on the seeded batch order, validating after every epoch, each training sample weighted
    by the data's `sample_weight` and `train.class_weight` where given, each training batch through `train.augment`
    (its module found from `root`) where set; return its per-epoch history."""
    from tracking.training.callback import FirstStep, InterruptCheck

    steps = math.ceil(n_rows(train["y"]) / params.train.batch_size)
    run_steps_per_call(model, steps_per_call(steps))
    batches = epoch_batches(
        train["x"],
        train["y"],
        params.train.batch_size,
        params.train.epochs,
        seeds.shuffle,
        within_batch_seed,
        training_weights(params.train, train),
        augment_function(params.train, root),
        seeds.augment,
    )
    validation = in_batches(fit_arrays(val), KERAS_VALIDATION_BATCH) if val is not None and n_rows(val["y"]) else None
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


def train_model(
    params: Params,
    seeds: Seeds,
    inputs: Any,
    val: dict[str, np.ndarray] | None,
    callbacks: Sequence[Any] = (),
    within_batch_seed: int | None = None,
) -> tuple[Any, dict[str, list[float]]]:
    """Prepare the configured model for `inputs` (a `BuildInputs`) and fit it on its training split (frameworks
    already seeded); return it with its per-epoch history."""
    from tracking.training.model import prepare_model

    model = prepare_model(params, seeds, inputs).model
    return model, fit_model(model, params, seeds, inputs.train, val, callbacks, within_batch_seed, inputs.root)
