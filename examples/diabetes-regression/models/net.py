"""A regression model as a team writes it: plain Keras, one custom layer, no knowledge of the pipeline.

The pipeline calls `build(input_shape, n_outputs, **model.kwargs)` and seeds every initializer and dropout
layer itself; `Rescale` is registered so that `keras.models.load_model` (evaluate, rerun) restores it.
"""

from __future__ import annotations

import keras
from keras import layers


@keras.saving.register_keras_serializable(package="diabetes")
class Rescale(layers.Layer):
    """Maps the network's standardised output to the target's units: `offset + scale * inputs`."""

    def __init__(self, offset: float, scale: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.offset = offset
        self.scale = scale

    def call(self, inputs):
        return self.offset + self.scale * inputs

    def get_config(self) -> dict:
        return {**super().get_config(), "offset": self.offset, "scale": self.scale}


def build(input_shape: tuple[int, ...], n_outputs: int, width: int = 32, depth: int = 2, dropout: float = 0.1,
          target_mean: float = 0.0, target_std: float = 1.0) -> keras.Model:
    """A residual MLP: `depth` dense+ReLU blocks of `width` units with dropout, then a linear output in target units."""
    inputs = keras.Input(input_shape)
    hidden = layers.Dense(width, activation="relu")(inputs)
    for _ in range(depth - 1):
        hidden = layers.add([hidden, layers.Dense(width, activation="relu")(layers.Dropout(dropout)(hidden))])
    outputs = Rescale(target_mean, target_std)(layers.Dense(n_outputs)(hidden))
    return keras.Model(inputs, outputs, name="diabetes_net")
