"""Test-set scores: the one way every model is scored, the candidate (by evaluate) and each calibration repeat alike.

`score_model` runs the model on the test set in the scoring batches, from its generators' inference state
(tracking/determinism/seeding.py), so a layer that draws at inference draws the same numbers wherever it is scored.

Classification: `test_accuracy`, the cross-entropy from the model's probabilities, per-class accuracy, for two
classes `test_auc`; the model gives K softmax probabilities or, for binary, one sigmoid column (predicted class:
p >= 0.5). Labels of their own shape per sample (a mask's pixels, a sequence's steps) are scored label by label
(`test_accuracy` is then the pixel or step accuracy, the confusion matrix counts labels) and add `test_mean_iou`,
the mean over classes of intersection over union. Multi-label (`data.task: multilabel`, multi-hot rows): the mean
binary cross-entropy over every label, `test_subset_accuracy` (every label of a sample right),
`test_hamming_loss` (the fraction of label decisions wrong, at p >= 0.5), and `test_auc`, the mean of each
label's ROC AUC (`test_auc_label_<k>`). A model compiled with a `from_logits=True` loss outputs logits: they are turned into probabilities
(softmax, or sigmoid for one column) before scoring, and the run records it (`prov.model.outputs`); outputs that
are neither are an error, never a silently wrong loss. Regression: the mean squared error, `test_mae`,
`test_rmse`, `test_r2`. Per-group rows for either task (FPR and FNR for binary).

`test_loss` is the loss the team compiled, on the test split. Where that is the task's own loss (`train.loss`
null: cross-entropy, or mean squared error) and `model.evaluate` reports it (`SAME_LOSS`), it is computed here
from the outputs (the same bits for every run), and is the cross-entropy or MSE above; any other loss (a
contrastive loss, label smoothing, MAE), or a loss `evaluate` reports beyond the task's (a VAE's `test_step` adding
its reconstruction and KL terms, a layer's regularization), is `model.evaluate`'s value, and the task's score
stays beside it as `test_crossentropy` or `test_mse`. The model's compiled metrics, as `model.evaluate` gives them, are added as
`test_<name>` unless one of the above already has that name.

Several outputs (the data's `y` a dict keyed by output names): `test_loss` is the compiled total as
`model.evaluate` reports it (each output's loss times its `train.loss_weights` weight, summed), each output's
loss and metrics are beside it under Keras's names (`test_<output>_loss`, `test_<output>_<metric>`), and the
task's standard scores are not computed: an output's targets need not be the task's labels or values (keras-io's
ticket model has soft priorities and multi-hot departments), so its compiled metrics are its scores. Its
predictions are every output's values per sample, outputs in the order of their names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tracking.config.params import CLASSIFICATION, MULTILABEL, REGRESSION
from tracking.data.arrays import Arrays, columns
from tracking.determinism.seeding import inference_streams
from tracking.determinism.seeds import Seeds
from tracking.errors import UserCodeError
from tracking.training.batches import SCORING_BATCH, in_batches
from tracking.training.compiling import task_loss
from tracking.training.task_scores import classification_scores, mean_iou, multilabel_scores, regression_scores

# The task's own loss under its own name, where `test_loss` is another loss the team compiled.
STANDARD_LOSS = {CLASSIFICATION: "test_crossentropy", REGRESSION: "test_mse", MULTILABEL: "test_crossentropy"}

# What a classifier's outputs are (`prov.model.outputs`): probabilities as they are, or logits turned into them;
# a model of several outputs is scored by its compiled losses and metrics alone.
PROBABILITIES, LOGITS, COMPILED = "probabilities", "logits", "compiled"
# How close `model.evaluate`'s loss and the task's loss computed here are where both are the same loss: float32
# batches against a float64 mean, Keras's clipping at 1e-7 against ours (about 1e-6 apart); a `test_step` that adds
# terms to the compiled loss, or a regularized layer, is further apart, and `test_loss` is then evaluate's.
SAME_LOSS = {"rel_tol": 1e-4, "abs_tol": 1e-6}
# How far outputs may stray from probabilities (float32 rounding of a softmax) before they are taken for something else.
PROBABILITY_TOLERANCE = 1e-3


# How much a class-score loss may move when every score is shifted by `LOGIT_SHIFT` and still be read as taking logits.
LOGIT_SHIFT, SHIFT_TOLERANCE = 4.0, 1e-4


def declared_output_kind(model: Any) -> str | None:
    """What a classifier's compiled loss says its outputs are, without looking at them: a Keras loss object's
    `from_logits`; `PROBABILITIES` for a loss named by string or none (Keras's named losses read probabilities);
    None for a loss function of the team's own, which only its outputs can tell (`output_kind`)."""
    loss = getattr(model, "loss", None)
    config = loss.get_config() if callable(getattr(loss, "get_config", None)) else None
    if isinstance(config, dict) and "from_logits" in config:
        return LOGITS if config["from_logits"] else PROBABILITIES
    return None if callable(loss) else PROBABILITIES


def output_kind(model: Any, y: np.ndarray, outputs: np.ndarray) -> str:
    """`LOGITS` when the model is compiled with a loss that reads logits, else `PROBABILITIES`.

    A Keras loss object says so (`from_logits`). A team's loss function (keras-io's CCT wraps
    `categorical_crossentropy(..., from_logits=True, label_smoothing=0.1)`) is asked on `outputs` of several
    classes: a softmax is unchanged when every score moves by the same amount, so a loss of logits is too, and a
    loss of probabilities is not. A model compiled without a loss computes its own (keras-io's `Distiller`, whose
    `compile` takes `student_loss_fn` instead): its outputs are probabilities where every row is a distribution,
    else logits.
    """
    if getattr(model, "compiled", False) and getattr(model, "loss", None) is None:
        scores = np.asarray(outputs, dtype=np.float32)
        return PROBABILITIES if _are_probabilities(scores) else LOGITS
    declared = declared_output_kind(model)
    if declared is not None:
        return declared
    loss = model.loss
    scores = np.asarray(outputs, dtype=np.float32)
    if scores.ndim != 2 or scores.shape[1] < 2:
        return PROBABILITIES
    import keras

    try:
        plain, shifted = (
            float(np.mean(keras.ops.convert_to_numpy(loss(y, z)))) for z in (scores, scores + LOGIT_SHIFT)
        )
    except Exception:  # a loss that takes no plain arrays: leave it to the probability check
        return PROBABILITIES
    return LOGITS if abs(plain - shifted) <= SHIFT_TOLERANCE * max(1.0, abs(plain)) else PROBABILITIES


def task_output_kind(model: Any, task: str, y: np.ndarray, outputs: np.ndarray) -> str:
    """What a model of one output gives for `task`: a classifier's probabilities or logits (`output_kind`); a
    multi-label model's, as its compiled loss declares them (a sigmoid's are not moved by a shift of every score,
    so only the declaration tells); `PROBABILITIES` (values, unchanged) for regression."""
    if task == CLASSIFICATION:
        return output_kind(model, y, outputs)
    if task == MULTILABEL:
        return declared_output_kind(model) or PROBABILITIES
    return PROBABILITIES


def score_model(
    model: Any, seeds: Seeds, test: dict[str, Arrays], task: str, n_outputs: int | dict[str, int]
) -> dict[str, Any]:
    """Score `model` on `test`: its outputs in scoring batches (generators at their inference state), its compiled
    metrics, and the task's scores of them; the result's `outputs` are what the model gave, `probabilities` the
    class probabilities scored (classification)."""
    inference_streams(model, seeds)
    outputs = model.predict(in_batches(test["x"], SCORING_BATCH), verbose=0)
    inference_streams(model, seeds)  # the compiled loss and metrics of the same draws as `outputs`
    compiled = model.evaluate(in_batches((test["x"], test["y"]), SCORING_BATCH), verbose=0, return_dict=True)
    if isinstance(test["y"], Mapping):
        return several_outputs_scores(test["y"], by_output(model, outputs), compiled)
    kind = task_output_kind(model, task, test["y"], outputs)
    own = getattr(model, "loss", None) == task_loss(model, task)
    result = scores(test["y"], outputs, task, n_outputs, test.get("groups"), compiled, kind, own)
    return {**result, "outputs": np.asarray(outputs)}


def by_output(model: Any, outputs: Any) -> dict[str, np.ndarray]:
    """What `predict` gave a model of several outputs (a dict, or a list in the order of its output names), by
    output name."""
    if isinstance(outputs, Mapping):
        return {name: np.asarray(value) for name, value in outputs.items()}
    return {name: np.asarray(value) for name, value in zip(model.output_names, outputs, strict=True)}


def several_outputs_scores(
    y: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray], compiled: dict[str, float]
) -> dict[str, Any]:
    """A model of several outputs scored as compiled: `test_loss` the total `model.evaluate` reports, each
    output's loss and metrics as `test_<output>_loss` and `test_<output>_<metric>`; its predictions every output's
    values per sample (float32), outputs in the order of the targets' names."""
    values = columns({name: outputs[name] for name in y}).astype(np.float32)
    return {
        "test_loss": float(compiled["loss"]),
        "compiled": {f"test_{name}": float(value) for name, value in compiled.items() if name != "loss"},
        "predicted": values,
        "outputs": values,
        "by_output": {name: np.asarray(outputs[name]) for name in y},
    }


