"""The built-in model builders, `pipelines.models:small_cnn` and `pipelines.models:mlp`, builders like a team's own.

Each is `build(input_shape, n_outputs, **kwargs)` returning an uncompiled `keras.Model`; every initializer,
dropout and augmentation layer gets its own seed from the run's `Seeds`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracking.seeds import Seeds


def small_cnn(input_shape: tuple[int, ...], n_outputs: int, seeds: Seeds, task: str = "classification",
              filters: Sequence[int] = (32, 64, 128), dense_units: int = 128, batch_norm: bool = False,
              dropout: float = 0.2, augment: bool = False) -> Any:
    """Conv+ReLU+max-pool blocks, one per entry of `filters`, then a dense layer, dropout and the output."""
    from keras import layers

    layer = _Layers(seeds)
    stack = [*layer.inputs(input_shape, augment)]
    for width in filters:
        stack += [layers.Conv2D(width, 3, padding="same", use_bias=not batch_norm, kernel_initializer=layer.init())]
        stack += [layers.BatchNormalization()] if batch_norm else []
        stack += [layers.ReLU(), layers.MaxPooling2D(2, padding="same")]
    stack += [layers.Flatten(), layers.Dense(dense_units, activation="relu", kernel_initializer=layer.init())]
    stack += [layer.dropout(dropout, 0)] if dropout > 0 else []
    return layer.model([*stack, layer.output(n_outputs, task)], "small_cnn")


def mlp(input_shape: tuple[int, ...], n_outputs: int, seeds: Seeds, task: str = "classification",
        hidden_units: Sequence[int] = (64,), batch_norm: bool = False, dropout: float = 0.2, augment: bool = False) -> Any:
    """Flatten, then a dense+ReLU layer (with dropout) per entry of `hidden_units`, then the output."""
    from keras import layers

    layer = _Layers(seeds)
    stack = [*layer.inputs(input_shape, augment), layers.Flatten()]
    for index, units in enumerate(hidden_units):
        stack += [layers.Dense(units, use_bias=not batch_norm, kernel_initializer=layer.init())]
        stack += [layers.BatchNormalization()] if batch_norm else []
        stack += [layers.ReLU()]
        stack += [layer.dropout(dropout, index)] if dropout > 0 else []
    return layer.model([*stack, layer.output(n_outputs, task)], "mlp")


class _Layers:
    """Seeded layers: initializers numbered in creation order, dropout and augmentation from their own seeds."""

    def __init__(self, seeds: Seeds) -> None:
        self.seeds = seeds
        self.counter = iter(range(1_000_000))

    def init(self) -> Any:
        import keras

        return keras.initializers.GlorotUniform(seed=self.seeds.init + next(self.counter))

    def dropout(self, rate: float, index: int) -> Any:
        from keras import layers

        return layers.Dropout(rate, seed=self.seeds.dropout + index)

    def inputs(self, input_shape: tuple[int, ...], augment: bool) -> list[Any]:
        import keras
        from keras import layers

        stack = [keras.Input(input_shape)]
        if augment:
            stack += [layers.RandomTranslation(0.125, 0.125, fill_mode="constant", seed=self.seeds.augment),
                      layers.RandomRotation(0.04, fill_mode="constant", seed=self.seeds.augment + 1)]
        return stack

    def output(self, n_outputs: int, task: str) -> Any:
        """Class probabilities (softmax; a sigmoid for one output) or, for regression, linear values."""
        from keras import layers

        activation = "linear" if task == "regression" else "softmax" if n_outputs > 1 else "sigmoid"
        return layers.Dense(n_outputs, activation=activation, kernel_initializer=self.init())

    def model(self, stack: list[Any], name: str) -> Any:
        import keras

        return keras.Sequential(stack, name=name)
