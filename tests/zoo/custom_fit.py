"""A functional model of a `keras.Model` subclass with its own `train_step`, `test_step` and metric trackers.

Ported from keras-io, "Customizing what happens in `fit()` with TensorFlow" by fchollet (last modified 2023/06/27;
keras-team/keras-io, guides/custom_train_step_in_tensorflow.py): https://keras.io/guides/custom_train_step_in_tensorflow/.
Kept as written: the "Going lower-level" `CustomModel`, which creates its own `loss_tracker` (`Mean`), metric
and loss function in `__init__`, lists its trackers in the `metrics` property so `fit` and `evaluate` reset
them, and computes its own loss in `train_step` under a `tf.GradientTape`; and the guide's "Providing your own
evaluation step" `test_step`, written for the same trackers. Built as in the guide, `CustomModel(inputs, outputs)`.

Adapted to classify digits: the guide's regression on random data (`MeanSquaredError`, a `MeanAbsoluteError`
metric named "mae", one `Dense(1)` on 32 features) becomes `SparseCategoricalCrossentropy` with a
`SparseCategoricalAccuracy` metric named "accuracy", and `Flatten`, a hidden `Dense` and a softmax output.
"""

from __future__ import annotations

import keras
import tensorflow as tf


class CustomModel(keras.Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.accuracy_metric = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy()

    def train_step(self, data):
        x, y = data

        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)  # Forward pass
            # Compute our own loss
            loss = self.loss_fn(y, y_pred)

        # Compute gradients
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)

        # Update weights
        self.optimizer.apply(gradients, trainable_vars)

        # Compute our own metrics
        self.loss_tracker.update_state(loss)
        self.accuracy_metric.update_state(y, y_pred)
        return {"loss": self.loss_tracker.result(), "accuracy": self.accuracy_metric.result()}

    def test_step(self, data):
        # Unpack the data
        x, y = data
        # Compute predictions
        y_pred = self(x, training=False)
        # Updates the metrics tracking the loss
        self.loss_tracker.update_state(self.loss_fn(y, y_pred))
        # Update the metrics.
        self.accuracy_metric.update_state(y, y_pred)
        # Return a dict mapping metric names to current value.
        return {m.name: m.result() for m in self.metrics}

    @property
    def metrics(self):
        # We list our `Metric` objects here so that `reset_states()` can be
        # called automatically at the start of each epoch
        # or at the start of `evaluate()`.
        return [self.loss_tracker, self.accuracy_metric]


def build(input_shape, n_outputs, units=32):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(units, activation="relu")(x)
    outputs = keras.layers.Dense(n_outputs, activation="softmax")(x)
    return CustomModel(inputs, outputs)
