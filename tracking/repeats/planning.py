"""A repeat's plan: what every repeat of one training shares (`RepeatSpec`: params, seeds, data, provenance), what
decides each one's result but its variant and index (`repeat_identity`), the repeats to train under their keys
(`planned`) and those kept from earlier runs, here or on the tracking server (`kept_before`), and the model prepared once for the repeats to reuse. The
calibrate stage, the candidate's extra runs and a team script's calibration plan their repeats here."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.config.params import RAY, Params
from tracking.data.manifest import Manifest
from tracking.determinism.process import seed_frameworks
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import as_record
from tracking.layout import CALIBRATE
from tracking.provenance import capture
from tracking.provenance.software import installed_packages
from tracking.repeats.kept import Job, KeptRepeat, RepeatStore, code_version, repeat_key
from tracking.repeats.shared import fetch_shared, shares_repeats
from tracking.repeats.worker import CALIBRATION, TRAINING_SECTIONS, RepeatSpec
from tracking.store.faults import describe, server_unavailable
from tracking.store.location import shown
from tracking.training.model import BuildInputs, RepeatedModel

if TYPE_CHECKING:
    from tracking.run.tracker import Tracker

log = logging.getLogger(__name__)


def repeat_spec(
    params: Params,
    trained: Params,
    base_seeds: Seeds,
    root: Path,
    data: tuple[Manifest, dict[str, dict]],
    parent_run_id: str,
    executor: str,
    role: str = CALIBRATION,
) -> RepeatSpec:
    """Capture provenance once: what every repeat of `trained` shares (`role`: whose repeats,
    tracking/repeats/worker.py). Where this process trains them (the local executor) it seeds the frameworks and
    records their build and effective determinism; Ray's workers record their own (`RepeatWorker.setup`), and this
    process leaves the backend unimported (4 s of CPU that the workers' start-up shares the cores with)."""
    manifest, splits = data
    trains_here = executor != RAY
    effective = seed_frameworks(trained, base_seeds) if trains_here else None
    determinism = as_record(trained.determinism, effective)
    record = capture(root, base_seeds.as_dict(), determinism, stages=("prepare",), backend=trains_here)
    return RepeatSpec(
        params, trained, base_seeds, root, manifest, splits, record, installed_packages(), parent_run_id, executor, role
    )


def repeat_identity(
    params: Params, baseline: Params, manifest: Manifest, root: Path, gpu: bool, stage: str = CALIBRATE
) -> dict[str, Any]:
    """What determines every repeat's result but its variant and index: the baseline's training sections, the
    data, the code (the deps of `stage`, the one that trains them, and the baseline builder's package where it is
    installed outside the project), kernel-noise simulation and whether GPUs train
    (`compute.accelerator_type` names which)."""
    return {
        "baseline": {key: value for key, value in baseline.flat().items() if key.split(".", 1)[0] in TRAINING_SECTIONS},
        "data_sha256": manifest.content_sha256,
        "code": code_version(root, stage, baseline.model.builder),
        "simulate_impl_noise": params.calibration.simulate_impl_noise,
        "gpu": params.compute.accelerator_type or gpu,
    }


def checked_model(
    baseline: Params, base_seeds: Seeds, data: tuple[dict[str, Any], dict[str, dict]], root: Path
) -> RepeatedModel:
    """The baseline's model, prepared (built, seeded, compiled and checked) for the repeats to reuse."""
    manifest, splits = data
    seed_frameworks(baseline, base_seeds)
    models = RepeatedModel(BuildInputs.of(manifest, splits["train"], root))
    models.prepare(baseline, base_seeds)
    return models


def planned(identity: dict[str, Any], repeats: Iterable[tuple[str, int]]) -> list[Job]:
    """The repeats (variant, index) to train, each under its key: the `identity` they share, their variant and index."""
    return [Job(variant, repeat, repeat_key(identity, variant, repeat)) for variant, repeat in repeats]


def kept_before(store: RepeatStore, jobs: Iterable[Job], tracker: Tracker | None = None) -> dict[Job, KeptRepeat]:
    """The `jobs` kept in `store` by an earlier run under the same key, and where `tracker`'s store is a server
    that answers, those another clone kept there (tracking/repeats/shared.py): reused, never trained again. A server
    lost mid-stage shares nothing: the repeats it would have given are trained, each kept in the offline journal."""
    kept = {job: found for job in jobs if (found := store.load(job.key)) is not None}
    missing = [job for job in jobs if job not in kept]
    if tracker is not None and missing and shares_repeats(tracker.uri) and not tracker.offline:
        try:
            kept |= fetch_shared(tracker.client, tracker.experiment_id, missing, store)
        except Exception as err:
            if not server_unavailable(err):
                raise
            log.warning(
                "MLflow server %s lost (%s): the repeats it may keep are trained here",
                shown(tracker.uri),
                describe(err),
            )
    return kept
