"""A Siamese network over pairs of images (two named inputs), trained with its own contrastive loss.

Ported from keras-io, "Image similarity estimation using a Siamese Network with a contrastive loss" by Mehdi
(keras-team/keras-io, examples/vision/siamese_contrastive.py): https://keras.io/examples/vision/siamese_contrastive/.
Kept as written: `euclidean_distance` of the two towers' embeddings in a `Lambda`; the shared `embedding_network`
(BatchNormalization, Conv2D(4, tanh), AveragePooling2D, Conv2D(16, tanh), AveragePooling2D, Flatten,
BatchNormalization, Dense(10, tanh)); the merge, BatchNormalization and `Dense(1, sigmoid)` head; `loss(margin)`
returning `contrastive_loss`, `(1 - y_true) * square_pred + y_true * margin_square`, compiled as
`train.loss: models.siamese:contrastive_loss` (the module's `loss(margin=1)`); pairs labelled as the example's
`make_pairs` labels them, 0 for two images of one digit, 1 for two digits.

Adapted: the pairs come from scikit-learn's 8x8 digits (MNIST is a download), so the kernels 5x5 become 3x3 and
2x2; the model's two inputs are named, `left` and `right`, and the loader returns `x` as a dict of them (the
example passes a list `[x_1, x_2]`); `euclidean_distance` is registered with
`keras.saving.register_keras_serializable`, the fix Keras asks for to reload a `Lambda` over a named function (the
example never reloads its model); the optimizer is the pipeline's (`train.optimizer`), not RMSprop; `y_true` is
cast to the predictions' dtype, as the labels are integers here.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops


def load(n=240):
    from sklearn import datasets

    digits = datasets.load_digits()
    images, labels = (digits.images / 16.0).astype("float32")[..., None], digits.target
    rng = np.random.default_rng(3)
    first = rng.choice(len(labels), n, replace=False)
    same = np.arange(n) % 2 == 0
    second = np.array(
        [rng.choice(np.flatnonzero((labels == labels[i]) == match)) for i, match in zip(first, same, strict=True)]
    )
    return {"x": {"left": images[first], "right": images[second]}, "y": np.where(same, 0, 1)}


@keras.saving.register_keras_serializable(package="siamese")
def euclidean_distance(vects):
    x, y = vects
    sum_square = ops.sum(ops.square(x - y), axis=1, keepdims=True)
    return ops.sqrt(ops.maximum(sum_square, keras.backend.epsilon()))


def loss(margin=1):
    def contrastive_loss(y_true, y_pred):
        y_true = ops.cast(y_true, y_pred.dtype)
        square_pred = ops.square(y_pred)
        margin_square = ops.square(ops.maximum(margin - (y_pred), 0))
        return ops.mean((1 - y_true) * square_pred + (y_true) * margin_square)

    return contrastive_loss


contrastive_loss = loss(margin=1)


def build(input_shape, n_outputs):
    shape = input_shape["left"]
    inputs = keras.layers.Input(shape)
    x = keras.layers.BatchNormalization()(inputs)
    x = keras.layers.Conv2D(4, (3, 3), activation="tanh")(x)
    x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Conv2D(16, (2, 2), activation="tanh")(x)
    x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Dense(10, activation="tanh")(x)
    embedding_network = keras.Model(inputs, x)

    input_1 = keras.layers.Input(shape, name="left")
    input_2 = keras.layers.Input(shape, name="right")
    tower_1 = embedding_network(input_1)
    tower_2 = embedding_network(input_2)
    merge_layer = keras.layers.Lambda(euclidean_distance, output_shape=(1,))([tower_1, tower_2])
    normal_layer = keras.layers.BatchNormalization()(merge_layer)
    output_layer = keras.layers.Dense(1, activation="sigmoid")(normal_layer)
    return keras.Model(inputs={"left": input_1, "right": input_2}, outputs=output_layer)
