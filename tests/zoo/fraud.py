"""An imbalanced binary classifier trained with class weights (`train.class_weight`).

Ported from keras-io, "Imbalanced classification: credit card fraud detection" by fchollet (keras-team/keras-io,
examples/structured_data/imbalanced_classification.py): https://keras.io/examples/structured_data/imbalanced_classification/.
Kept as written: the `Sequential` of three `Dense` ReLU layers with `Dropout(0.3)` after the second and the third
under one sigmoid output, and the classes weighted by the inverse of their counts, `class_weight={0: 1 / count_0,
1: 1 / count_1}`, here `train.class_weight: balanced` (n / (2 * count): the same ratio, scaled by n / 2).

Adapted: the example standardises the features with the training split's mean and standard deviation; `load`
standardises over all samples, since the split is the prepare stage's. Shrunk: the widths 256 become 16. The
example reads the Kaggle card data (284,807 transactions, 492 frauds: a download), so `load` draws 600
transactions of 30 features, 5% fraud, whose frauds are shifted along four features.
"""

from __future__ import annotations

import keras
import numpy as np


def load(n=600, fraud_fraction=0.05, features=30):
    rng = np.random.default_rng(11)
    y = (np.arange(n) % round(1 / fraud_fraction) == 0).astype("int64")
    x = rng.normal(0, 1, (n, features))
    x[:, :4] += 1.5 * y[:, None]
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return {"x": x.astype("float32"), "y": y}


def build(input_shape, n_outputs, units=16):
    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Dense(units, activation="relu"),
            keras.layers.Dense(units, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(units, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
