"""A U-Net-like segmenter: per-pixel class labels, one softmax per pixel.

Ported from keras-io, "Image segmentation with a U-Net-like architecture" by François Chollet
(keras-team/keras-io, examples/vision/oxford_pets_image_segmentation.py):
https://keras.io/examples/vision/oxford_pets_image_segmentation/. Kept as written: `get_model(img_size,
num_classes)`: an entry `Conv2D(32, 3, strides=2)`, `BatchNormalization`, `relu`; downsampling blocks of
`SeparableConv2D`, `BatchNormalization`, `MaxPooling2D(3, strides=2)` with a strided 1x1 residual; upsampling
blocks of `Conv2DTranspose`, `UpSampling2D(2)` with an upsampled residual; a per-pixel
`Conv2D(num_classes, 3, activation="softmax", padding="same")`; trained with `sparse_categorical_crossentropy`
on integer masks (the task's default loss for `data.task: classification` with labels of shape (16, 16)).

Adapted: the Oxford-IIIT pets (a download) are 16x16 pictures drawn here, a bright square (class 1) and a dim
disc (class 2) on a noisy background (class 0), their masks the pixels of each; the filters (32, 64, 128, 256) are
(8, 16) and (16, 8), the image 160x160 is 16x16.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

img_size = (16, 16)
num_classes = 3


def load(n=240):
    rng = np.random.default_rng(48)
    rows, cols = np.mgrid[: img_size[0], : img_size[1]]
    images = rng.normal(0.0, 0.1, size=(n, *img_size, 1)).astype("float32")
    masks = np.zeros((n, *img_size), dtype="int64")
    for index in range(n):
        top, left = rng.integers(0, 10, size=2)
        square = (rows >= top) & (rows < top + 5) & (cols >= left) & (cols < left + 5)
        centre = rng.integers(3, 13, size=2)
        disc = (rows - centre[0]) ** 2 + (cols - centre[1]) ** 2 <= 6
        masks[index][disc & ~square] = 2
        masks[index][square] = 1
        images[index, ..., 0] += 1.0 * square + 0.5 * (disc & ~square)
    return {"x": images, "y": masks}


def build(input_shape, n_outputs):
    inputs = keras.Input(shape=input_shape)

    ### [First half of the network: downsampling inputs] ###

    # Entry block
    x = layers.Conv2D(8, 3, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    previous_block_activation = x  # Set aside residual

    # Blocks 1, 2, 3 are identical apart from the feature depth.
    for filters in [16]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)

        # Project residual
        residual = layers.Conv2D(filters, 1, strides=2, padding="same")(previous_block_activation)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    ### [Second half of the network: upsampling inputs] ###

    for filters in [16, 8]:
        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.UpSampling2D(2)(x)

        # Project residual
        residual = layers.UpSampling2D(2)(previous_block_activation)
        residual = layers.Conv2D(filters, 1, padding="same")(residual)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    # Add a per-pixel classification layer
    outputs = layers.Conv2D(n_outputs, 3, activation="softmax", padding="same")(x)

    # Define the model
    model = keras.Model(inputs, outputs)
    return model
