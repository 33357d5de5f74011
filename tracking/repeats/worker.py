"""One calibration repeat: train the frozen baseline as a variant's repeat and score it, as a child MLflow run.

A repeat takes the train stage's path: the model prepared as train prepares it (tracking/training/model.py), the
same fit with its validation pass (tracking/training/fitting.py), then scored as evaluate scores the candidate
(tracking/training/scoring.py). A CONTROL repeat is thereby the candidate again, bit for bit. A `RepeatWorker` holds what a process needs to train repeat after repeat: the calibration's shared `RepeatSpec`,
its own hardware record and the model reused across repeats. The local executor makes one in the stage's own
process; the Ray executor makes one per worker process (tracking/compute/ray_executor.py), started with the
stage's process-level settings, so a repeat's weights do not depend on where it ran.

The compare stage trains a candidate's extra runs (`compare.candidate_repeats`) with the same workers: a spec whose
role is `candidate` trains the candidate's params, not the baseline, on the candidate's own seed draws, as
children of the candidate's run (tracking/repeats/candidate_runs.py).
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tracking.compute.placement import placement_tags
from tracking.config.baseline import FROZEN_SECTIONS
from tracking.config.params import Params
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import as_record, build_record, gpu_present
from tracking.layout import CALIBRATE, COMPARE, PREPARED
from tracking.names import (
    BAND_VARIANT_TAG,
    CANDIDATE_REPEAT_TAG,
    COMPUTE_ATTEMPT_TAG,
    IMPL_NOISE_TAG,
    NOISE_REPEAT_TAG,
    NOISE_VARIANT_TAG,
    REPEAT_KEY_TAG,
)
from tracking.provenance.hardware import gather_cpu, gather_gpus, gather_os
from tracking.repeats.kept import Job, KeptRepeat
from tracking.repeats.shared import shared_name, shares_repeats
from tracking.repeats.variants import variant_setup
from tracking.run.tracker import Tracker
from tracking.training.model import BuildInputs, RepeatedModel, with_model
from tracking.training.repeat import train_and_score

# What a spec's repeats are: the calibration's (the frozen baseline, retrained) or a candidate's extra runs.
CALIBRATION, CANDIDATE = "calibration", "candidate"


def label(job: Job, role: str = CALIBRATION) -> str:
    """How a repeat is named in runs and progress: `<variant> #<index>`, or `candidate #<index> (<variant>)`."""
    return f"{job.variant} #{job.repeat}" if role == CALIBRATION else f"candidate #{job.repeat} ({job.variant})"


@dataclass(frozen=True)
class RepeatSpec:
    """What every repeat of one calibration shares, sent once to every worker: the configuration, the data, the
    calibration's one provenance capture and the MLflow run the repeats are children of.

    `trained` is what the repeats train: the frozen baseline, or for a candidate's repeats (`role` CANDIDATE) the
    candidate's own params.
    """

    params: Params
    trained: Params
    base_seeds: Seeds
    root: Path
    manifest: Manifest
    splits: dict[str, dict]
    record: dict[str, Any]
    packages: list[str]
    parent_run_id: str
    executor: str
    role: str = CALIBRATION

    @property
    def task(self) -> str:
        return self.manifest.task

    @property
    def stage(self) -> str:
        """The DVC stage that trains these repeats (their runs' `pipeline.stage`)."""
        return CALIBRATE if self.role == CALIBRATION else COMPARE


def trained_on(run_params: Params, params: Params) -> dict[str, Any]:
    """The params a calibration run applies: the baseline's training sections, the rest from params.yaml.

    The rest includes `data.*`: the calibration trains on `data/prepared`, which `prepare` made from
    params.yaml, so the baseline's data section would describe data the runs never saw.
    """
    return {
        **params.flat(),
        **{key: value for key, value in run_params.flat().items() if key.split(".", 1)[0] in TRAINING_SECTIONS},
    }


# The baseline's sections a repeat trains with (its data is the prepared data, described by params.yaml).
TRAINING_SECTIONS = frozenset(FROZEN_SECTIONS) - {"data"}


def backend_record(trained: Params, seeds: Seeds) -> dict[str, dict[str, Any]]:
    """Seed the frameworks for `trained`; return the provenance sections that only the backend in force in this
    process can fill: its build (CUDA/cuDNN), the GPUs it sees and its effective determinism."""
    effective = seed_frameworks(trained, seeds)
    return {
        "software": {"backend": build_record()},
        "gpu": gather_gpus(),
        "determinism": as_record(trained.determinism, effective),
    }


def log_repeat_setup(
    child: Tracker, record: dict[str, Any], packages: list[str], flat: dict[str, Any], manifest: Manifest, train: dict
) -> None:
    """What the candidate's run holds, for one repeat: params, provenance and the training data.

    The record is the calibration's one capture with this worker's hardware and this repeat's seeds and
    determinism, so a repeat costs no new capture; the writes run on the child's background writer while it trains.
    """
    child.log_params(flat)
    child.log_provenance(record, packages)
    child.log_dataset(manifest, train["x"], train["y"], location=child.root / PREPARED, context="training")


class RepeatWorker:
    """Trains repeats of one calibration in this process, one after another, each as a child MLflow run."""

    def __init__(self) -> None:
        """Import Keras's backend and MLflow's store: a worker process's start-up, before it knows which calibration
        it serves (its environment already holds the stage's import-time settings, the backend among them)."""
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401  (what opening the first run would import)

        self.gpu = gpu_present()

    def setup(self, spec: RepeatSpec, models: RepeatedModel | None = None) -> dict[str, dict[str, Any]]:
        """Set the process up as the stage's own (a no-op where it already is), seed the frameworks, gather this
        machine's hardware and backend for the repeats' provenance, and make the model the repeats reuse (or take
        `models`). Return the sections only the backend fills (`backend_record`), for a calibration whose stage
        leaves the backend to its workers."""
        reproducible_process(spec.trained)
        backend = backend_record(spec.trained, spec.base_seeds)
        self.spec = spec
        self.root = spec.root if spec.root.is_dir() else Path.cwd()  # another node has the project elsewhere
        software = {**spec.record["software"], **backend["software"]}
        self.record = {
            **spec.record,
            "software": software,
            "gpu": backend["gpu"],
            "cpu": gather_cpu(),
            "os": gather_os(),
        }
        self.models = models or RepeatedModel(BuildInputs.of(spec.manifest, spec.splits["train"], self.root))
        return backend

    @classmethod
    def in_this_process(cls, spec: RepeatSpec, models: RepeatedModel | None = None) -> RepeatWorker:
        """A worker in this process, set up for `spec` (the local executor's), reusing `models` if given."""
        worker = cls()
        worker.setup(spec, models)
        return worker

    def where(self) -> str:
        """`<host>:<pid>` of this worker."""
        return f"{socket.gethostname()}:{os.getpid()}"

    def run(self, job: Job, attempt: int = 1) -> KeptRepeat:
        """Train and score one repeat (`attempt` counts tries after lost workers) as a child of the calibration run."""
        variant, repeat, key = job.variant, job.repeat, job.key
        s = self.spec
        train = s.splits["train"]
        candidate = s.role == CANDIDATE
        run_params, seeds, within, source = variant_setup(
            variant,
            repeat,
            s.trained,
            s.base_seeds,
            s.params.calibration.simulate_impl_noise,
            self.gpu,
            stream="candidate" if candidate else "repeat",
        )
        placement = placement_tags(s.executor, self.record["gpu"], _node_address())
        tags = {
            **(
                {BAND_VARIANT_TAG: variant, CANDIDATE_REPEAT_TAG: repeat}
                if candidate
                else {NOISE_VARIANT_TAG: variant, NOISE_REPEAT_TAG: repeat}
            ),
            IMPL_NOISE_TAG: source,
            REPEAT_KEY_TAG: key,
            COMPUTE_ATTEMPT_TAG: attempt,
            **placement,
        }
        with Tracker(
            s.params.mlflow.experiment,
            self.root,
            stage=s.stage,
            run_name=label(job, s.role),
            nested=True,
            tags=tags,
            parent_run_id=s.parent_run_id,
            system_metrics=s.params.compute.system_metrics,
            offline_start=True,  # a server lost mid-calibration: the repeat trains, kept in the journal
        ) as child:
            actual = seed_frameworks(run_params, seeds)
            own = {**self.record, "seeds": seeds.as_dict(), "determinism": as_record(run_params.determinism, actual)}
            built = self.models.prepare(run_params, seeds)
            record = with_model(own, built, run_params)
            child.in_background(
                partial(
                    log_repeat_setup,
                    child,
                    record,
                    s.packages,
                    trained_on(run_params, s.params),
                    s.manifest,
                    train,
                )
            )
            trained = train_and_score(
                built, run_params, seeds, s.splits, s.manifest.n_outputs, within, s.task, self.root
            )
            if trained.idle:
                child.in_background(partial(child.amend_provenance, record, {"seeds": trained.idle}))
            child.log_metrics({name: value for name, value in trained.metrics.items() if np.isfinite(value)})
            child.log_weights(trained=trained.weights_sha256, initial=built.initial_weights_sha256)
            run = {
                "variant": variant,
                "repeat": repeat,
                "run_id": child.run_id,
                "impl_noise": source,
                "weights_sha256": trained.weights_sha256,
                "metrics": trained.metrics,
                "seeds": seeds.as_dict(),
                "where": placement,
            }
            kept = KeptRepeat(run, trained.predicted, trained.weights)
            if shares_repeats(child.uri):  # before the run is FINISHED: a finished run on a server has its file
                child.log_bytes(kept.to_bytes(), shared_name(key))
        return kept


def _node_address() -> str | None:
    """The Ray node's address where this runs in a Ray worker; None elsewhere."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return ray.util.get_node_ip_address()
