"""A training logged to an open MLflow run: params, provenance, data, weights' hashes, per-epoch metrics, the model.

What the train stage records of the model it trains, through the one fit every path uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracking.config.params import Params
from tracking.data.arrays import rows
from tracking.data.hashing import weights_sha256
from tracking.data.manifest import Manifest
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import EffectiveDeterminism, as_record
from tracking.layout import PREPARED
from tracking.provenance import capture
from tracking.provenance.software import installed_packages
from tracking.run.log_calls import prepare_model_logging
from tracking.run.tracker import Tracker
from tracking.training.fitting import fit_model
from tracking.training.model import Built, idle_after_fit, with_model


def tracked_training(
    params: Params,
    seeds: Seeds,
    effective: EffectiveDeterminism,
    built: Built,
    root: Path,
    manifest: Manifest,
    train: dict,
    val: dict | None,
    tracker: Tracker,
    callbacks: Sequence[Any] = (),
) -> tuple[Any, dict[str, list[float]], str]:
    """Train the built model with everything logged to `tracker`'s run: params, provenance (the builder and its
    seeding too), data, initial and trained weights' hashes, per-epoch metrics, model. `callbacks` are Keras
    callbacks of the caller's, after the logging one."""
    from tracking.training.callback import MlflowMetricsCallback

    record: dict[str, Any] = {}  # the provenance record, filled by log_setup on the writer, amended after fit

    def log_setup() -> None:
        prepare_model_logging()  # beside training rather than when the model is logged after it
        tracker.log_params(params.flat())
        captured = capture(root, seeds.as_dict(), as_record(params.determinism, effective), stages=("prepare",))
        record.update(with_model(captured, built, params))
        tracker.log_provenance(record, installed_packages())
        tracker.log_dataset(manifest, train["x"], train["y"], location=root / PREPARED, context="training")

    tracker.in_background(log_setup)
    tracker.log_weights(initial=built.initial_weights_sha256)
    model = built.model
    history = fit_model(model, params, seeds, train, val, [MlflowMetricsCallback(tracker), *callbacks], root=root)
    idle = idle_after_fit(model, seeds, params)
    if idle:  # after log_setup on the same writer, so the record is complete
        tracker.in_background(lambda: tracker.amend_provenance(record, {"seeds": idle}))
    digest = weights_sha256(model.get_weights())
    tracker.log_metrics(final_metrics(history))
    tracker.log_weights(trained=digest)
    tracker.in_background(lambda: tracker.log_figure(curves_figure(history), "plots/training_curves.png"))
    tracker.log_keras_model(model, rows(train["x"], slice(2)))
    return model, history, digest


def final_metrics(history: dict[str, list[float]]) -> dict[str, float]:
    """The last epoch's value of every history entry, as `final_<name>`."""
    return {f"final_{key}": values[-1] for key, values in history.items()}


def curves_figure(history: dict[str, list[float]]) -> Any:
    """The loss and the first compiled metric per epoch, training and validation (a pyplot-free figure, safe off
    the main thread): accuracy for the default classifier, mae for regression, whatever train.metrics names first.

    Margins are fixed in inches: matplotlib's tight layout measured every tick label and took 0.15 s of the 0.23 s
    the figure cost, in the background of every training run. Drawing the tick labels is most of the rest: about
    four a side draw the figure in 48 ms of CPU against 62 ms with matplotlib's nine."""
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
        axis.locator_params(nbins=4)
        axis.set_xlabel("epoch")
        axis.set_title(metric)
        axis.legend()
    return figure
