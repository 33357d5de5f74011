"""Test-set scores shared by the evaluate and calibrate stages, so both judge a model the same way.

Its own module, so stages do not import each other and both depend on this file in dvc.yaml.

Classification: `test_accuracy`, `test_loss` (cross-entropy from the model's probabilities), per-class
accuracy, for two classes `test_auc`; the model gives K softmax probabilities or, for binary, one sigmoid
column (predicted class: p >= 0.5). Regression: `test_loss` (mean squared error), `test_mae`, `test_rmse`,
`test_r2`. Per-group rows for either task (FPR and FNR for binary). The model's compiled metrics, as
`model.evaluate` gives them, are added as `test_<name>` unless one of the above already has that name (the
compiled loss is not: `test_loss` is the task's own, computed the same way for every run).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracking.config.params import CLASSIFICATION
from tracking.errors import UserCodeError


def class_probabilities(outputs: np.ndarray, n_classes: int) -> np.ndarray:
    """(N, K) class probabilities from the model's outputs: K columns, or one sigmoid column for binary."""
    outputs = np.asarray(outputs)  # its own dtype: the default model's float32 losses stay as they were
    if outputs.ndim == 2 and outputs.shape[1] == n_classes:
        return outputs
    if n_classes == 2 and outputs.reshape(len(outputs), -1).shape[1] == 1:
        positive = outputs.reshape(-1)
        return np.stack([1.0 - positive, positive], axis=1)
    raise UserCodeError(
        f"model.builder: the model outputs shape {outputs.shape[1:]} per sample but the data has {n_classes} "
        f"classes; return {n_classes} softmax outputs" + (" or one sigmoid output" if n_classes == 2 else "")
    )


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
) -> dict[str, Any]:
    """The task's scores of the model's test `outputs`, its predictions, and the compiled metrics beside them."""
    result = (
        classification_scores(y, class_probabilities(outputs, n_outputs), n_outputs, groups)
        if task == CLASSIFICATION
        else regression_scores(y, regression_outputs(outputs, y), groups)
    )
    result["compiled"] = {
        f"test_{name}": float(value)
        for name, value in (compiled or {}).items()
        if name != "loss" and f"test_{name}" not in result
    }
    return result


def classification_scores(
    y: np.ndarray, probabilities: np.ndarray, n_classes: int, groups: np.ndarray | None
) -> dict[str, Any]:
    """Loss, accuracy, per-class accuracy, AUC for binary, per-group metrics and the confusion matrix (rows: actual)."""
    predicted = probabilities.argmax(axis=1)
    picked = np.clip(probabilities[np.arange(len(y)), y], 1e-7, 1.0)
    confusion = np.zeros((n_classes, n_classes), dtype=int)
    np.add.at(confusion, (y, predicted), 1)
    support = confusion.sum(axis=1)
    per_class = {str(k): float(confusion[k, k] / support[k]) if support[k] else float("nan") for k in range(n_classes)}
    result = {
        "test_loss": float(-np.log(picked).mean()),
        "test_accuracy": float((predicted == y).mean()),
        "per_class_accuracy": per_class,
        "confusion": confusion,
        "predicted": predicted,
    }
    if n_classes == 2:
        result["test_auc"] = binary_auc(y, probabilities[:, 1])
    if groups is not None:
        result["per_group"] = group_scores(y, predicted, groups, n_classes)
    return result


def binary_auc(y: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC of the positive-class probabilities (NaN when the test set holds one class only)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, positive)) if len(np.unique(y)) == 2 else float("nan")


def regression_scores(y: np.ndarray, predicted: np.ndarray, groups: np.ndarray | None) -> dict[str, Any]:
    """Mean squared error (the loss), MAE, RMSE and R² over every target value, and the MAE of each group."""
    error = predicted.astype(np.float64) - y.astype(np.float64)
    mse = float(np.mean(error**2))
    variance = float(np.var(y.astype(np.float64)))
    result = {
        "test_loss": mse,
        "test_mae": float(np.mean(np.abs(error))),
        "test_rmse": float(np.sqrt(mse)),
        "test_r2": 1.0 - mse / variance if variance > 0 else float("nan"),
        "predicted": predicted,
    }
    if groups is not None:
        result["per_group"] = {
            str(group): {"mae": float(np.mean(np.abs(error[groups == group])))} for group in np.unique(groups)
        }
    return result


def group_scores(
    y: np.ndarray, predicted: np.ndarray, groups: np.ndarray, n_classes: int
) -> dict[str, dict[str, float]]:
    """Accuracy of each sub-group; with two classes also its FPR and FNR (class 1 is the positive class)."""
    found = {}
    for group in np.unique(groups):
        member = groups == group
        row = {"accuracy": float((predicted[member] == y[member]).mean())}
        if n_classes == 2:
            negative, positive = member & (y == 0), member & (y == 1)
            row["fpr"] = float((predicted[negative] == 1).mean()) if negative.any() else float("nan")
            row["fnr"] = float((predicted[positive] == 0).mean()) if positive.any() else float("nan")
        found[str(group)] = row
    return found


def summary_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """What metrics/eval.json holds: the task's scalar scores, per-class and per-group rows, the compiled metrics."""
    scalar = {key: value for key, value in result.items() if key.startswith("test_")}
    nested = {key: result[key] for key in ("per_class_accuracy", "per_group") if key in result}
    return {**scalar, **nested, **result.get("compiled", {})}


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """One name per number, as logged to MLflow and banded by calibration: test_accuracy_class_3, test_group_a_fpr."""
    flat = {key: float(value) for key, value in summary.items() if key.startswith("test_")}
    flat.update({f"test_accuracy_class_{k}": v for k, v in summary.get("per_class_accuracy", {}).items()})
    for group, row in summary.get("per_group", {}).items():
        flat.update({f"test_group_{group}_{name}": value for name, value in row.items()})
    return flat
