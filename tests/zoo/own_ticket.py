"""A team's own train.py: a model of three named inputs and two named outputs, trained through `tracking.start`.

Ported from keras-io, "The Functional API" guide by François Chollet (keras-team/keras-io,
guides/functional_api.py), section "Models with multiple inputs and outputs": https://keras.io/guides/functional_api/.
Kept as written: the ticket-ranking model (inputs `title`, `body`, `tags`; an `Embedding` and an `LSTM` per text
input; outputs `priority` and `department`), compiled with a loss per output by name (`from_logits=True`) and
`loss_weights`, fit on dicts of arrays keyed by the input and output names. Shrunk to run in seconds: 10 words
(not 10,000), embeddings of 8 (not 64), LSTMs of 8 and 4 units (not 128 and 32), 32 random samples (as the guide's
are), 2 epochs. Added: the `# tracking` lines, the seed from params.yaml, and the declared outputs (logits).
"""

import keras
import numpy as np
import yaml
from keras import layers

import tracking  # tracking

with open("params.yaml") as handle:
    params = yaml.safe_load(handle)
run = tracking.start(seeds={"base": "train.seed"})  # tracking

num_tags = 12  # Number of unique issue tags
num_words = 10  # Size of vocabulary obtained when preprocessing text data
num_departments = 4  # Number of departments for predictions

title_input = keras.Input(shape=(None,), name="title")  # Variable-length sequence of ints
body_input = keras.Input(shape=(None,), name="body")  # Variable-length sequence of ints
tags_input = keras.Input(shape=(num_tags,), name="tags")  # Binary vectors of size `num_tags`
title_features = layers.Embedding(num_words, 8)(title_input)
body_features = layers.Embedding(num_words, 8)(body_input)
title_features = layers.LSTM(8)(title_features)
body_features = layers.LSTM(4)(body_features)
x = layers.concatenate([title_features, body_features, tags_input])
priority_pred = layers.Dense(1, name="priority")(x)
department_pred = layers.Dense(num_departments, name="department")(x)
model = keras.Model(
    inputs=[title_input, body_input, tags_input],
    outputs={"priority": priority_pred, "department": department_pred},
)
model = run.seeded(model)  # tracking

model.compile(
    optimizer=keras.optimizers.RMSprop(1e-3),
    loss={
        "priority": keras.losses.BinaryCrossentropy(from_logits=True),
        "department": keras.losses.CategoricalCrossentropy(from_logits=True),
    },
    loss_weights={"priority": 1.0, "department": 0.2},
)

rng = np.random.default_rng(params["data"]["seed"])
title_data = rng.integers(0, num_words, size=(32, 10))
body_data = rng.integers(0, num_words, size=(32, 20))
tags_data = rng.integers(0, 2, size=(32, num_tags)).astype("float32")
priority_targets = rng.random(size=(32, 1))
dept_targets = rng.integers(0, 2, size=(32, num_departments))
inputs = {"title": title_data, "body": body_data, "tags": tags_data}
targets = {"priority": priority_targets, "department": dept_targets}
run.log_data(inputs, targets)  # tracking

history = model.fit(inputs, targets, epochs=params["train"]["epochs"], batch_size=16, callbacks=[run.callback()])
run.log_metrics({"final_loss": history.history["loss"][-1]})  # tracking
run.log_model(model, outputs="logits")  # tracking
