"""Structured data classification with `keras.utils.FeatureSpace`: a dict of integer, string and float features.

Ported from keras-io, "Structured data classification with FeatureSpace" by François Chollet
(keras-team/keras-io, examples/structured_data/structured_data_classification_with_feature_space.py):
https://keras.io/examples/structured_data/structured_data_classification_with_feature_space/. Kept as written: the
`FeatureSpace` of the Cleveland heart-disease columns (`sex`, `cp`, `fbs`, `restecg`, `exang`, `ca` integer
categorical, `thal` string categorical, `age` discretized, `trestbps`, `chol`, `thalach`, `oldpeak`, `slope`
float normalized; crosses `sex` x `age` and `thal` x `ca`; `output_mode="concat"`), adapted to the training
features; `Dense(32, relu)`, `Dropout(0.5)`, `Dense(1, sigmoid)` on the encoded features; the inference model
`keras.Model(inputs=dict_inputs, outputs=predictions)` is the one trained here, so the saved model takes the raw
features.

Adapted: the heart-disease CSV (a download) is 300 rows drawn here, the target depending on `thal`, `cp` and
`age`; the feature space is adapted by the builder to the training split (its `train` parameter) rather than
to a tf.data dataset of the whole CSV; `crossing_dim` 32 and 8 are 8 and 4.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras.utils import FeatureSpace

integers = {"sex": 2, "cp": 4, "fbs": 2, "restecg": 3, "exang": 2, "ca": 4}
floats = ("trestbps", "chol", "thalach", "oldpeak", "slope")


def load(n=300):
    rng = np.random.default_rng(48)
    x = {name: rng.integers(0, count, size=n).astype("int64") for name, count in integers.items()}
    x["thal"] = rng.choice(np.asarray(["normal", "fixed", "reversible"]), size=n)
    x["age"] = rng.normal(54, 9, size=n).astype("float32")
    x.update({name: rng.normal(0, 1, size=n).astype("float32") for name in floats})
    score = (x["thal"] == "reversible") + (x["cp"] >= 2) + (x["age"] > 58) + rng.normal(0, 0.5, size=n)
    return {"x": x, "y": (score > 1).astype("int64")}


def build(input_shape, n_outputs, train):
    feature_space = FeatureSpace(
        features={
            # Categorical features encoded as integers
            "sex": FeatureSpace.integer_categorical(num_oov_indices=0),
            "cp": FeatureSpace.integer_categorical(num_oov_indices=0),
            "fbs": FeatureSpace.integer_categorical(num_oov_indices=0),
            "restecg": FeatureSpace.integer_categorical(num_oov_indices=0),
            "exang": FeatureSpace.integer_categorical(num_oov_indices=0),
            "ca": FeatureSpace.integer_categorical(num_oov_indices=0),
            # Categorical feature encoded as string
            "thal": FeatureSpace.string_categorical(num_oov_indices=0),
            # Numerical features to discretize
            "age": FeatureSpace.float_discretized(num_bins=30),
            # Numerical features to normalize
            "trestbps": FeatureSpace.float_normalized(),
            "chol": FeatureSpace.float_normalized(),
            "thalach": FeatureSpace.float_normalized(),
            "oldpeak": FeatureSpace.float_normalized(),
            "slope": FeatureSpace.float_normalized(),
        },
        # Specify feature cross with a custom crossing dim.
        crosses=[
            FeatureSpace.cross(feature_names=("sex", "age"), crossing_dim=8),
            FeatureSpace.cross(feature_names=("thal", "ca"), crossing_dim=4),
        ],
        output_mode="concat",
    )
    train_ds_with_no_labels = tf.data.Dataset.from_tensor_slices(dict(train["x"])).batch(32)
    feature_space.adapt(train_ds_with_no_labels)

    dict_inputs = feature_space.get_inputs()
    encoded_features = feature_space.get_encoded_features()

    x = keras.layers.Dense(32, activation="relu")(encoded_features)
    x = keras.layers.Dropout(0.5)(x)
    predictions = keras.layers.Dense(1, activation="sigmoid")(x)

    return keras.Model(inputs=dict_inputs, outputs=predictions)
