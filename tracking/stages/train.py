"""The train stage's work: open the pipeline's MLflow run, log params and provenance, train, and write the model,
its metrics, history and run file only once training succeeded; a stage that fails before it writes them leaves the
previous training's outputs as they were."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from tracking.config.params import Params
from tracking.data.dataset import load_splits
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.layout import HISTORY, MODEL, PREPARED, RUN_FILE, TRAIN, TRAIN_METRICS, TRAINED_ON
from tracking.names import TRAINED_INPUTS_TAG
from tracking.provenance.git import open_repository
from tracking.provenance.reference import inputs_sha256, record, say_why_weights_differ, trained_on
from tracking.redaction import strip_credentials
from tracking.run.tracker import Tracker
from tracking.store.location import connect, project_root, tracking_uri
from tracking.store.recorded import Training, link_file, write_run_file
from tracking.training.model import BuildInputs, prepare_model, require_code_deps
from tracking.training.saved_model import save_model
from tracking.training.space import check_free_space, training_writes
from tracking.training.tracked import final_metrics, tracked_training


def train_model(params: Params) -> None:
    """Train `params`' model on the prepared data in one MLflow run, and write the stage's outputs. Call it before
    TensorFlow is imported: it sets the process up for determinism first (`reproducible_process`)."""
    seeds = reproducible_process(params)
    root = project_root()
    require_code_deps(params, TRAIN, root)
    manifest = Manifest.read(root / PREPARED)
    splits = load_splits(root / PREPARED, manifest)
    train, val = splits["train"], splits.get("val")
    repo = open_repository(root)
    connect(root, params.mlflow.experiment)  # an unreachable store stops the stage before TensorFlow loads
    check_free_space(training_writes(root, repo, tracking_uri(root)))  # so does a full disk (the store's paths checked)
    effective = seed_frameworks(params, seeds)
    built = prepare_model(params, seeds, BuildInputs.of(manifest, train, root))
    check_free_space(training_writes(root, repo, tracking_uri(root), built.model))  # and room for this model
    from tracking.training.callback import EpochProgress  # imports Keras: after the determinism settings

    writing = False  # the previous training's outputs stay whole until this one starts to replace them
    try:
        with Tracker(
            params.mlflow.experiment, root, stage=TRAIN, system_metrics=params.compute.system_metrics
        ) as tracker:
            model, history, digest = tracked_training(
                params, seeds, effective, built, root, manifest, train, val, tracker, [EpochProgress()]
            )
            inputs = inputs_sha256(root, manifest.content_sha256)
            tracker.set_tags({TRAINED_INPUTS_TAG: inputs})  # what finds the run for outputs/run.json in any clone
            writing = True
            write_outputs(root, model, history, digest)
            here = record(inputs)
            (root / TRAINED_ON).write_text(json.dumps(trained_on(repo, root, here, digest), indent=2) + "\n")
            training = Training(tracker.experiment, inputs, digest)
            write_run_file(root, training, tracker.run_id, strip_credentials(tracker.uri))
    except BaseException:
        if writing:  # some are this run's, some the previous one's: none of them may be taken as a training
            remove_outputs(root)
        raise
    print(f"trained {params.model.builder}: weights sha256 {digest}; MLflow run {tracker.run_id}")
    say_why_weights_differ(repo, root, here, digest)


def write_outputs(root: Path, model: Any, history: dict[str, list[float]], digest: str) -> None:
    """Stage outputs, written only after training succeeded so no partial output looks valid."""
    for path in (MODEL, TRAIN_METRICS, HISTORY, TRAINED_ON):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    save_model(model, root / MODEL)
    (root / TRAIN_METRICS).write_text(json.dumps({**final_metrics(history), "weights_sha256": digest}, indent=2) + "\n")
    with open(root / HISTORY, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["epoch", *history])
        for epoch, values in enumerate(zip(*history.values(), strict=False)):
            writer.writerow([epoch, *values])


def remove_outputs(root: Path) -> None:
    """Delete what a failed or interrupted run may have written, so neither DVC nor evaluate takes it as valid;
    called once the run began writing its outputs (a run that failed before leaves the previous training's whole:
    `dvc repro` removes them itself before the stage runs). Only files that exist: on a project made read-only,
    unlinking a missing file fails too."""
    for path in (MODEL, RUN_FILE, link_file(TRAIN), TRAIN_METRICS, HISTORY, TRAINED_ON):
        if (root / path).exists():
            (root / path).unlink()
