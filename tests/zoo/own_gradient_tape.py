"""A team's own train.py with a training loop of its own (`tf.GradientTape`, no `fit`), through `tracking.start`.

Ported from keras-io, "Writing a training loop from scratch in TensorFlow" by François Chollet (keras-team/keras-io,
guides/writing_a_training_loop_from_scratch.py): https://keras.io/guides/writing_a_training_loop_from_scratch/.
Kept as written: the model of `get_model()` (two ReLU `Dense` layers and a `predictions` layer of logits), Adam,
`SparseCategoricalCrossentropy(from_logits=True)`, `SparseCategoricalAccuracy` for training and validation, and the
`@tf.function` `train_step` and `test_step` with the optimizer outside the model (`optimizer.apply`). Shrunk to
scikit-learn's 8x8 digits (64 features, not MNIST's 784), layers of 16 units (not 64), 2 epochs. Added: the
`# tracking` lines; the batches come from `run.batches` (drawn from `seeds.shuffle`) instead of the guide's
`tf.data` shuffle, each epoch's metrics are logged with `step=epoch`, and the outputs are declared logits.
"""

import json
import math

import keras
import numpy as np
import tensorflow as tf
import yaml
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import tracking  # tracking

with open("params.yaml") as handle:
    params = yaml.safe_load(handle)
run = tracking.start(seeds={"base": "train.seed"})  # tracking


def get_model():
    inputs = keras.Input(shape=(64,), name="digits")
    x1 = keras.layers.Dense(16, activation="relu")(inputs)
    x2 = keras.layers.Dense(16, activation="relu")(x1)
    outputs = keras.layers.Dense(10, name="predictions")(x2)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


digits = load_digits()
x = (digits.data / 16).astype("float32")
x_train, x_val, y_train, y_val = train_test_split(x, digits.target, test_size=0.2, random_state=0)
run.log_data(x_train, y_train)  # tracking

model = run.seeded(get_model())  # tracking
optimizer = keras.optimizers.Adam(learning_rate=params["train"]["learning_rate"])
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
val_acc_metric = keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    train_acc_metric.update_state(y, logits)
    return loss_value


@tf.function
def test_step(x, y):
    val_logits = model(x, training=False)
    val_acc_metric.update_state(y, val_logits)


batch_size, epochs = params["train"]["batch_size"], params["train"]["epochs"]
steps = math.ceil(len(y_train) / batch_size)
batches = iter(run.batches(x_train, y_train, batch_size, epochs))  # tracking
for epoch in range(epochs):
    for _ in range(steps):
        x_batch_train, y_batch_train = next(batches)
        loss_value = train_step(x_batch_train, y_batch_train)
    for start in range(0, len(y_val), batch_size):
        test_step(x_val[start : start + batch_size], y_val[start : start + batch_size])
    metrics = {"loss": float(loss_value), "accuracy": float(train_acc_metric.result())}
    metrics["val_accuracy"] = float(val_acc_metric.result())
    run.log_metrics(metrics, step=epoch)  # tracking
    train_acc_metric.reset_state()
    val_acc_metric.reset_state()

scores = {"test_accuracy": float(np.mean(np.argmax(model.predict(x_val, verbose=0), axis=1) == y_val))}
run.log_metrics(scores)  # tracking
scores["weights_sha256"] = run.log_model(model, outputs="logits")  # tracking
with open("metrics.json", "w") as handle:
    json.dump(scores, handle, indent=2)
