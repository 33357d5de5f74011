"""Test-set scores shared by the evaluate and calibrate stages, so both judge a model the same way.

Its own module, so stages do not import each other and both depend on this file in dvc.yaml.
"""

from __future__ import annotations

import numpy as np


def scores(y: np.ndarray, probabilities: np.ndarray, n_classes: int, groups: np.ndarray | None = None) -> dict:
    """Loss, accuracy, per-class accuracy, per-group metrics and the confusion matrix (rows: actual)."""
    predicted = probabilities.argmax(axis=1)
    picked = np.clip(probabilities[np.arange(len(y)), y], 1e-7, 1.0)
    confusion = np.zeros((n_classes, n_classes), dtype=int)
    np.add.at(confusion, (y, predicted), 1)
    support = confusion.sum(axis=1)
    per_class = {str(k): float(confusion[k, k] / support[k]) if support[k] else float("nan") for k in range(n_classes)}
    result = {"test_loss": float(-np.log(picked).mean()), "test_accuracy": float((predicted == y).mean()),
              "per_class_accuracy": per_class, "confusion": confusion, "predicted": predicted}
    if groups is not None:
        result["per_group"] = group_scores(y, predicted, groups, n_classes)
    return result


def group_scores(y: np.ndarray, predicted: np.ndarray, groups: np.ndarray, n_classes: int) -> dict[str, dict[str, float]]:
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


def flat_metrics(result: dict) -> dict[str, float]:
    """One name per number, as logged to MLflow and banded by calibration: test_accuracy_class_3, test_group_a_fpr."""
    flat = {"test_accuracy": result["test_accuracy"], "test_loss": result["test_loss"],
            **{f"test_accuracy_class_{k}": v for k, v in result["per_class_accuracy"].items()}}
    for group, row in result.get("per_group", {}).items():
        flat.update({f"test_group_{group}_{name}": value for name, value in row.items()})
    return flat
