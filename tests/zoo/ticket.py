"""A ticket-ranking model of three named inputs and two named outputs, a loss per output and `loss_weights`.

Ported from keras-io, "The Functional API" guide by François Chollet (keras-team/keras-io,
guides/functional_api.py), section "Models with multiple inputs and outputs": https://keras.io/guides/functional_api/.
Kept as written: inputs `title`, `body` (variable-length word ids) and `tags` (binary vectors); an `Embedding` and
an `LSTM` per text input; `concatenate`; outputs `priority` (one logit) and `department` (a logit per department);
compiled with a loss per output reading logits and `loss_weights` `{priority: 1.0, department: 0.2}`, here by
params.yaml (`train.loss: {priority: models.ticket:priority_loss, department: models.ticket:department_loss}`,
`train.loss_weights`), fit on dicts keyed by the input and output names (the loader's `x` and `y`).

Adapted: the losses are the guide's `BinaryCrossentropy(from_logits=True)` and
`CategoricalCrossentropy(from_logits=True)` as functions params.yaml can name; the optimizer is the pipeline's
(`train.optimizer`), not RMSprop. Shrunk to run in seconds: 10 words (not 10,000), embeddings of 8 (not 64),
LSTMs of 8 and 4 units (not 128 and 32), 240 random samples drawn as the guide draws them (not 1,280).
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

num_tags = 12  # Number of unique issue tags
num_words = 10  # Size of vocabulary obtained when preprocessing text data
num_departments = 4  # Number of departments for predictions


def load(n=240):
    rng = np.random.default_rng(5)
    title_data = rng.integers(0, num_words, size=(n, 10))
    body_data = rng.integers(0, num_words, size=(n, 20))
    tags_data = rng.integers(0, 2, size=(n, num_tags)).astype("float32")
    priority_targets = rng.random(size=(n, 1)).astype("float32")
    dept_targets = rng.integers(0, 2, size=(n, num_departments)).astype("float32")
    return {
        "x": {"title": title_data, "body": body_data, "tags": tags_data},
        "y": {"priority": priority_targets, "department": dept_targets},
    }


def priority_loss(y_true, y_pred):
    return keras.losses.binary_crossentropy(y_true, y_pred, from_logits=True)


def department_loss(y_true, y_pred):
    return keras.losses.categorical_crossentropy(y_true, y_pred, from_logits=True)


def build(input_shape, n_outputs):
    title_input = keras.Input(shape=(None,), name="title")  # Variable-length sequence of ints
    body_input = keras.Input(shape=(None,), name="body")  # Variable-length sequence of ints
    tags_input = keras.Input(shape=(num_tags,), name="tags")  # Binary vectors of size `num_tags`
    title_features = layers.Embedding(num_words, 8)(title_input)
    body_features = layers.Embedding(num_words, 8)(body_input)
    title_features = layers.LSTM(8)(title_features)
    body_features = layers.LSTM(4)(body_features)
    x = layers.concatenate([title_features, body_features, tags_input])
    priority_pred = layers.Dense(1, name="priority")(x)
    department_pred = layers.Dense(n_outputs["department"], name="department")(x)
    return keras.Model(
        inputs=[title_input, body_input, tags_input],
        outputs={"priority": priority_pred, "department": department_pred},
    )
