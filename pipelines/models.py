"""Model builders; every initializer, dropout and augmentation layer gets its own seed from `Seeds`."""

from __future__ import annotations

from typing import Any

from tracking.params import ModelParams
from tracking.seeds import Seeds


def build_model(model: ModelParams, input_shape: tuple[int, ...], n_classes: int, seeds: Seeds, augment: bool) -> Any:
    """`small_cnn` or `mlp` as named by `model.name`, with augmentation layers in front when `augment`."""
    import keras
    from keras import layers

    counter = iter(range(1_000))

    def init() -> keras.initializers.Initializer:
        return keras.initializers.GlorotUniform(seed=seeds.init + next(counter))

    def dropout(index: int) -> layers.Layer:
        return layers.Dropout(model.dropout, seed=seeds.dropout + index)

    stack: list[layers.Layer] = [keras.Input(input_shape)]
    if augment:
        stack += [layers.RandomTranslation(0.125, 0.125, fill_mode="constant", seed=seeds.augment),
                  layers.RandomRotation(0.04, fill_mode="constant", seed=seeds.augment + 1)]
    if model.name == "small_cnn":
        for filters in model.filters:
            stack += [layers.Conv2D(filters, 3, padding="same", use_bias=not model.batch_norm, kernel_initializer=init())]
            stack += [layers.BatchNormalization()] if model.batch_norm else []
            stack += [layers.ReLU(), layers.MaxPooling2D(2, padding="same")]
        stack += [layers.Flatten(), layers.Dense(model.dense_units, activation="relu", kernel_initializer=init())]
        stack += [dropout(0)] if model.dropout > 0 else []
    else:
        stack += [layers.Flatten()]
        for index, units in enumerate(model.hidden_units):
            stack += [layers.Dense(units, use_bias=not model.batch_norm, kernel_initializer=init())]
            stack += [layers.BatchNormalization()] if model.batch_norm else []
            stack += [layers.ReLU()]
            stack += [dropout(index)] if model.dropout > 0 else []
    stack += [layers.Dense(n_classes, activation="softmax", kernel_initializer=init())]
    return keras.Sequential(stack, name=model.name)


def make_optimizer(name: str, learning_rate: float) -> Any:
    import keras

    optimizers = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD, "rmsprop": keras.optimizers.RMSprop}
    return optimizers[name](learning_rate=learning_rate)
