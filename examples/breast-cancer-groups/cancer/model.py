"""The team's classifier, named in params.yaml as `model.builder`: plain Keras, seeded by the pipeline.

One sigmoid output (the probability of malignant), so the task's default loss is binary cross-entropy and
Keras's AUC metric reads it directly. The loader standardises the features.
"""

from __future__ import annotations

import keras
from keras import layers


def build(input_shape: tuple[int, ...], n_outputs: int, width: int = 16, dropout: float = 0.2) -> keras.Model:
    """One dense+ReLU layer of `width` units with dropout, then P(malignant)."""
    return keras.Sequential(
        [
            keras.Input(input_shape),
            layers.Dense(width, activation="relu"),
            layers.Dropout(dropout),
            layers.Dense(1, activation="sigmoid"),
        ],
        name="cancer_net",
    )
