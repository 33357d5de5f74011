"""A regression model as a team writes it: plain Keras, one custom layer, no knowledge of the pipeline.

The pipeline calls `build(input_shape, n_outputs, **model.kwargs)` and seeds every initializer and dropout
layer itself; `FeatureGate` is registered so that `keras.models.load_model` (evaluate, rerun) restores it.
"""

from __future__ import annotations

import keras
from keras import layers


@keras.saving.register_keras_serializable(package="diabetes")
class FeatureGate(layers.Layer):
    """Scales each input feature by a learned factor in (0, 2), starting at `initial`: the model learns what to mute."""

    def __init__(self, initial: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.initial = initial

    def build(self, input_shape) -> None:
        logit = float(keras.ops.log(self.initial / (2.0 - self.initial)))
        self.logits = self.add_weight(
            shape=(input_shape[-1],), initializer=keras.initializers.Constant(logit), name="logits"
        )

    def call(self, inputs):
        return inputs * 2.0 * keras.ops.sigmoid(self.logits)

    def get_config(self) -> dict:
        return {**super().get_config(), "initial": self.initial}


def build(
    input_shape: tuple[int, ...],
    n_outputs: int,
    width: int = 32,
    depth: int = 2,
    dropout: float = 0.1,
    gate: float = 1.0,
) -> keras.Model:
    """Gated inputs, a residual MLP of `depth` dense+ReLU blocks of `width` units with dropout, one linear output."""
    inputs = keras.Input(input_shape)
    hidden = layers.Dense(width, activation="relu")(FeatureGate(gate)(inputs))
    for _ in range(depth - 1):
        hidden = layers.add([hidden, layers.Dense(width, activation="relu")(layers.Dropout(dropout)(hidden))])
    return keras.Model(inputs, layers.Dense(n_outputs)(hidden), name="diabetes_net")
