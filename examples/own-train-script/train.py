"""Simple MNIST convnet (keras.io/examples/vision/mnist_convnet), shrunk to scikit-learn's 8x8 digits.

A team's own training script: its own params.yaml keys, its own dvc.yaml. The lines marked `# tracking` are all
it takes to log the run with our provenance, seeds and determinism (README.md shows the diff).
"""

import json

import keras
import numpy as np
import yaml
from keras import layers
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import tracking  # tracking

with open("params.yaml") as handle:
    params = yaml.safe_load(handle)
run = tracking.start(seeds={"base": "train.seed"})  # tracking
num_classes = 10
input_shape = (8, 8, 1)

# Load the data and split it between train and test sets
digits = load_digits()
x = np.expand_dims(digits.images.astype("float32") / 16, -1)
y = keras.utils.to_categorical(digits.target, num_classes)
x_train, x_test, y_train, y_test = train_test_split(
    x, y, test_size=params["data"]["test_size"], random_state=params["data"]["split_seed"]
)
run.log_data(x_train, y_train)  # tracking

# Build the model
model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(params["model"]["filters"], kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(params["model"]["dropout"]),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model = run.seeded(model)  # tracking

# Train the model
batch_size = params["train"]["batch_size"]
epochs = params["train"]["epochs"]
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(
    x_train,
    y_train,
    batch_size=batch_size,
    epochs=epochs,
    validation_split=0.1,
    callbacks=[run.callback()],  # tracking
    verbose=2,
)

# Evaluate the trained model
score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
scores = {"test_loss": score[0], "test_accuracy": score[1]}
run.log_metrics(scores)  # tracking
scores["weights_sha256"] = run.log_model(model)  # tracking
model.save("model.keras")
with open("metrics.json", "w") as handle:
    json.dump(scores, handle, indent=2)
