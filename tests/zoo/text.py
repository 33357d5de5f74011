"""Text classification from raw strings: a `TextVectorization` layer inside the model, adapted to the training text.

Ported from keras-io, "Text classification from scratch" by Mark Omernick and Francois Chollet
(keras-team/keras-io, examples/nlp/text_classification_from_scratch.py):
https://keras.io/examples/nlp/text_classification_from_scratch/. Kept as written: `TextVectorization(
standardize=custom_standardization, max_tokens=max_features, output_mode="int",
output_sequence_length=sequence_length)` adapted on the training text, and the model of "Build a model": an
`Embedding`, Dropout(0.5), two `Conv1D(128, 7, padding="valid", activation="relu", strides=3)`,
`GlobalMaxPooling1D`, `Dense(128, relu)`, Dropout(0.5) and a `Dense(1, sigmoid)` "predictions" layer, trained
with binary cross-entropy and adam (the pipeline's defaults for one sigmoid output); the string-in model of
"Make an end-to-end model", `inputs = keras.Input(shape=(1,), dtype="string")`, vectorized inside.

Adapted: the IMDB reviews (a download) are short sentences that `load` writes from two small vocabularies, one
per sentiment, so the data are a `(n,)` array of strings, one review per sample; `custom_standardization` is
registered (`keras.saving.register_keras_serializable`) so the saved model reloads with it; the vectorizer is
adapted in the builder, which receives the training split (`train`), and is the model's first layer rather than
a `text_ds.map` (the example's "option" of vectorizing inside the model), so the input is `(None,)` strings;
shrunk: `max_features` 20000 -> 64, `embedding_dim` 128 -> 8, `sequence_length` 500 -> 16, the Conv1D widths
128 -> 8 with kernels 7 -> 3 and strides 3 -> 1, the hidden `Dense` 128 -> 8.
"""

from __future__ import annotations

import re
import string

import keras
import numpy as np
import tensorflow as tf
from keras import layers

POSITIVE = ["great", "loved", "wonderful", "moving", "brilliant", "fun", "superb", "charming"]
NEGATIVE = ["awful", "boring", "dull", "hated", "weak", "bland", "tedious", "poor"]
FILLER = ["the", "film", "was", "a", "plot", "and", "acting", "<br />", "story", "really", "quite", "ending"]


def load(n=240, words=10):
    rng = np.random.default_rng(11)
    labels = np.arange(n) % 2
    reviews = []
    for label in labels:
        mood = POSITIVE if label else NEGATIVE
        picks = [rng.choice(mood) if rng.random() < 0.3 else rng.choice(FILLER) for _ in range(words)]
        reviews.append(" ".join(picks).capitalize() + ".")
    return {"x": np.asarray(reviews, dtype=str), "y": labels}


@keras.saving.register_keras_serializable(package="text")
def custom_standardization(input_data):
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, f"[{re.escape(string.punctuation)}]", "")


def build(input_shape, n_outputs, train, max_features=64, embedding_dim=8, sequence_length=16, width=8):
    vectorize_layer = keras.layers.TextVectorization(
        standardize=custom_standardization,
        max_tokens=max_features,
        output_mode="int",
        output_sequence_length=sequence_length,
    )
    vectorize_layer.adapt(np.array(train["x"]))

    inputs = keras.Input(shape=input_shape, dtype="string")
    indices = vectorize_layer(inputs)
    x = layers.Embedding(max_features, embedding_dim)(indices)
    x = layers.Dropout(0.5)(x)
    x = layers.Conv1D(width, 3, padding="valid", activation="relu", strides=1)(x)
    x = layers.Conv1D(width, 3, padding="valid", activation="relu", strides=1)(x)
    x = layers.GlobalMaxPooling1D()(x)
    x = layers.Dense(width, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
    return keras.Model(inputs, predictions)
