"""DVC stage `evaluate`: test loss and accuracy, per-class accuracy, confusion matrix, predictions.

Resumes the MLflow run that `train` opened (its id comes through `outputs/run.json`) and finishes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.scoring import flat_metrics, scores
from pipelines.train import MODEL, RUN_FILE
from tracking.dataset import PREPARED, load_split, read_manifest
from tracking.errors import RunStateError
from tracking.params import load_params
from tracking.process import reproducible_process, seed_frameworks
from tracking.provenance import to_tags
from tracking.provenance.dvc import gather_dvc
from tracking.stage import run_main
from tracking.store import project_root
from tracking.tracker import Tracker

EVAL_METRICS = Path("metrics/eval.json")
CONFUSION = Path("plots/confusion.json")
PREDICTIONS = Path("outputs/predictions.npy")
PROBABILITIES = Path("outputs/probabilities.npy")


def main() -> None:
    params = load_params()
    seeds = reproducible_process(params)
    root = project_root()
    for path in (RUN_FILE, MODEL):
        if not (root / path).is_file():
            raise RunStateError(f"{path} not found; run the train stage first (`dvc repro train`)")
    run = json.loads((root / RUN_FILE).read_text())
    manifest = read_manifest(root / PREPARED)
    test = load_split(root / PREPARED, "test")
    with Tracker(params.mlflow.experiment, root, run_id=run["run_id"], stage="evaluate") as tracker:
        import keras

        seed_frameworks(params, seeds)
        model = keras.models.load_model(root / MODEL)
        probabilities = model.predict(test["x"], batch_size=512, verbose=0)
        result = scores(test["y"], probabilities, manifest["n_classes"], test.get("groups"))
        metrics = {key: result[key] for key in ("test_accuracy", "test_loss", "per_class_accuracy", "per_group") if key in result}
        write_outputs(root, metrics, result, probabilities, test["y"])
        tracker.log_metrics({key: value for key, value in flat_metrics(result).items() if np.isfinite(value)})
        tracker.log_dataset(manifest, test["x"], test["y"], location=root / PREPARED, context="evaluation")
        tracker.log_json({"matrix": result["confusion"].tolist(), "rows": "actual", "columns": "predicted"},
                         "evaluation/confusion_matrix.json")
        tracker.log_figure(confusion_figure(result["confusion"]), "plots/confusion_matrix.png")
        tracker.log_artifact(root / PREDICTIONS, "evaluation")
        tracker.set_tags(to_tags({"dvc": {"deps": gather_dvc(root, ("prepare", "train"))["deps"]}}))
    print(f"test accuracy {metrics['test_accuracy']:.4f}, loss {metrics['test_loss']:.4f}; MLflow run {tracker.run_id}")


def write_outputs(root: Path, metrics: dict, result: dict, probabilities: np.ndarray, y: np.ndarray) -> None:
    for path in (EVAL_METRICS, CONFUSION, PREDICTIONS):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    np.save(root / PREDICTIONS, result["predicted"].astype("int64"))
    np.save(root / PROBABILITIES, probabilities.astype("float32"))
    pairs = [{"actual": int(a), "predicted": int(p)} for a, p in zip(y, result["predicted"])]
    (root / CONFUSION).write_text(json.dumps(pairs) + "\n")
    (root / EVAL_METRICS).write_text(json.dumps(metrics, indent=2) + "\n")


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


if __name__ == "__main__":
    run_main(main)
