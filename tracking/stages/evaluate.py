"""The evaluate stage's work: the task's test scores and the model's compiled metrics, per-class and per-group rows,
the confusion matrix (classification) or predicted against actual (regression), and the predictions.

The saved model is reloaded with the custom layers and loss of the team's modules (model.builder's, a
"module:function" train.loss), compiled again as train compiled it, and scored by the library's one scoring
(`tracking.training.scoring.score_model`), as every calibration repeat is. Resumes the MLflow run that `train`
opened (its id comes through `outputs/run.json`) and finishes it.
"""

from __future__ import annotations

import json
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
from tracking.provenance import to_tags
from tracking.provenance.dvc import gather_dvc
from tracking.run.tracker import Tracker
from tracking.store.location import project_root
from tracking.store.recorded import read_run_file
from tracking.training.model import load_trained_model
from tracking.training.scoring import flat_metrics, score_model, summary_metrics


def evaluate_model(params: Params) -> None:
    """Score the trained model on the test split, write the stage's outputs and finish the train stage's MLflow run.
    Call it before TensorFlow is imported (it sets the process up for determinism first)."""
    seeds = reproducible_process(params)
    root = project_root()
    for path in (RUN_FILE, MODEL):
        if not (root / path).is_file():
            raise RunStateError(f"{path} not found; run the train stage first (`dvc repro train`)")
    run = read_run_file(root)
    manifest = Manifest.read(root / PREPARED)
    test = load_split(root / PREPARED, "test")
    task, n_outputs = manifest.task, manifest.n_outputs
    with Tracker(params.mlflow.experiment, root, run_id=run["run_id"], stage=EVALUATE) as tracker:
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
        else:
            tracker.log_figure(
                predicted_figure(columns(test["y"]), result["predicted"]), "plots/predicted_vs_actual.png"
            )
        tracker.log_artifact(root / PREDICTIONS, "evaluation")
        tracker.set_tags(to_tags({"dvc": {"deps": gather_dvc(root, (PREPARE, TRAIN))["deps"]}}))
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
    classes = "confusion" in result
    np.save(root / PREDICTIONS, predicted.astype("int64" if classes else "float32"))
    np.save(root / PROBABILITIES, np.asarray(result.get("probabilities", result["outputs"])).astype("float32"))
    cast, y = (int if classes else float), columns(y)
    pairs = [
        {"actual": cast(a), "predicted": cast(p)}
        for a, p in zip(y.reshape(len(y), -1)[:, 0], predicted.reshape(len(y), -1)[:, 0], strict=False)
    ]
    (root / CONFUSION).write_text(json.dumps(pairs) + "\n")
    (root / EVAL_METRICS).write_text(json.dumps(metrics, indent=2) + "\n")


def predicted_figure(y: np.ndarray, predicted: np.ndarray) -> Any:
    """Predicted against actual test targets, every target value one point (a pyplot-free figure)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5, 4.5), layout="tight")
    axis = figure.subplots()
    actual, found = y.ravel(), predicted.ravel()
    axis.scatter(actual, found, s=8)
    low, high = float(min(actual.min(), found.min())), float(max(actual.max(), found.max()))
    axis.plot([low, high], [low, high], color="gray", linestyle="--", linewidth=1)
    axis.set_xlabel("actual")
    axis.set_ylabel("predicted")
    axis.set_title("test predictions")
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
