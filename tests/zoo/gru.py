"""A GRU classifying 3-D sequences, (steps, features) per sample, with a metric class of the team's own.

Ported from keras-io, "Working with RNNs" by Scott Zhu and Francois Chollet (keras-team/keras-io,
guides/working_with_rnns.py): https://keras.io/guides/working_with_rnns/, and its metric from "Training &
evaluation with the built-in methods" by fchollet (guides/training_with_built_in_methods.py):
https://keras.io/guides/training_with_built_in_methods/. Kept as written: the RNN guide's stacked `layers.GRU`
(`return_sequences=True`, then a last GRU returning its final state) under a `Dense` softmax, and the built-in
methods guide's `CategoricalTruePositives(keras.metrics.Metric)`, with its `add_variable` state, `update_state`
on `argmax(y_pred)` against the labels and `reset_state`; compiled by name (`train.metrics:
[accuracy, models.gru:CategoricalTruePositives]`).

Adapted: `update_state` reshapes `y_true` to a column as it does `y_pred` (the pipeline's labels are 1-D, the
guide's broadcast to a (batch, batch) comparison). Shrunk: the guide's GRU widths 256 and 128 become 8 and 4, its `Embedding` over word ids is dropped (the inputs
are real-valued sequences). The guide trains on random placeholders (a download-free stand-in is
needed), so `load` draws 240 noisy sine waves of 40 steps and 2 channels, shape (240, 40, 2), whose class is
their frequency: data as a team's sensor loader returns it, reaching the builder as `input_shape (40, 2)`.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops


def load(n=240, steps=40):
    rng = np.random.default_rng(7)
    labels = np.arange(n) % 3
    time = np.linspace(0, 2 * np.pi, steps)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    waves = np.sin((1 + labels[:, None]) * time[None, :] + phase)
    x = np.stack([waves, np.cos(waves)], axis=-1) + rng.normal(0, 0.3, (n, steps, 2))
    return {"x": x.astype("float32"), "y": labels}


class CategoricalTruePositives(keras.metrics.Metric):
    def __init__(self, name="categorical_true_positives", **kwargs):
        super().__init__(name=name, **kwargs)
        self.true_positives = self.add_variable(shape=(), name="ctp", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = ops.reshape(ops.argmax(y_pred, axis=1), (-1, 1))
        y_true = ops.reshape(y_true, (-1, 1))
        values = ops.cast(y_true, "int32") == ops.cast(y_pred, "int32")
        values = ops.cast(values, "float32")
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, "float32")
            values = ops.multiply(values, sample_weight)
        self.true_positives.assign_add(ops.sum(values))

    def result(self):
        return self.true_positives

    def reset_state(self):
        self.true_positives.assign(0.0)


def build(input_shape, n_outputs, units=8):
    inputs = keras.Input(shape=input_shape)
    x = layers.GRU(units, return_sequences=True)(inputs)
    x = layers.GRU(units // 2)(x)
    return keras.Model(inputs, layers.Dense(n_outputs, activation="softmax")(x))