def per_label(outputs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The model's outputs one row per label of `y`: (N, C) as they are for one label per sample, (N * E, C) for E
    labels per sample (a (16, 16) mask's 256 pixels from outputs (N, 16, 16, C)); a `UserCodeError` where the
    outputs do not give each label the same number of scores."""
    outputs = np.asarray(outputs)
    if y.ndim == 1:
        return outputs
    if outputs.shape[: y.ndim] != y.shape or outputs.ndim > y.ndim + 1:
        raise UserCodeError(
            f"model.builder: the model outputs shape {outputs.shape[1:]} per sample but the labels have shape "
            f"{y.shape[1:]}; give class scores per label, shape {(*y.shape[1:], 'n_classes')} (e.g. a "
            "Conv2D(n_classes, 1, activation='softmax') last layer for a mask)"
        )
    return outputs.reshape(y.size, -1)


def label_probabilities(outputs: np.ndarray, y: np.ndarray, n_classes: int, task: str, kind: str) -> np.ndarray:
    """The probabilities a classifier (`class_probabilities`, a row per label of `y`) or a multi-label model
    (`multi_hot_probabilities`) gives; a `UserCodeError` when its outputs are neither probabilities nor logits."""
    if task == MULTILABEL:
        return multi_hot_probabilities(outputs, n_classes, kind)
    return class_probabilities(per_label(outputs, y), n_classes, kind)


def multi_hot_probabilities(outputs: np.ndarray, n_labels: int, kind: str = PROBABILITIES) -> np.ndarray:
    """(N, L) probabilities of each label from a multi-label model's outputs: sigmoids as they are, logits through a
    sigmoid; outputs of another shape, or outside [0, 1], are a `UserCodeError`."""
    outputs = np.asarray(outputs)
    if outputs.shape[1:] != (n_labels,):
        raise UserCodeError(
            f"model.builder: the model outputs shape {outputs.shape[1:]} per sample but the data has {n_labels} "
            f"labels per sample (data.task multilabel); return Dense({n_labels}, activation='sigmoid')"
        )
    if kind == LOGITS:
        return _sigmoid(outputs)
    low, high = float(np.min(outputs)), float(np.max(outputs))
    if not np.isfinite(outputs).all() or low < -PROBABILITY_TOLERANCE or high > 1 + PROBABILITY_TOLERANCE:
        raise UserCodeError(
            f"model.builder: the model's outputs are not probabilities (values from {low:.4g} to {high:.4g}), so no "
            "loss can be scored from them; end the model in a sigmoid per label (data.task multilabel), or train "
            "it with a loss that reads logits (keras.losses.BinaryCrossentropy(from_logits=True))"
        )
    return outputs


def class_probabilities(outputs: np.ndarray, n_classes: int, kind: str = PROBABILITIES) -> np.ndarray:
    """(N, K) class probabilities from the model's outputs: K columns, or one sigmoid column for binary; logits
    (`kind` LOGITS) through a softmax or sigmoid first. Outputs that are not probabilities are a `UserCodeError`."""
    outputs = np.asarray(outputs)  # its own dtype: the default model's float32 losses stay as they were
    if outputs.ndim == 2 and outputs.shape[1] == n_classes:
        return _softmax(outputs) if kind == LOGITS else _probabilities(outputs)
    if n_classes == 2 and outputs.reshape(len(outputs), -1).shape[1] == 1:
        positive = outputs.reshape(-1)
        positive = _sigmoid(positive) if kind == LOGITS else _probabilities(positive)
        return np.stack([1.0 - positive, positive], axis=1)
    raise UserCodeError(
        f"model.builder: the model outputs shape {outputs.shape[1:]} per sample but the data has {n_classes} "
        f"classes; return {n_classes} softmax outputs" + (" or one sigmoid output" if n_classes == 2 else "")
    )


def _are_probabilities(outputs: np.ndarray) -> bool:
    """Whether `outputs` are probabilities: in [0, 1], rows summing to 1 for several columns."""
    low, high = float(np.min(outputs)), float(np.max(outputs))
    sums = outputs.sum(axis=1) if outputs.ndim == 2 else np.ones(1)
    return bool(
        np.isfinite(outputs).all()
        and low >= -PROBABILITY_TOLERANCE
        and high <= 1 + PROBABILITY_TOLERANCE
        and np.abs(sums - 1).max() <= PROBABILITY_TOLERANCE
    )


def _probabilities(outputs: np.ndarray) -> np.ndarray:
    """`outputs` as they are, if they are probabilities (in [0, 1]; rows summing to 1 for several columns)."""
    if _are_probabilities(outputs):
        return outputs
    low, high = float(np.min(outputs)), float(np.max(outputs))
    sums = outputs.sum(axis=1) if outputs.ndim == 2 else np.ones(1)
    spread = f"values from {low:.4g} to {high:.4g}" + (
        f", rows summing to {sums.min():.4g} to {sums.max():.4g}" if outputs.ndim == 2 else ""
    )
    raise UserCodeError(
        f"model.builder: the model's outputs are not probabilities ({spread}), so no loss or accuracy can be "
        "scored from them; end the model in a softmax (a sigmoid for one output), or train it with a loss that "
        "reads logits (train.loss naming e.g. keras.losses.SparseCategoricalCrossentropy(from_logits=True)), "
        "which makes the scores apply the softmax"
    )


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-logits))


def regression_outputs(outputs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The model's outputs shaped like the targets `y` (a (N, 1) output for 1-D targets is flattened)."""
    outputs = np.asarray(outputs)
    if outputs.size != y.size:
        raise UserCodeError(
            f"model.builder: the model outputs shape {outputs.shape[1:]} per sample but the targets have "
            f"shape {y.shape[1:] or (1,)}; make the last layer give one value per target"
        )
    return outputs.reshape(y.shape)


def scores(
    y: np.ndarray,
    outputs: np.ndarray,
    task: str,
    n_outputs: int,
    groups: np.ndarray | None = None,
    compiled: dict[str, float] | None = None,
    kind: str = PROBABILITIES,
    task_loss_compiled: bool = True,
) -> dict[str, Any]:
    """The task's scores of the model's test `outputs` (`kind`: probabilities or logits), its predictions, and the
    compiled metrics beside them; unless the model was compiled with the task's own loss (`task_loss_compiled`)
    and `evaluate` reports that loss (`SAME_LOSS`), `test_loss` is the compiled loss and the task's is
    `STANDARD_LOSS[task]`."""
    if task == CLASSIFICATION:
        labels = y.reshape(-1)
        probabilities = label_probabilities(outputs, y, n_outputs, task, kind)
        each = None if groups is None else np.repeat(groups, labels.size // len(y))  # a sample's group per label
        result = classification_scores(labels, probabilities, n_outputs, each)
        one_column = np.asarray(outputs).reshape(labels.size, -1).shape[1] == 1
        laid_out = probabilities[:, 1:] if one_column else probabilities  # laid out as the outputs
        result["probabilities"] = laid_out if y.ndim == 1 else laid_out.reshape(*y.shape, -1)
        if y.ndim > 1:
            result["predicted"] = result["predicted"].reshape(y.shape)
            result["test_mean_iou"] = mean_iou(result["confusion"])
    elif task == MULTILABEL:
        probabilities = label_probabilities(outputs, y, n_outputs, task, kind)
        result = {**multilabel_scores(y, probabilities, groups), "probabilities": probabilities}
    else:
        result = regression_scores(y, regression_outputs(outputs, y), groups)
    evaluated = float(compiled["loss"]) if compiled and "loss" in compiled else None
    if evaluated is not None and not (task_loss_compiled and math.isclose(result["test_loss"], evaluated, **SAME_LOSS)):
        result[STANDARD_LOSS[task]], result["test_loss"] = result["test_loss"], evaluated
    result["compiled"] = {
        f"test_{name}": float(value)
        for name, value in (compiled or {}).items()
        if name != "loss" and f"test_{name}" not in result
    }
    return result
