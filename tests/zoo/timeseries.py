"""Weather forecasting from a `timeseries_dataset_from_array` input pipeline: the loader returns a tf.data dataset.

Ported from keras-io, "Timeseries forecasting for weather prediction" by Prabhjot Singh Gogana and Sumit Batra
(keras-team/keras-io, examples/timeseries/timeseries_weather_forecasting.py):
https://keras.io/examples/timeseries/timeseries_weather_forecasting/. Kept as written: features normalised by
the training part's mean and std (`normalize`); `keras.utils.timeseries_dataset_from_array(x_train, y_train,
sequence_length=sequence_length, sampling_rate=step, batch_size=batch_size)` with targets `past + future`
steps ahead; the model `Input((sequence_length, n_features))`, `LSTM(32)`, `Dense(1)`, trained with "mse".

Adapted: the Jena climate record (a download) is a series of 3 features drawn here (a daily cycle, a slower one
and noise), the target the first feature; the dataset is the loader's return value (`data.loader`), which the
prepare stage reads once into arrays; `past` 720 and `future` 72 hours sampled every 6 are 24 and 6 steps sampled
every 2; `LSTM(32)` is `LSTM(8)`; `batch_size` 256 is 32.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

split_fraction = 0.715
step = 2
past = 24
future = 6
batch_size = 32


def normalize(data, train_split):
    data_mean = data[:train_split].mean(axis=0)
    data_std = data[:train_split].std(axis=0)
    return (data - data_mean) / data_std


def load(n=600):
    rng = np.random.default_rng(48)
    t = np.arange(n, dtype="float64")
    features = np.stack(
        [np.sin(2 * np.pi * t / 24), np.cos(2 * np.pi * t / 100), rng.normal(0, 0.3, n)], axis=1
    ) + rng.normal(0, 0.05, (n, 3))
    features = normalize(features, int(split_fraction * n)).astype("float32")
    start = past + future
    sequence_length = int(past / step)
    x = features[: n - start]
    y = features[start:, :1]
    return keras.utils.timeseries_dataset_from_array(
        x, y, sequence_length=sequence_length, sampling_rate=step, batch_size=batch_size
    )


def build(input_shape, n_outputs):
    inputs = layers.Input(shape=input_shape)
    lstm_out = layers.LSTM(8)(inputs)
    outputs = layers.Dense(n_outputs)(lstm_out)
    return keras.Model(inputs=inputs, outputs=outputs)
