"""Augmentation in the input pipeline (`train.augment`): the team's function mapped over the training batches.

keras-io's `dataset.map(augment)` pattern, with its randomness `seeds.augment`'s alone: the function is called
as `augment(x, y, seed) -> (x, y)` on each training batch inside the tf.data pipeline, `seed` the stateless seed
pair `[seeds.augment, step]` (int64; `step` counts batches from the first epoch's first) that TensorFlow's
stateless random ops take (`tf.image.stateless_random_flip_left_right(x, seed)`,
`tf.random.stateless_uniform(shape, seed)`). So the same seeds give the same augmented batches, bit for bit, and
`seeds.augment` moves them alone. The map runs in order, one batch at a time, as the rest of the pipeline.
Validation and scoring batches are not augmented. TensorFlow only (params.py says why).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracking.config.params import TrainParams
from tracking.config.user_code import load_callable

AUGMENT_KEY = "train.augment"


def augment_function(train_params: TrainParams, root: Path) -> Callable[..., Any] | None:
    """The team's `train.augment` function, or None where it is not set."""
    spec = train_params.augment
    return None if spec is None else load_callable(spec, AUGMENT_KEY, root)


def augmented(batches: Any, augment: Callable[..., Any], seed: int) -> Any:
    """The tf.data `batches` (`(x, y)` or `(x, y, sample_weight)`) with `augment` applied to each batch's `x`
    and `y`, given the seed pair `[seed, step]`; sample weights pass through as they were."""

    def apply(step: Any, batch: tuple[Any, ...]) -> tuple[Any, ...]:
        x, y, *weights = batch
        changed = augment(x, y, step_seed(seed, step))
        if not (isinstance(changed, tuple | list) and len(changed) == 2):
            raise TypeError(f"it returned {type(changed).__name__}, not the pair (x, y)")
        return (*changed, *weights)

    return batches.enumerate().map(apply)


def step_seed(seed: int, step: Any) -> Any:
    """The stateless seed pair of training step `step` (a tensor or an int): `[seed, step]` as int64."""
    import tensorflow as tf

    return tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])
