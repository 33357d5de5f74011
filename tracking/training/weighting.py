"""The weight of each training sample: the data's `sample_weight` times its class's `train.class_weight`.

Keras's `fit(class_weight=...)` refuses generators and refuses `sample_weight` beside it, so the class weights
are applied here, as per-sample weights of the training batches, on every backend and every path that trains
(the train stage, calibration repeats local and on Ray, candidate runs, rerun, the audit). Validation and the
test scores are not class-weighted, as in Keras, where `class_weight` weights training alone.
"""

from __future__ import annotations

import numpy as np

from tracking.config.params import BALANCED, TrainParams
from tracking.errors import ParamsError


def class_weights(train_params: TrainParams, y: np.ndarray) -> np.ndarray | None:
    """Each class label's weight (indexed by label), or None without `train.class_weight`. A class the mapping
    leaves out weighs 1.0 (as in Keras); `balanced` gives a class n / (K * its count) over the labels present in
    `y` (scikit-learn's rule)."""
    chosen = train_params.class_weight
    if chosen is None:
        return None
    if y.ndim != 1:
        raise ParamsError(
            f"train.class_weight weights one class label per sample, and the labels have shape {y.shape[1:]} per "
            "sample (a label per pixel or step); set it null, or weigh the classes in a loss of your own (train.loss)"
        )
    counts = np.bincount(y)
    if chosen == BALANCED:
        present = np.count_nonzero(counts)
        return np.divide(len(y), present * counts, out=np.zeros(len(counts)), where=counts > 0)
    weights = np.ones(max(len(counts), max(chosen) + 1))
    for label, weight in chosen.items():
        weights[label] = weight
    return weights


def training_weights(train_params: TrainParams, train: dict[str, np.ndarray]) -> np.ndarray | None:
    """The per-sample weights `fit` trains with: the split's `sample_weight`, multiplied by each sample's class
    weight where `train.class_weight` is set (float32); None where neither is given."""
    sample_weight = train.get("sample_weight")
    by_class = class_weights(train_params, train["y"])
    if by_class is None:
        return sample_weight
    weights = by_class[train["y"]]
    return (weights if sample_weight is None else weights * sample_weight).astype(np.float32)
