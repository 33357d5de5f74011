"""A `keras.applications` network trained from scratch (`weights=None`) behind image-augmentation layers.

Ported from keras-io, "Image classification via fine-tuning with EfficientNet" by Yixing Fu (keras-team/keras-io,
examples/vision/image_classification_efficientnet_fine_tuning.py), section "Training a model from scratch":
https://keras.io/examples/vision/image_classification_efficientnet_fine_tuning/. Kept as written: the
`img_augmentation` layers (RandomRotation(0.15), RandomTranslation(0.1, 0.1), RandomFlip(), RandomContrast(0.1))
in front of `EfficientNetB0(include_top=True, weights=None, classes=NUM_CLASSES)`, called on the inputs as the
example's `inputs = layers.Input(...); x = img_augmentation(inputs); outputs = EfficientNetB0(...)(x)` did,
compiled with adam and cross-entropy.

Shrunk and adapted for 8x8 one-channel digits on a CPU: the network is `MobileNet(alpha=0.25)`, one of the
smallest `keras.applications` networks (EfficientNetB0 has 4 million weights and took 30 s an epoch here), built as
the example builds its network, `include_top=True, weights=None, classes=n_outputs`, with its top's dropout set
to the example's `top_dropout_rate` 0.2; the digits are resized to 32x32 (the smallest input MobileNet accepts)
and repeated to 3 channels; the labels are integers (sparse cross-entropy, the pipeline's default), not one-hot.
"""

from __future__ import annotations

import keras
from keras import layers


def img_augmentation(images):
    for layer in [
        layers.RandomRotation(factor=0.15),
        layers.RandomTranslation(height_factor=0.1, width_factor=0.1),
        layers.RandomFlip(),
        layers.RandomContrast(factor=0.1),
    ]:
        images = layer(images)
    return images


def build(input_shape, n_outputs, image_size=32, alpha=0.25, top_dropout_rate=0.2):
    inputs = layers.Input(shape=input_shape)
    x = img_augmentation(inputs)
    x = layers.Resizing(image_size, image_size)(x)
    x = layers.Concatenate()([x, x, x]) if input_shape[-1] == 1 else x
    outputs = keras.applications.MobileNet(
        input_shape=(image_size, image_size, 3),
        alpha=alpha,
        dropout=top_dropout_rate,
        include_top=True,
        weights=None,
        classes=n_outputs,
    )(x)
    return keras.Model(inputs, outputs)
