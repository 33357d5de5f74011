"""The evaluate stage's work: the task's test scores and the model's compiled metrics, per-class and per-group rows,
the confusion matrix (classification) or predicted against actual (regression), and the predictions.

The saved model is reloaded with the custom layers and loss of the team's modules (model.builder's, a
"module:function" train.loss), compiled again as train compiled it, and scored by the library's one scoring
(`tracking.training.scoring.score_model`), as every calibration repeat is. Resumes the MLflow run that `train`
opened (the run of the training `outputs/run.json` records: tracking/store/recorded.py) and finishes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tracking.config.params import Params
from tracking.data.arrays import Arrays, columns
from tracking.data.dataset import load_split
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.errors import RunStateError
from tracking.layout import (
    CONFUSION,
    EVAL_METRICS,
    EVALUATE,
    MODEL,
    PREDICTIONS,
    PREPARE,
    PREPARED,
    PROBABILITIES,
    RUN_FILE,
    TRAIN,
)
from tracking.provenance.dvc import gather_dvc
from tracking.run.tracker import Tracker
from tracking.store.location import open_client, project_root, tracking_uri
from tracking.store.recorded import read_run_file, train_run_id
from tracking.training.model import load_trained_model
from tracking.training.scoring import score_model
from tracking.training.task_scores import flat_metrics, summary_metrics


def evaluate_model(params: Params) -> None:
    """Score the trained model on the test split, write the stage's outputs and finish the train stage's MLflow run.
    Call it before TensorFlow is imported (it sets the process up for determinism first)."""
    seeds = reproducible_process(params)
    root = project_root()
    for path in (RUN_FILE, MODEL):
        if not (root / path).is_file():
            raise RunStateError(f"{path} not found; run the train stage first (`dvc repro train`)")
    manifest = Manifest.read(root / PREPARED)
    test = load_split(root / PREPARED, "test")  # before the store, so the start-up line tells the two apart
    run_id = train_run_id(open_client(root), root, read_run_file(root), tracking_uri(root))
    task, n_outputs = manifest.task, manifest.n_outputs
    with Tracker(params.mlflow.experiment, root, run_id=run_id, stage=EVALUATE) as tracker:
        seed_frameworks(params, seeds)
        model = load_trained_model(root / MODEL, params, root)
        result = score_model(model, seeds, test, task, n_outputs)
        metrics = summary_metrics(result)
        write_outputs(root, metrics, result, test["y"])
        tracker.log_metrics({key: value for key, value in flat_metrics(metrics).items() if np.isfinite(value)})
        tracker.log_dataset(manifest, test["x"], test["y"], location=root / PREPARED, context="evaluation")
        if "confusion" in result:
            tracker.log_json(
                {"matrix": result["confusion"].tolist(), "rows": "actual", "columns": "predicted"},
                "evaluation/confusion_matrix.json",
            )
            tracker.log_figure(confusion_figure(result["confusion"]), "plots/confusion_matrix.png")
        elif "per_label_auc" in result:
            tracker.log_figure(label_figure(result["per_label_auc"]), "plots/auc_per_label.png")
        else:
            actual, found, left_out = comparable_values(test["y"], result)
            if actual.size:
                tracker.log_figure(predicted_figure(actual, found, left_out), "plots/predicted_vs_actual.png")
        tracker.log_artifact(root / PREDICTIONS, "evaluation")
        tracker.log_locked_deps(gather_dvc(root, (PREPARE, TRAIN))["deps"])
    shown = ", ".join(
        f"{name.replace('_', ' ')} {value:.4f}" for name, value in metrics.items() if isinstance(value, float)
    )
    print(f"{shown}; MLflow run {tracker.run_id}")


def write_outputs(root: Path, metrics: dict, result: dict, y: Arrays) -> None:
    """Metrics, predictions (classes, or values shaped like the targets; every output's values per sample for
    several outputs), the class probabilities scored (the model's outputs for regression and several outputs),
    and the pairs DVC plots (of the first target value per sample)."""
    for path in (EVAL_METRICS, CONFUSION, PREDICTIONS):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    predicted = result["predicted"]
    classes = predicted.dtype.kind in "biu"  # class labels, or multi-hot rows of 0 and 1
    np.save(root / PREDICTIONS, predicted.astype("int64" if classes else "float32"))
    np.save(root / PROBABILITIES, np.asarray(result.get("probabilities", result["outputs"])).astype("float32"))
    cast, y = (int if classes else float), columns(y)
    pairs = [
        {"actual": cast(a), "predicted": cast(p)}
        for a, p in zip(y.reshape(len(y), -1)[:, 0], predicted.reshape(len(y), -1)[:, 0], strict=False)
    ]
    (root / CONFUSION).write_text(json.dumps(pairs) + "\n")
    (root / EVAL_METRICS).write_text(json.dumps(metrics, indent=2) + "\n")


def comparable_values(y: Arrays, result: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The test targets and the predictions that stand for them, value for value, flat: regression's, or, for a
    model of several outputs, those outputs whose values match their targets one to one; the outputs left out
    (class scores per pixel against a mask's labels, say) by name."""
    if not isinstance(y, Mapping):
        return columns(y).ravel(), np.asarray(result["predicted"]).ravel(), []
    drawn = {name: result["by_output"][name] for name in y if result["by_output"][name].size == y[name].size}
    left_out = [name for name in y if name not in drawn]
    actual = [np.asarray(y[name], dtype=np.float64).ravel() for name in drawn]
    found = [np.asarray(value, dtype=np.float64).ravel() for value in drawn.values()]
    return np.concatenate(actual or [np.empty(0)]), np.concatenate(found or [np.empty(0)]), left_out


def predicted_figure(actual: np.ndarray, found: np.ndarray, left_out: list[str]) -> Any:
    """Predicted against actual test targets, every target value one point, the outputs not drawn named in the
    title (a pyplot-free figure)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5, 4.5), layout="tight")
    axis = figure.subplots()
    axis.scatter(actual, found, s=8)
    low, high = float(min(actual.min(), found.min())), float(max(actual.max(), found.max()))
    axis.plot([low, high], [low, high], color="gray", linestyle="--", linewidth=1)
    axis.set_xlabel("actual")
    axis.set_ylabel("predicted")
    axis.set_title("test predictions" + (f" (not drawn: {', '.join(left_out)})" if left_out else ""), fontsize=9)
    return figure


def label_figure(per_label_auc: dict[str, float]) -> Any:
    """Each label's test ROC AUC as a bar (a multi-label model; a pyplot-free figure)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(4, 0.4 * len(per_label_auc) + 1.5), 4), layout="tight")
    axis = figure.subplots()
    axis.bar(list(per_label_auc), [0.0 if np.isnan(v) else v for v in per_label_auc.values()])
    axis.axhline(0.5, color="gray", linestyle="--", linewidth=1)
    axis.set_ylim(0, 1)
    axis.set_xlabel("label")
    axis.set_ylabel("test ROC AUC")
    axis.set_title("test AUC per label (0 where the test set holds one value)")
    return figure


def confusion_figure(confusion: np.ndarray) -> Any:
    """The confusion matrix as a heat map with counts (a pyplot-free figure)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5, 4.5), layout="tight")
    axis = figure.subplots()
    image = axis.imshow(confusion, cmap="Blues")
    for (row, col), count in np.ndenumerate(confusion):
        axis.text(col, row, str(count), ha="center", va="center", fontsize=7)
    axis.set_xlabel("predicted")
    axis.set_ylabel("actual")
    axis.set_title("test confusion matrix")
    figure.colorbar(image)
    return figure
