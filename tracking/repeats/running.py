"""Running repeats and keeping them: in this process (the local executor) or on a Ray pool's workers, each kept as
it ends so an interrupted stage resumes there; and what a Ray worker is started with and handed."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from tracking.compute.ray_executor import RayPool
from tracking.determinism.process import process_environment
from tracking.env import DVC_EXP_BASELINE_REV, DVC_EXP_NAME, MLFLOW_TRACKING_URI, TRACKING_LOGLEVEL
from tracking.names import COMPUTE_ATTEMPT_TAG, REPEAT_KEY_TAG, status_is, tag_is
from tracking.redaction import redact_name
from tracking.repeats.kept import Job, KeptRepeat, RepeatStore
from tracking.repeats.variants import op_determinism
from tracking.repeats.worker import RepeatSpec, RepeatWorker, label
from tracking.run.tracker import Tracker
from tracking.store.faults import server_unavailable
from tracking.store.reads import children_of
from tracking.store.stale import end_failed
from tracking.training.model import RepeatedModel

log = logging.getLogger(__name__)


def train_locally(
    spec: RepeatSpec, models: RepeatedModel, jobs: list[Job], show: Callable[[str], None]
) -> Iterator[tuple[Job, KeptRepeat]]:
    """The local executor: every repeat in this process, one after another, those that share a built model
    together (the order changes no repeat's weights)."""
    worker = RepeatWorker.in_this_process(spec, models)
    for job in sorted(jobs, key=lambda job: op_determinism(job.variant)):
        show(f"{worker.where()} {label(job, spec.role)}")
        yield job, worker.run(job)


def train_and_keep(
    spec: RepeatSpec,
    pending: list[Job],
    executor: tuple[RayPool | None, RepeatedModel | None],
    parent: Tracker,
    store: RepeatStore,
    finished: dict[Job, KeptRepeat],
    bar: Any,
    on_set_up: Callable[[dict[str, dict[str, Any]]], None] = lambda backend: None,
) -> None:
    """Train the `pending` repeats on the pool (the executor's first part) or in this process with its models,
    keep each in `store` and `finished` as it ends (so a killed stage resumes there), and count it on the `bar`.
    A Ray worker's backend record (`RepeatWorker.setup`) goes to `on_set_up` once its first repeat has ended."""
    pool, models = executor
    show = bar.set_postfix_str
    trained = (
        train_on_ray(pool, spec, pending, parent, show, on_set_up)
        if pool
        else train_locally(spec, models, pending, show)
    )
    for job, kept in trained:
        store.save(job.key, kept)
        finished[job] = kept
        bar.update()
    show("")


def train_on_ray(
    pool: RayPool,
    spec: RepeatSpec,
    jobs: list[Job],
    parent: Tracker,
    show: Callable[[str], None],
    on_set_up: Callable[[dict[str, dict[str, Any]]], None],
) -> Iterator[tuple[Job, KeptRepeat]]:
    """The Ray executor: repeats on the pool's workers; a repeat whose worker died ends FAILED and is tried again."""
    experiment_id = parent.experiment_id
    retries = spec.params.compute.max_retries

    def on_lost(job: Job, attempt: int, why: str) -> None:
        left = retries + 1 - attempt
        then = f"trying again ({left} tr{'y' if left == 1 else 'ies'} left)" if left > 0 else "no tries left"
        attempt_running = " and ".join(
            (tag_is(REPEAT_KEY_TAG, job.key), tag_is(COMPUTE_ATTEMPT_TAG, attempt), status_is("RUNNING"))
        )
        try:
            for run in children_of(parent.client, experiment_id, spec.parent_run_id, attempt_running):
                end_failed(
                    parent.client,
                    run.info.run_id,
                    f"the {spec.stage} stage",
                    f"its worker died mid-repeat ({why}); {then}",
                )
        except Exception as err:  # the server lost too: `tracking doctor` ends the run once it is back
            if not server_unavailable(err):
                raise
        log.warning("%s repeat %s: its worker died (%s); %s", spec.role, label(job, spec.role), why, then)

    def named(job: Job) -> str:
        return label(job, spec.role)

    yield from pool.run(
        spec, jobs, named, on_lost, show, affinity=lambda job: op_determinism(job.variant), on_set_up=on_set_up
    )


def worker_environment() -> dict[str, str]:
    """What a Ray worker starts with: this process's determinism settings and the DVC experiment it belongs to.
    Ray writes these to its logs, so the experiment's name travels as its runs record it (a name given with
    `dvc exp run -n` may hold a token)."""
    passed = (DVC_EXP_BASELINE_REV, TRACKING_LOGLEVEL)
    named = {DVC_EXP_NAME: redact_name(os.environ[DVC_EXP_NAME])} if DVC_EXP_NAME in os.environ else {}
    return {**{name: value for name, value in os.environ.items() if name in passed}, **named, **process_environment()}


def worker_credentials(uri: str) -> dict[str, str]:
    """What a Ray worker is handed before its set-up, never written down: this process's MLflow settings, the
    store (whose URI may hold a password) and any credentials for it."""
    return {
        **{name: value for name, value in os.environ.items() if name.startswith("MLFLOW_")},
        MLFLOW_TRACKING_URI: uri,
    }
