"""A small CNN trained on digits augmented in the input pipeline (`train.augment`), not in the model.

Ported from TensorFlow's tutorial "Data augmentation" (tensorflow/docs, site/en/tutorials/images/data_augmentation.ipynb):
https://www.tensorflow.org/tutorials/images/data_augmentation, its "Apply augmentation to a dataset" with
`tf.image` stateless random ops: `augment` pads the images, crops them back at a random offset
(`tf.image.stateless_random_crop`) and shifts their brightness (`tf.image.stateless_random_brightness`, under a
seed split from the first with `tf.random.split`), then clips to [0, 1]; it is mapped over the training batches,
keras-io's `dataset.map(augment)` pattern, and given the seed the pipeline draws from `seeds.augment` and the step
(the tutorial's `(seed, seed)` counter). Its model is the tutorial's: `Conv2D` and `MaxPooling2D` blocks, `Flatten`,
a `Dense` ReLU layer and the class scores.

Adapted: the tutorial maps single 180x180 images before batching; here whole batches of 8x8 digits are mapped
(one crop offset per batch), padded to 10x10, and the brightness delta is 0.2. Shrunk: the blocks' 16, 32 and 64
filters become 4 and 8 in two blocks, the `Dense` 128 becomes 16; the output is a softmax (the tutorial's logits
with a `from_logits` loss are covered by other zoo models).
"""

from __future__ import annotations

import keras
import tensorflow as tf


def augment(x, y, seed):
    padded = tf.image.resize_with_crop_or_pad(x, 10, 10)
    x = tf.image.stateless_random_crop(padded, size=tf.shape(x), seed=seed)
    brightness_seed = tf.random.split(seed, num=1)[0, :]
    x = tf.image.stateless_random_brightness(x, max_delta=0.2, seed=brightness_seed)
    return tf.clip_by_value(x, 0, 1), y


def build(input_shape, n_outputs, filters=(4, 8), units=16):
    model = keras.Sequential([keras.Input(shape=input_shape)])
    for width in filters:
        model.add(keras.layers.Conv2D(width, 3, padding="same", activation="relu"))
        model.add(keras.layers.MaxPooling2D())
    model.add(keras.layers.Flatten())
    model.add(keras.layers.Dense(units, activation="relu"))
    model.add(keras.layers.Dense(n_outputs, activation="softmax"))
    return model
