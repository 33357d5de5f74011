"""The task's scores from arrays of labels or targets and the model's probabilities or values: classification's
loss, accuracy, per-class accuracy, binary AUC, mean IoU and confusion matrix; multi-label's cross-entropy, subset
accuracy, hamming loss and per-label AUC; regression's MSE, MAE, RMSE and R²; per-group rows; and the summary and
flat names they are written and logged under. They know nothing of models: tracking/training/scoring.py runs the
model and hands them its outputs."""

from __future__ import annotations

from typing import Any

import numpy as np

# The probability at or above which a label of multi-hot rows is predicted present.
LABEL_THRESHOLD = 0.5


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


def mean_iou(confusion: np.ndarray) -> float:
    """The mean over classes of intersection over union (a class's right labels over the labels that are it or
    were taken for it), from the confusion matrix; classes neither present nor predicted are left out."""
    right = np.diag(confusion).astype(np.float64)
    union = confusion.sum(axis=0) + confusion.sum(axis=1) - right
    return float(np.mean(right[union > 0] / union[union > 0])) if (union > 0).any() else float("nan")


def multilabel_scores(y: np.ndarray, probabilities: np.ndarray, groups: np.ndarray | None) -> dict[str, Any]:
    """Multi-hot rows scored: the mean binary cross-entropy over every label (Keras's, clipped at 1e-7), subset
    accuracy, hamming loss, each label's ROC AUC and their mean, per group the subset accuracy and hamming loss."""
    predicted = (probabilities >= LABEL_THRESHOLD).astype(np.int64)
    clipped = np.clip(probabilities.astype(np.float64), 1e-7, 1 - 1e-7)
    per_label_auc = {str(k): binary_auc(y[:, k], probabilities[:, k]) for k in range(y.shape[1])}
    finite = [value for value in per_label_auc.values() if np.isfinite(value)]
    wrong = predicted != y
    result = {
        "test_loss": float(-(y * np.log(clipped) + (1 - y) * np.log(1 - clipped)).mean()),
        "test_subset_accuracy": float((~wrong).all(axis=1).mean()),
        "test_hamming_loss": float(wrong.mean()),
        "test_auc": float(np.mean(finite)) if finite else float("nan"),
        "per_label_auc": per_label_auc,
        "predicted": predicted,
    }
    if groups is not None:
        result["per_group"] = {
            str(group): {
                "subset_accuracy": float((~wrong[groups == group]).all(axis=1).mean()),
                "hamming_loss": float(wrong[groups == group].mean()),
            }
            for group in np.unique(groups)
        }
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
    nested = {key: result[key] for key in ("per_class_accuracy", "per_label_auc", "per_group") if key in result}
    return {**scalar, **nested, **result.get("compiled", {})}


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """One name per number, as logged to MLflow and banded by calibration: test_accuracy_class_3, test_auc_label_2,
    test_group_a_fpr."""
    flat = {key: float(value) for key, value in summary.items() if key.startswith("test_")}
    flat.update({f"test_accuracy_class_{k}": v for k, v in summary.get("per_class_accuracy", {}).items()})
    flat.update({f"test_auc_label_{k}": v for k, v in summary.get("per_label_auc", {}).items()})
    for group, row in summary.get("per_group", {}).items():
        flat.update({f"test_group_{group}_{name}": value for name, value in row.items()})
    return flat
