"""The batches Keras is handed: the seeded training order, and the consecutive batches of validation and scoring.

Training batches follow `batch_orders`, drawn from `seeds.shuffle` alone. Validation and scoring go through tf.data
pipelines of our own rather than Keras's adapter for arrays, which maps its batches in parallel: TensorFlow 2.21
rewrites that map under op determinism and prints an `E0000 ... NodeDef mentions attribute use_unbounded_threadpool`
line on every stage's stderr. Consecutive batches of the same size hold the same examples in the same order, so
every number stays the same.

On JAX and PyTorch (no TensorFlow there) the same batches come from NumPy: a generator of the seeded order for
training, and a `keras.utils.PyDataset` of consecutive batches for validation and scoring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tracking.data.arrays import Arrays, map_arrays, n_rows, rows
from tracking.determinism.backend import TENSORFLOW, configured
from tracking.training.augment import augmented

# Batches for scoring (the candidate and every calibration repeat alike), and the batches Keras gives
# `validation_data` arrays.
SCORING_BATCH = 512
KERAS_VALIDATION_BATCH = 32


def in_batches(arrays: Any, batch_size: int) -> Any:
    """`arrays` (one, or a tuple of inputs and targets) as consecutive batches: a tf.data pipeline on TensorFlow,
    a `keras.utils.PyDataset` on the other backends."""
    if configured() != TENSORFLOW:
        return consecutive_batches(arrays, batch_size)
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(arrays).batch(batch_size)


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
    x: Arrays,
    y: Arrays,
    batch_size: int,
    epochs: int,
    seed: int,
    within_batch_seed: int | None = None,
    sample_weight: np.ndarray | None = None,
    augment: Callable[..., Any] | None = None,
    augment_seed: int = 0,
) -> Any:
    """`epochs` passes in the orders of `batch_orders` (a tf.data pipeline on TensorFlow, a generator of NumPy
    batches elsewhere); `x` one array or a dict by input name, `y` one or a dict by output name; batches are
    `(x, y)`, or `(x, y, sample_weight)` as `fit` takes weights, where the data has them; with `augment`
    (TensorFlow only), each batch as it returns it (tracking/training/augment.py)."""
    orders = batch_orders(n_rows(y), batch_size, epochs, seed, within_batch_seed)
    if configured() != TENSORFLOW:
        arrays = (x, y, *(() if sample_weight is None else (sample_weight,)))
        return (
            tuple(rows(value, order[start : start + batch_size]) for value in arrays)
            for order in orders
            for start in range(0, len(order), batch_size)
        )
    import tensorflow as tf

    tensors = (
        map_arrays(tf.constant, x),
        map_arrays(tf.constant, y),
        *(() if sample_weight is None else (tf.constant(sample_weight),)),
    )
    batches = (
        tf.data.Dataset.from_tensor_slices(orders)
        .flat_map(lambda order: tf.data.Dataset.from_tensor_slices(order).batch(batch_size))
        .map(lambda index: tuple(map_arrays(lambda t: tf.gather(t, index), value) for value in tensors))
    )
    return (batches if augment is None else augmented(batches, augment, augment_seed)).prefetch(2)


def fit_arrays(split: dict[str, Any]) -> tuple[Any, ...]:
    """A split's `(x, y)`, or `(x, y, sample_weight)` where the data has weights: what `fit` is handed."""
    weights = split.get("sample_weight")
    return (split["x"], split["y"]) if weights is None else (split["x"], split["y"], weights)


def consecutive_batches(arrays: Any, batch_size: int) -> Any:
    """`arrays` as a `keras.utils.PyDataset` of consecutive batches, read in order in this thread: what `fit`'s
    validation (every epoch), `evaluate` and `predict` take on any backend."""
    import keras

    n = n_rows(arrays[-1] if isinstance(arrays, tuple) else arrays)

    class Consecutive(keras.utils.PyDataset):
        def __len__(self) -> int:
            return -(-n // batch_size)

        def __getitem__(self, index: int) -> Any:
            window = slice(index * batch_size, (index + 1) * batch_size)
            if isinstance(arrays, tuple):
                return tuple(rows(value, window) for value in arrays)
            return rows(arrays, window)

    return Consecutive()
