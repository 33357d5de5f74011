"""The built-in model builders, `pipelines.models:small_cnn`, `small_resnet` and `mlp`, builders like a team's own.

Each is `build(input_shape, n_outputs, **kwargs)` returning an uncompiled `keras.Model`, and seeds nothing
itself: the training core seeds every initializer, dropout and augmentation layer by its position
(`tracking.determinism.seeding`). Each checks its own kwargs and says in one line what it expects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracking import CLASSIFICATION, REGRESSION, UserCodeError

CNN_BLOCKS = 3  # conv blocks of small_cnn: three 2x2 poolings take 8x8 digits down to 1x1


def small_cnn(
    input_shape: tuple[int, ...],
    n_outputs: int,
    task: str = CLASSIFICATION,
    filters: Sequence[int] = (32, 64, 128),
    dense_units: int = 128,
    batch_norm: bool = False,
    dropout: float = 0.2,
    augment: bool = False,
) -> Any:
    """Conv+ReLU+max-pool blocks, one per entry of `filters`, then a dense layer, dropout and the output. Images
    of shape (height, width) get their channel axis from the model's first layer (a `Reshape` the saved model
    shows), not from the data."""
    from keras import layers

    _expect_widths("filters", filters, CNN_BLOCKS)
    _expect_positive("dense_units", dense_units)
    if len(input_shape) == 1:  # a table's rows: the template's default builder, where `mlp` is the one that fits
        raise UserCodeError(
            f"model.builder: pipelines.models:small_cnn takes images, and each row of the data is {input_shape[0]} "
            "features",
            fix="set `model.builder: pipelines.models:mlp` in params.yaml (a dense network for a table of features; "
            "docs/configuration.md#a-csv-table)",
        )
    if len(input_shape) not in (2, 3):
        raise ValueError(
            f"small_cnn takes images of shape (height, width) or (height, width, channels), got {input_shape}; "
            "use a builder of your own for other ranks"
        )
    stack = _inputs(input_shape, augment)
    if len(input_shape) == 2:
        stack.insert(1, layers.Reshape((*input_shape, 1)))
    for width in filters:
        stack += [layers.Conv2D(width, 3, padding="same", use_bias=not batch_norm)]
        stack += [layers.BatchNormalization()] if batch_norm else []
        stack += [layers.ReLU(), layers.MaxPooling2D(2, padding="same")]
    stack += [layers.Flatten(), layers.Dense(dense_units, activation="relu")]
    stack += [layers.Dropout(dropout)] if dropout > 0 else []
    return _model([*stack, _output(n_outputs, task)], "small_cnn")


def small_resnet(
    input_shape: tuple[int, ...],
    n_outputs: int,
    task: str = CLASSIFICATION,
    filters: Sequence[int] = (16, 32, 64),
    blocks: int = 1,
    augment: bool = False,
) -> Any:
    """A small ResNet (He et al. 2016): a stem convolution, then per entry of `filters` a stage of `blocks`
    residual blocks (conv-BN-ReLU-conv-BN plus the shortcut, a 1x1 convolution where the width changes), each
    stage after the first halving the resolution, then global average pooling and the output."""
    import keras
    from keras import layers

    _expect_widths("filters", filters, None)
    _expect_positive("blocks", blocks)
    if len(input_shape) != 3:
        raise ValueError(f"small_resnet takes images of shape (height, width, channels), got {input_shape}")
    stack = _inputs(input_shape, augment)
    x = stack[0]
    for layer in stack[1:]:
        x = layer(x)
    x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(filters[0], 3, padding="same", use_bias=False)(x)))
    for stage, width in enumerate(filters):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            shortcut = x
            y = layers.Conv2D(width, 3, strides=stride, padding="same", use_bias=False)(x)
            y = layers.ReLU()(layers.BatchNormalization()(y))
            y = layers.BatchNormalization()(layers.Conv2D(width, 3, padding="same", use_bias=False)(y))
            if stride != 1 or shortcut.shape[-1] != width:
                shortcut = layers.Conv2D(width, 1, strides=stride, use_bias=False)(shortcut)
            x = layers.ReLU()(layers.Add()([y, shortcut]))
    outputs = _output(n_outputs, task)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(stack[0], outputs, name="small_resnet")


def mlp(
    input_shape: tuple[int, ...],
    n_outputs: int,
    task: str = CLASSIFICATION,
    hidden_units: Sequence[int] = (64,),
    batch_norm: bool = False,
    dropout: float = 0.2,
    augment: bool = False,
) -> Any:
    """Flatten, then a dense+ReLU layer (with dropout) per entry of `hidden_units`, then the output."""
    from keras import layers

    _expect_widths("hidden_units", hidden_units, None)
    stack = [*_inputs(input_shape, augment), layers.Flatten()]
    for units in hidden_units:
        stack += [layers.Dense(units, use_bias=not batch_norm)]
        stack += [layers.BatchNormalization()] if batch_norm else []
        stack += [layers.ReLU()]
        stack += [layers.Dropout(dropout)] if dropout > 0 else []
    return _model([*stack, _output(n_outputs, task)], "mlp")


def _expect_widths(name: str, widths: Any, count: int | None) -> None:
    """A ValueError (shown as a model.kwargs error line) unless `widths` is a list of `count` (or, with None, one
    or more) positive integers."""
    if (
        not isinstance(widths, (list, tuple))
        or not widths
        or (count is not None and len(widths) != count)
        or not all(_positive_int(width) for width in widths)
    ):
        raise ValueError(f"{name}: expected a list of {count or 'one or more'} positive integers, got {widths!r}")


def _expect_positive(name: str, value: Any) -> None:
    if not _positive_int(value):
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _inputs(input_shape: tuple[int, ...], augment: bool) -> list[Any]:
    import keras
    from keras import layers

    stack = [keras.Input(input_shape)]
    if augment:
        stack += [
            layers.RandomTranslation(0.125, 0.125, fill_mode="constant"),
            layers.RandomRotation(0.04, fill_mode="constant"),
        ]
    return stack


def _output(n_outputs: int, task: str) -> Any:
    """Class probabilities (softmax; a sigmoid for one output) or, for regression, linear values."""
    from keras import layers

    activation = "linear" if task == REGRESSION else "softmax" if n_outputs > 1 else "sigmoid"
    return layers.Dense(n_outputs, activation=activation)


def _model(stack: list[Any], name: str) -> Any:
    import keras

    return keras.Sequential(stack, name=name)
