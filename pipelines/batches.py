"""The batches the stages hand Keras for validation and scoring, as tf.data pipelines of their own.

Keras's adapter for arrays maps its batches in parallel; TensorFlow 2.21 rewrites that map under op determinism
and prints an `E0000 ... NodeDef mentions attribute use_unbounded_threadpool` line on every stage's stderr.
Consecutive batches of the same size hold the same examples in the same order, so every number stays the same.
"""

from __future__ import annotations

from typing import Any

# Batches for scoring (evaluate, and each calibration repeat), and the batches Keras gives `validation_data` arrays.
SCORING_BATCH = 512
KERAS_VALIDATION_BATCH = 32


def in_batches(arrays: Any, batch_size: int) -> Any:
    """`arrays` (one, or a tuple of inputs and targets) as a tf.data pipeline of consecutive batches."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(arrays).batch(batch_size)
