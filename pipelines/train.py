"""DVC stage `train`: open the pipeline's MLflow run, log params and provenance, train, save the model."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.training import Built, fit_model, prepare_model, require_code_deps, target_shape, with_model
from tracking.config.params import Params, load_params
from tracking.config.project import HISTORY, MODEL, PREPARED, RUN_FILE, TRAIN, TRAIN_METRICS
from tracking.data.dataset import load_splits, output_size, read_manifest
from tracking.data.hashing import weights_sha256
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import EffectiveDeterminism, as_record
from tracking.provenance import capture
from tracking.provenance.git import open_repository
from tracking.provenance.redaction import strip_credentials
from tracking.provenance.software import installed_packages
from tracking.run.tracker import Tracker
from tracking.stage import run_main
from tracking.store.location import connect, project_root


def main() -> None:
    params = load_params()
    seeds = reproducible_process(params)
    root = project_root()
    require_code_deps(params, TRAIN, root)
    manifest = read_manifest(root / PREPARED)
    splits = load_splits(root / PREPARED, manifest)
    train, val = splits["train"], splits.get("val")
    open_repository(root)
    connect(root, params.mlflow.experiment)  # an unreachable store stops the stage before TensorFlow loads
    effective = seed_frameworks(params, seeds)
    built = prepare_model(
        params, seeds, tuple(train["x"].shape[1:]), output_size(manifest), root, target_shape(manifest)
    )
    try:
        with Tracker(
            params.mlflow.experiment, root, stage=TRAIN, system_metrics=params.compute.system_metrics
        ) as tracker:
            model, history, digest = tracked_training(
                params, seeds, effective, built, root, manifest, train, val, tracker
            )
            write_outputs(root, model, history, digest)
            run = {
                "run_id": tracker.run_id,
                "experiment": tracker.experiment,
                "tracking_uri": strip_credentials(tracker.uri),
                "weights_sha256": digest,
            }
            (root / RUN_FILE).write_text(json.dumps(run, indent=2) + "\n")
    except BaseException:
        remove_outputs(root)
        raise
    print(f"trained {params.model.builder}: weights sha256 {digest}; MLflow run {tracker.run_id}")


def tracked_training(
    params: Params,
    seeds: Seeds,
    effective: EffectiveDeterminism,
    built: Built,
    root: Path,
    manifest: dict,
    train: dict,
    val: dict | None,
    tracker: Tracker,
    callbacks: Sequence[Any] = (),
) -> tuple[Any, dict[str, list[float]], str]:
    """Train the built model with everything logged to `tracker`'s run: params, provenance (the builder and its
    seeding too), data, initial and trained weights' hashes, per-epoch metrics, model. `callbacks` are Keras
    callbacks of the caller's, after the logging one."""
    from tracking.training.callback import MlflowMetricsCallback

    def log_setup() -> None:
        import mlflow.tensorflow  # noqa: F401 - loaded beside training rather than when the model is logged after it

        tracker.log_params(params.flat())
        record = capture(root, seeds.as_dict(), as_record(params.determinism, effective), stages=("prepare",))
        tracker.log_provenance(with_model(record, built), installed_packages())
        tracker.log_dataset(manifest, train["x"], train["y"], location=root / PREPARED, context="training")

    tracker.in_background(log_setup)
    tracker.log_weights(initial=built.initial_weights_sha256)
    model = built.model
    history = fit_model(model, params, seeds, train, val, [MlflowMetricsCallback(tracker), *callbacks])
    digest = weights_sha256(model.get_weights())
    tracker.log_metrics(final_metrics(history))
    tracker.log_weights(trained=digest)
    tracker.in_background(lambda: tracker.log_figure(curves_figure(history), "plots/training_curves.png"))
    tracker.log_keras_model(model, train["x"][:2])
    return model, history, digest


def final_metrics(history: dict[str, list[float]]) -> dict[str, float]:
    return {f"final_{key}": values[-1] for key, values in history.items()}


def write_outputs(root: Path, model: Any, history: dict[str, list[float]], digest: str) -> None:
    """Stage outputs, written only after training succeeded so no partial output looks valid."""
    for path in (MODEL, TRAIN_METRICS, HISTORY):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    model.save(root / MODEL)
    (root / TRAIN_METRICS).write_text(json.dumps({**final_metrics(history), "weights_sha256": digest}, indent=2) + "\n")
    with open(root / HISTORY, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["epoch", *history])
        for epoch, values in enumerate(zip(*history.values(), strict=False)):
            writer.writerow([epoch, *values])


def remove_outputs(root: Path) -> None:
    """Delete what a failed or interrupted run may have written, so neither DVC nor evaluate takes it as valid."""
    for path in (MODEL, RUN_FILE, TRAIN_METRICS, HISTORY):
        (root / path).unlink(missing_ok=True)


def curves_figure(history: dict[str, list[float]]) -> Any:
    """The loss and the first compiled metric per epoch, training and validation (a pyplot-free figure, safe off
    the main thread): accuracy for the default classifier, mae for regression, whatever train.metrics names first.

    Margins are fixed in inches: matplotlib's tight layout measured every tick label and took 0.15 s of the 0.23 s
    the figure cost, in the background of every training run."""
    from matplotlib.figure import Figure

    shown = ["loss", *[key for key in history if key != "loss" and not key.startswith("val_")][:1]]
    width, height = 4.5 * len(shown), 3.5
    figure = Figure(figsize=(width, height))
    figure.subplots_adjust(
        left=0.7 / width, right=1 - 0.15 / width, bottom=0.5 / height, top=1 - 0.35 / height, wspace=0.3
    )
    for axis, metric in zip(figure.subplots(1, len(shown), squeeze=False)[0], shown, strict=False):
        for key in (metric, f"val_{metric}"):
            if key in history:
                axis.plot(range(len(history[key])), history[key], label=key)
        axis.set_xlabel("epoch")
        axis.set_title(metric)
        axis.legend()
    return figure


if __name__ == "__main__":
    run_main(main)
