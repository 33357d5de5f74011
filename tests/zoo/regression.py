"""A regression DNN whose `Normalization` layer is adapted to the training features: a builder that needs data.

Ported from TensorFlow's tutorial "Basic regression: Predict fuel efficiency" (tensorflow/docs,
site/en/tutorials/keras/regression.ipynb): https://www.tensorflow.org/tutorials/keras/regression. Kept as written:
`normalizer = Normalization(axis=-1)`, `normalizer.adapt(np.array(train_features))`, and the "Regression with a
deep neural network" model of `build_and_compile_model(norm)`: the normalizer, two `Dense(64, relu)` and a
`Dense(1)`, trained with `loss='mean_absolute_error'` (`train.loss`) and `Adam(0.001)`.

Adapted: the Auto MPG data (a download) is scikit-learn's diabetes set (`data.source: sklearn:diabetes`,
`data.task: regression`); the training features come in as the builder's `train` parameter, the training split
as a read-only {"x", "y"} (the tutorial's `train_features` is a DataFrame in the notebook's scope); compiling is
left to the pipeline; 100 epochs are shrunk to what the test configures.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers


def build(input_shape, n_outputs, train, units=64):
    normalizer = layers.Normalization(axis=-1)
    normalizer.adapt(np.array(train["x"]))
    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            normalizer,
            layers.Dense(units, activation="relu"),
            layers.Dense(units, activation="relu"),
            layers.Dense(n_outputs),
        ]
    )
