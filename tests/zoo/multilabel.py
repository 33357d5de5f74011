"""A multi-label text classifier: several subject areas per abstract, one sigmoid per label.

Ported from keras-io, "Large-scale multi-label text classification" by Sayak Paul and Soumik Rakshit
(keras-team/keras-io, examples/nlp/multi_label_classification.py):
https://keras.io/examples/nlp/multi_label_classification/. Kept as written: abstracts made into TF-IDF vectors by
`TextVectorization(max_tokens=..., ngrams=2, output_mode="tf_idf")` adapted to the training abstracts; the
shallow MLP `make_model()`: `Dense(512, relu)`, `Dense(256, relu)`, `Dense(lookup.vocabulary_size(),
activation="sigmoid")`; `binary_crossentropy` and `binary_accuracy` (the defaults of `data.task: multilabel`);
labels as multi-hot rows (the example's `StringLookup(output_mode="multi_hot")`).

Adapted: the arXiv abstracts (a download) are 300 short texts drawn here from a vocabulary of 30 words, where each
of 4 subject areas has 3 words of its own, an abstract carries each area with probability 0.35 (at least one), and
mentions the words of the areas it carries; the vectorizer is a layer of the model (the example maps it over
the tf.data pipeline) so the saved model takes text; 512 and 256 units are 32 and 16; `max_tokens` is 64.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

n_labels = 4
vocabulary = [f"w{index}" for index in range(30)]


def load(n=300):
    rng = np.random.default_rng(48)
    labels = (rng.random((n, n_labels)) < 0.35).astype("int64")
    labels[labels.sum(axis=1) == 0, rng.integers(0, n_labels)] = 1
    texts = []
    for row in labels:
        words = list(rng.choice(vocabulary[3 * n_labels :], size=6))
        for area in np.flatnonzero(row):
            words += list(rng.choice(vocabulary[3 * area : 3 * area + 3], size=2))
        rng.shuffle(words)
        texts.append(" ".join(words))
    return {"x": np.asarray(texts, dtype=str), "y": labels}


def build(input_shape, n_outputs, train):
    text_vectorizer = layers.TextVectorization(max_tokens=64, ngrams=2, output_mode="tf_idf")
    text_vectorizer.adapt(np.asarray(train["x"]))
    inputs = keras.Input(shape=(), dtype="string")
    shallow_mlp_model = keras.Sequential(
        [
            layers.Dense(32, activation="relu"),
            layers.Dense(16, activation="relu"),
            layers.Dense(n_outputs, activation="sigmoid"),
        ]
    )
    return keras.Model(inputs, shallow_mlp_model(text_vectorizer(inputs)))
