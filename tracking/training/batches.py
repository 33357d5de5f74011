"""The batches Keras is handed: the seeded training order, and the consecutive batches of validation and scoring.

Training batches follow `epoch_orders`, drawn from `seeds.shuffle` alone, one epoch's order at a time. Every batch
is gathered from the arrays as they are handed, memory-mapped `.npy` files included (the prepared splits are read
that way), so memory holds a few batches, not the data set: on TensorFlow, arrays up to `IN_MEMORY_BYTES` are
gathered from tensors held in memory, as fast as before, and larger ones a batch at a time from their files by a
NumPy call inside the tf.data pipeline; both give the same batches, bit for bit. Validation and scoring go through
the same tf.data pipeline rather than Keras's adapter for arrays, which maps its batches in parallel: TensorFlow
2.21 rewrites that map under op determinism and prints an `E0000 ... NodeDef mentions attribute
use_unbounded_threadpool` line on every stage's stderr. Consecutive batches of the same size hold the same
examples in the same order, so every number stays the same.

On JAX and PyTorch (no TensorFlow there) the same batches come from NumPy: a generator of the seeded order for
training, and a `keras.utils.PyDataset` of consecutive batches for validation and scoring.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tracking.data.arrays import Arrays, n_rows, rows
from tracking.determinism.backend import TENSORFLOW, configured
from tracking.training.augment import augmented

# Batches for scoring (the candidate and every calibration repeat alike), and the batches Keras gives
# `validation_data` arrays.
SCORING_BATCH = 512
KERAS_VALIDATION_BATCH = 32
# Arrays of at most this many bytes in all are held in memory as tensors on TensorFlow; larger ones are read a
# batch at a time from where they lie (a memory-mapped file), so training's memory does not grow with the data.
IN_MEMORY_BYTES = 64 * 2**20


def in_batches(arrays: Any, batch_size: int) -> Any:
    """`arrays` (one, or a tuple of inputs and targets) as consecutive batches: a tf.data pipeline on TensorFlow,
    a `keras.utils.PyDataset` on the other backends."""
    if configured() != TENSORFLOW:
        return consecutive_batches(arrays, batch_size)
    import tensorflow as tf

    n = n_rows(arrays[-1] if isinstance(arrays, tuple) else arrays)
    return without_autotune(tf.data.Dataset.range(n).batch(batch_size).map(row_gatherer(arrays)))


def without_autotune(dataset: Any) -> Any:
    """`dataset` with tf.data's autotuning off. Its tuning thread waits between rounds for a period that doubles up
    to 60 s, and deleting the iterator waits for the round in progress: the end of `fit` (Keras deletes its training
    and validation iterators there) stalled for up to a minute on the main thread, however the run was tracked (7 to
    9 s after 60 epochs in two of three fits, 49 to 57 s after 320 in the tracking bench; 0.01 to 0.02 s with it off).
    These pipelines have nothing to tune (no parallel map; a fixed prefetch), and the batches stay the same."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def epoch_orders(
    n: int, batch_size: int, epochs: int, seed: int, within_batch_seed: int | None = None
) -> Iterator[np.ndarray]:
    """Each epoch's example order in turn, drawn from `seed` alone.

    The order comes from NumPy's generator rather than tf.data's shuffle, whose op seed mixes in the global
    seed: here changing any other seed leaves the order as it was. With `within_batch_seed`, examples are
    also permuted inside each batch: the batch and its mathematical gradient stay the same, but the
    floating-point summation order changes, as it does with non-deterministic GPU reductions. One epoch's order
    is held at a time, however many epochs.
    """
    rng = np.random.default_rng(seed)
    noise = None if within_batch_seed is None else np.random.default_rng(within_batch_seed)
    for _ in range(epochs):
        order = rng.permutation(n)
        if noise is not None:
            for start in range(0, len(order), batch_size):
                order[start : start + batch_size] = noise.permutation(order[start : start + batch_size])
        yield order


def batch_orders(n: int, batch_size: int, epochs: int, seed: int, within_batch_seed: int | None = None) -> np.ndarray:
    """The (epochs, n) example order of every epoch (`epoch_orders`, all at once)."""
    return np.stack(list(epoch_orders(n, batch_size, epochs, seed, within_batch_seed)))


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
    """`epochs` passes in the orders of `epoch_orders` (a tf.data pipeline on TensorFlow, a generator of NumPy
    batches elsewhere); `x` one array or a dict by input name, `y` one or a dict by output name; batches are
    `(x, y)`, or `(x, y, sample_weight)` as `fit` takes weights, where the data has them; with `augment`
    (TensorFlow only), each batch as it returns it (tracking/training/augment.py)."""
    n = n_rows(y)
    arrays = (x, y, *(() if sample_weight is None else (sample_weight,)))
    if configured() != TENSORFLOW:
        return (
            tuple(rows(value, order[start : start + batch_size]) for value in arrays)
            for order in epoch_orders(n, batch_size, epochs, seed, within_batch_seed)
            for start in range(0, len(order), batch_size)
        )
    import tensorflow as tf

    def orders() -> Iterator[np.ndarray]:
        return epoch_orders(n, batch_size, epochs, seed, within_batch_seed)

    batches = (
        tf.data.Dataset.from_generator(orders, output_signature=tf.TensorSpec((n,), tf.int64))
        .flat_map(lambda order: tf.data.Dataset.from_tensor_slices(order).batch(batch_size))
        .map(row_gatherer(arrays))
    )
    return without_autotune((batches if augment is None else augmented(batches, augment, augment_seed)).prefetch(2))


def row_gatherer(arrays: Any) -> Callable[[Any], Any]:
    """A tf.data map from a batch of row indices to those rows of `arrays` (one array, or a tuple of arrays or
    dicts of arrays), in `arrays`' structure: from tensors held in memory up to `IN_MEMORY_BYTES`, else read from
    the arrays where they lie (a memory-mapped file is read a batch at a time)."""
    import tensorflow as tf

    leaves = tf.nest.flatten(arrays)
    if sum(leaf.nbytes for leaf in leaves) <= IN_MEMORY_BYTES:
        tensors = [tf.constant(leaf) for leaf in leaves]
        return lambda index: tf.nest.pack_sequence_as(arrays, [tf.gather(tensor, index) for tensor in tensors])
    types = [tf.string if leaf.dtype.kind in "SU" else tf.as_dtype(leaf.dtype) for leaf in leaves]

    def read(index: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(leaf[index]) for leaf in leaves]

    def gather(index: Any) -> Any:
        found = tf.numpy_function(read, [index], types, stateful=False)
        for tensor, leaf in zip(found, leaves, strict=True):
            tensor.set_shape((None, *leaf.shape[1:]))
        return tf.nest.pack_sequence_as(arrays, found)

    return gather


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
