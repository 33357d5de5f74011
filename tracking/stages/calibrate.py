"""Calibration: the frozen baseline trained `calibration.repeats` times per noise variant, as children of one MLflow
parent run, and the bands, churn and weight distances of each variant summarised from them.

The variants, and how each repeat's seeds and kernel noise are set, are in `tracking/repeats/variants.py`; one repeat's
training is `tracking/repeats/worker.py`. Repeats run in this process one after another (`compute.executor: local`) or
on the workers of a Ray cluster (`ray`). Every finished repeat is kept under the key of what determined it
(tracking/repeats/kept.py): a calibration that was killed, or given more repeats, trains only what it lacks.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from contextlib import ExitStack
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from tracking.compute.ray_executor import RayPool
from tracking.config.baseline import blamed_on_baseline, load_baseline
from tracking.config.params import CLASSIFICATION, LOCAL, RAY, REGRESSION, Params
from tracking.data.arrays import columns
from tracking.data.dataset import load_splits
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import gpu_present
from tracking.layout import CALIBRATE, CALIBRATION_RUNS, NOISE_FILE, PREPARED, REPEATS_DIR
from tracking.names import (
    CALIBRATION_ROLE,
    COMPUTE_EXECUTOR_TAG,
    CONTROL_BIT_IDENTICAL_TAG,
    MLFLOW_NOTE_TAG,
    NOISE_ROLE_TAG,
    REUSED_REPEATS_TAG,
)
from tracking.noise.band_page import BAND_IMAGE, band_figure, band_metrics, describe_band, shown_metrics
from tracking.noise.record import STORED_ALPHA, NoiseRecord, Variant, metric_bands
from tracking.noise.statistics import (
    churn_measure,
    off_diagonal_summary,
    pairwise_disagreement,
    pairwise_weight_distance,
)
from tracking.provenance.git import open_repository
from tracking.redaction import redact_params
from tracking.repeats.kept import RepeatStore
from tracking.repeats.planning import checked_model, kept_before, planned, repeat_identity, repeat_spec
from tracking.repeats.running import train_and_keep, worker_credentials, worker_environment
from tracking.repeats.worker import RepeatSpec, RepeatWorker, backend_record, label, trained_on
from tracking.run.tracker import Tracker
from tracking.store.location import project_root, tracking_uri
from tracking.store.recorded import write_link
from tracking.training.model import require_code_deps
from tracking.training.space import check_free_space, training_writes

log = logging.getLogger(__name__)


def summarise(
    runs: list[dict[str, Any]],
    predictions: np.ndarray,
    weights: np.ndarray,
    alpha: float,
    task: str = CLASSIFICATION,
    target_std: float | None = None,
) -> dict[str, Variant]:
    """Bands of every metric and pairwise churn (the task's) / weight-distance summaries, per variant."""
    summary = {}
    for variant in dict.fromkeys(run["variant"] for run in runs):
        index = [i for i, run in enumerate(runs) if run["variant"] == variant]
        chosen = [runs[i] for i in index]
        hashes = sorted({run["weights_sha256"] for run in chosen})
        summary[variant] = Variant(
            runs=index,
            bands=metric_bands(chosen, variant, alpha),
            churn=off_diagonal_summary(pairwise_disagreement(predictions[index], task, target_std)),
            weight_distance=off_diagonal_summary(pairwise_weight_distance(weights[index])),
            bit_identical=len(hashes) == 1,
            weights_sha256=hashes,
            impl_noise=chosen[0]["impl_noise"],
        )
    return summary


def open_calibration(
    params: Params,
    baseline: Params,
    base_seeds: Seeds,
    root: Path,
    data: tuple[Manifest, dict[str, dict]],
    parent: Tracker,
    executor: str = LOCAL,
) -> RepeatSpec:
    """Seed the frameworks, capture provenance once and log it with the params and `data` (the manifest and
    the splits) to the parent run; return what every repeat shares."""
    manifest, splits = data
    train = splits["train"]
    spec = repeat_spec(params, baseline, base_seeds, root, data, parent.run_id, executor)
    parent.log_params(trained_on(baseline, params))
    parent.log_provenance(spec.record, spec.packages)
    parent.log_dataset(manifest, train["x"], train["y"], location=root / PREPARED, context="training")
    return spec


def calibrate_baseline(params: Params) -> None:
    """The calibrate stage's work: train the missing repeats of every variant (kept ones are reused), log them as
    children of one MLflow parent run, and write the calibration (`calibration/noise.json`, the stacked
    predictions and weights)."""
    from tqdm import tqdm

    baseline = load_baseline(params.calibration.baseline)
    base_seeds = reproducible_process(baseline)
    root = project_root()
    with blamed_on_baseline(params, baseline):
        require_code_deps(baseline, CALIBRATE, root)
    manifest = Manifest.read(root / PREPARED)
    data = manifest, load_splits(root / PREPARED, manifest)
    repo = open_repository(root)
    executor = params.compute.executor
    uri = tracking_uri(root)
    check_free_space(training_writes(root, repo, uri))  # a full disk stops the stage before the repeats train
    with ExitStack() as stack:
        # The local executor's model is built and checked before the run opens (tracking/training/preflight.py), so
        # a model that cannot train leaves no run.
        with blamed_on_baseline(params, baseline):
            models = checked_model(baseline, base_seeds, data, root) if executor == LOCAL else None
        # Ray's workers start first, for the repeats this checkout has not kept: a worker's start (its process,
        # TensorFlow, MLflow's store: 8 s on 2 busy cores) is what the first repeat waits for, so it overlaps the run's
        # opening and the provenance capture; a worker left without a job (a repeat another clone shared through
        # the server) is released once the jobs are handed out.
        pool = stack.enter_context(RayPool(params.compute, uri, root)) if executor == RAY else None
        gpu = pool.gpus_per_run > 0 if pool else gpu_present()
        identity = repeat_identity(params, baseline, manifest, root, gpu)
        plan = planned(identity, product(params.calibration.variants, range(params.calibration.repeats)))
        store = RepeatStore(root / REPEATS_DIR)
        kept = kept_before(store, plan)
        if pool and len(kept) < len(plan):
            pool.start(RepeatWorker, len(plan) - len(kept), worker_environment(), worker_credentials(uri))
        parent = stack.enter_context(
            Tracker(
                params.mlflow.experiment,
                root,
                stage=CALIBRATE,
                run_name="calibration",
                tags={NOISE_ROLE_TAG: CALIBRATION_ROLE, COMPUTE_EXECUTOR_TAG: executor},
            )
        )
        finished = kept | kept_before(store, [job for job in plan if job not in kept], parent)  # and the server's
        reused = set(finished)
        pending = [job for job in plan if job not in finished]
        spec = open_calibration(params, baseline, base_seeds, root, data, parent, executor)
        # With Ray, this process leaves the backend unimported (tracking/repeats/planning.py): the run records the
        # build, GPUs and effective determinism of the first worker to end a repeat, or its own where none trains.
        with_backend = partial(parent.amend_provenance, dict(spec.record))
        if pool and not pending:
            with_backend(backend_record(baseline, base_seeds))
        with tqdm(total=len(plan), initial=len(reused), desc="calibrate", unit="run", file=sys.stderr) as bar:
            if reused:
                bar.write(f"calibrate: {len(reused)} of {len(plan)} repeats kept from earlier calibrations are reused")
            train_and_keep(spec, pending, (pool, models), parent, store, finished, bar, with_backend)
        runs = [{**finished[job].run, "reused": job in reused} for job in plan]
        stacked_predictions = np.stack([finished[job].predicted for job in plan])
        stacked_weights = np.stack([finished[job].weights for job in plan])
        test = spec.splits["test"]
        # The churn that fits the predictions: a model of several outputs is churned as regression is, over every
        # output value, in standard deviations of every target value (the record's task is the churn's).
        task = REGRESSION if isinstance(test["y"], Mapping) else spec.task
        target_std = float(np.std(columns(test["y"]).astype(np.float64))) if task == REGRESSION else None
        noise = NoiseRecord(
            baseline=redact_params(baseline.flat()),
            data_sha256=spec.manifest.content_sha256,
            alpha=STORED_ALPHA,
            repeats=params.calibration.repeats,
            simulate_impl_noise=params.calibration.simulate_impl_noise,
            gpu=gpu,
            parent_run_id=parent.run_id,
            executor=executor,
            reused=[label(job) for job in plan if job in reused],
            runs=runs,
            task=task,
            churn_measure=churn_measure(task),
            target_std=target_std,
            variants=summarise(runs, stacked_predictions, stacked_weights, STORED_ALPHA, task, target_std),
        )
        control = noise.variants.get("control")
        shown = shown_metrics(noise, params.compare_metrics())
        parent.log_metrics(band_metrics(noise, shown))
        parent.log_figure(band_figure(noise, shown), BAND_IMAGE)
        parent.set_tags(
            {
                CONTROL_BIT_IDENTICAL_TAG: str(control.bit_identical).lower() if control else "n/a",
                REUSED_REPEATS_TAG: len(reused),
                MLFLOW_NOTE_TAG: describe_band(noise, shown, parent.experiment_id, parent.run_id),
            }
        )
        # A NaN metric (a diverged repeat) is null, named in `non_finite`: strict JSON.
        parent.log_json(noise.as_dict(), NOISE_FILE.as_posix())
        (root / CALIBRATION_RUNS).parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            root / CALIBRATION_RUNS,
            predictions=stacked_predictions,
            weights=stacked_weights,
            variants=np.array([run["variant"] for run in runs]),
        )
        noise.write(root / NOISE_FILE)
        write_link(root, CALIBRATE, noise.execution())
    if control and not control.bit_identical:
        print(
            "WARNING: non-determinism detected: CONTROL repeats (same seeds, op determinism on) gave different "
            f"weights: {', '.join(control.weights_sha256)}",
            file=sys.stderr,
        )
    trained_here = len(plan) - len(reused)
    print(
        f"calibrated {len(runs)} runs over {len(noise.variants)} variant(s) ({trained_here} trained with the "
        f"{executor} executor, {len(reused)} reused); MLflow parent run {parent.run_id}"
    )
