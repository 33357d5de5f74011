"""`Tracker`: the one MLflow run of a pipeline execution, opened by train and resumed by evaluate.

It checks the store answers before work starts, logs params, provenance, data and metrics, and ends the
run honestly: FINISHED on success, FAILED on an error, KILLED on Ctrl-C or SIGTERM, never left RUNNING.
Writes name the run explicitly (MLflow's fluent API keeps the active run per thread), so they may run on
the background writer while training goes on. Every write goes through a `StoreSink`: if the tracking
server is lost mid-run, training goes on and the whole run is kept in the offline journal for `tracking sync`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from tracking.data.manifest import LOGGED_MANIFEST, Manifest
from tracking.env import DVC_EXP_BASELINE_REV, DVC_EXP_NAME
from tracking.errors import RunStateError, StoreFault, TrackingError, TrackingServerError, WriteFault
from tracking.layout import RUN_FILE, TRAIN
from tracking.log import configure_unless_configured
from tracking.names import (
    DATASET_CONTENT_TAG,
    DATASET_CONTEXT_TAG,
    DVC_BASELINE_REV_TAG,
    DVC_EXP_NAME_TAG,
    ERROR_TAG,
    INITIAL_WEIGHTS_TAG,
    MAX_TAG_CHARS,
    MLFLOW_GIT_BRANCH_TAG,
    MLFLOW_GIT_COMMIT_TAG,
    REDACTED_PARAMS_TAG,
    STAGE_TAG,
    WEIGHTS_TAG,
)
from tracking.provenance import to_tags
from tracking.provenance.git import encode_diff
from tracking.redaction import redact_param
from tracking.run.lifecycle import (
    deferred_interrupts,
    discard_interrupt,
    interrupts_raise,
    pending_interrupt,
    record_killed,
    status_for,
)
from tracking.run.system_metrics import SystemMetrics
from tracking.run.writer import BackgroundWriter
from tracking.store.faults import describe, server_unavailable, store_fault
from tracking.store.journal import (
    StoreSink,
    has_journal,
    journal_folder,
    kept_offline,
    remove_ended_spools,
)
from tracking.store.location import connect, project_root, shown, tracking_uri
from tracking.store.operations import apply, artifact, batch, end, inputs
from tracking.store.operations import model as model_op
from tracking.store.stale import HEARTBEAT_INTERVAL_S, heartbeat, owner_tags, repair_stale_runs

log = logging.getLogger(__name__)

DATASET_DIGEST_CHARS = 32  # MLflow's datasets.digest column holds at most 36 characters.
# Metrics logged with `wait=False` (every epoch's) reach the store at most this often, gathered into one write:
# the default model's epochs take 0.2 s, and 20 writes of one epoch each cost 37 ms of the cores training runs
# on against 10 ms for one write of all 20 (over HTTP each write is also a round trip). The first goes at once.
METRICS_FLUSH_S = 1.0


class Tracker:
    """Context manager around one MLflow run; pass `run_id` to resume the run another stage started."""

    def __init__(
        self,
        experiment: str,
        root: Path | None = None,
        run_id: str | None = None,
        stage: str = TRAIN,
        run_name: str | None = None,
        nested: bool = False,
        tags: dict[str, Any] | None = None,
        parent_run_id: str | None = None,
        system_metrics: bool = False,
        keep_end_time: bool = False,
    ) -> None:
        """`nested` makes the run a child of the tracker open in this thread (MLflow's parent/child runs), or of
        `parent_run_id`, which may be open in another process (a worker's repeat under the calibration's run);
        `system_metrics` samples MLflow's system metrics while the run is open (a training run's `compute.system_metrics`);
        `keep_end_time` leaves a resumed FINISHED run's end time as it was when this stage finishes too (the compare
        stage adds its verdict after the calibration's minutes: MLflow's duration of the run stays its own work's)."""
        self.experiment = experiment
        self.root = root
        self.run_id = run_id
        self.experiment_id = ""  # the experiment's id in the store, once open
        self.stage = stage
        self.run_name = run_name
        self.nested = nested
        self.tags = tags or {}
        self.parent_run_id = parent_run_id
        self.system_metrics = system_metrics
        self.keep_end_time = keep_end_time
        self._kept_end_time: int | None = None
        self._system: SystemMetrics | None = None
        self._interrupts = interrupts_raise()
        self._queued_metrics: list[list[Any]] = []
        self._queued_lock = threading.Lock()
        self._next_flush = 0.0

    def __enter__(self) -> Tracker:
        from mlflow.tracking import MlflowClient

        configure_unless_configured()
        self.root = self.root or project_root()
        self.experiment_id = experiment_id = connect(self.root, self.experiment)
        self.client = MlflowClient()
        if self.run_id is not None:  # first, so the run a lost server left RUNNING is not taken for a stale one
            self.run_id = self._sync_kept_offline(self.run_id)
        if not self.nested:
            self._repair_stale_runs()
        if self.run_id is not None:
            self._check_resumable(self.run_id)
        self._interrupts.__enter__()
        resuming, run = self.run_id is not None, None
        try:
            with deferred_interrupts():  # a signal while the run opens waits for it to be open, then ends it KILLED
                run = self._start_run(experiment_id)
                self._writer = BackgroundWriter(self._beat, HEARTBEAT_INTERVAL_S)
                self.set_tags({STAGE_TAG: self.stage, **self.tags})
                if self.system_metrics:
                    self._system = SystemMetrics(self.run_id, self.uri, self._sink.write, resume=resuming)
        except BaseException as err:
            if run is None:
                self._interrupts.__exit__(None, None, None)
            else:
                self.__exit__(type(err), err, None)
            raise
        return self

    def _beat(self) -> None:
        """Renew the run's heartbeat, which tells hosts that cannot see this process that it lives; not while the
        server is lost (the journal keeps the run's writes, and a heartbeat there would say nothing). Metrics still
        queued go first: an epoch logged within `METRICS_FLUSH_S` of the last write, then a long pause (a slow
        epoch, a user's callback), would otherwise wait for the next epoch to be seen."""
        self._flush_metrics()
        if not self._sink.offline:
            self._sink.write(batch(tags=heartbeat()))

    def _start_run(self, experiment_id: str) -> Any:
        """Open or resume the run, recorded as owned by this process (see `tracking.store.stale`); a resumed run
        loses the `error` tag of the process that ended it before (a SIGKILLed stage's `ProcessGone`). MLflow's own
        system metrics thread stays off whatever `MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING` says: `system_metrics`
        starts the sampler that writes through the journal (tracking/run/system_metrics.py)."""
        import mlflow

        owner = owner_tags()
        try:
            if self.run_id is not None:
                # Before it is RUNNING again, so it never looks owned by the stage that opened it.
                apply(self.client, self.run_id, batch(tags={key: str(value) for key, value in owner.items()}))
                if ERROR_TAG in self.client.get_run(self.run_id).data.tags:  # an earlier process's end, now over
                    self.client.delete_tag(self.run_id, ERROR_TAG)
                run = mlflow.start_run(run_id=self.run_id, log_system_metrics=False)
            else:
                run = mlflow.start_run(
                    experiment_id=experiment_id,
                    run_name=self.run_name or run_name(self.stage),
                    nested=self.nested,
                    parent_run_id=self.parent_run_id,
                    tags=owner,
                    log_system_metrics=False,
                )
        except Exception as err:
            fault = store_fault(err, self.uri)
            if fault is not None:
                raise fault from err
            if not server_unavailable(err):
                raise
            raise TrackingServerError(
                f"MLflow tracking server {shown(self.uri)} stopped answering while the run started "
                f"({describe(err)}); start the server and re-run"
            ) from err
        self.run_id = run.info.run_id
        self._sink = StoreSink(self.client, self.run_id, self.root, self.uri, self.experiment)
        return run

    def _repair_stale_runs(self) -> None:
        """End as FAILED the runs that killed processes on this host left RUNNING, and say so in one line; remove
        the spools of ended runs that their stage could not remove."""
        from mlflow.exceptions import MlflowException

        try:
            stale, _ = repair_stale_runs(
                self.client, by=f"the {self.stage} stage", kept_offline=kept_offline(self.root)
            )
            remove_ended_spools(self.client, self.root)
        except MlflowException as err:
            raise store_fault(err, self.uri) or TrackingServerError(
                f"checking {shown(self.uri)} for runs left RUNNING failed ({err}); run `tracking doctor`"
            ) from err
        if stale:
            log.warning(
                "marked %d run(s) that a killed process left RUNNING as FAILED (%s); see `tracking doctor`",
                len(stale),
                ", ".join(run.run_id for run in stale),
            )

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        try:
            with deferred_interrupts():  # a second Ctrl-C or a SIGTERM waits until the run is ended
                self._end(error)
        finally:
            self._interrupts.__exit__(None, None, None)

    def _end(self, error: BaseException | None) -> None:
        """End the run as `error` calls for; an interrupt arriving meanwhile ends it KILLED and is raised after."""
        if self._system is not None:
            self._system.stop()
        self._writer.submit(self._flush_metrics)
        failure = self._close_writer()
        if failure is not None and not (
            isinstance(failure, StoreFault)
            and (error is None or isinstance(error, StoreFault) or WriteFault.of(error) is not None)
        ):
            log.error(failure)  # a store or file-system fault is said once, by the error line the stage ends with
        interrupt = pending_interrupt()
        cause = error or failure or interrupt
        try:
            if cause is not None:
                error_tag = shown(f"{type(cause).__name__}: {cause}")  # a store's URI in it loses its password
                self._sink.write(batch(tags={ERROR_TAG: error_tag[:MAX_TAG_CHARS]}))
        except StoreFault:  # the store cannot take the note either (a full disk): the cause is what to say
            pass
        finally:
            self._end_run(status_for(cause))
        if cause is not interrupt:
            discard_interrupt()  # the run already ended for another reason, or FINISHED: its work is done
        if failure is not None and error is None:
            raise failure

    def _end_run(self, status: str) -> None:
        """End the run on the server; when the server is lost, in the journal too (MLflow's run stack is popped either way)."""
        import mlflow

        kept = self._kept_end_time if status == "FINISHED" else None
        ended = end(status, kept or int(time.time() * 1000))
        if status == "KILLED":
            record_killed(self.run_id)
        try:
            mlflow.end_run(status=status)
            if kept:  # MLflow's end_run takes no end time: the run's own is put back
                self._sink.write(ended)
        except Exception as err:
            fault = store_fault(err, self.uri)
            if fault is not None:  # left RUNNING: the next stage or `tracking doctor` ends it
                log.warning(
                    "run %s could not be ended %s in %s (%s); the next stage or `tracking doctor` marks it FAILED",
                    self.run_id,
                    status,
                    self.uri,
                    fault,
                )
            elif not server_unavailable(err):
                raise
            else:
                self._sink.lose(err)
        if self._sink.offline:
            self._sink.write(ended)
        report = self._sink.close()
        if report is not None:
            log.warning(report)

    def _sync_kept_offline(self, run_id: str) -> str:
        """Upload what an earlier stage of this run kept offline before resuming it; return the run's id there."""
        folder = journal_folder(self.root, run_id)
        if not has_journal(folder):
            return run_id
        from tracking.store.sync import sync_journal

        done = sync_journal(folder, self.client, self.uri)
        log.info(done.line)
        return done.run_id

    def _close_writer(self) -> TrackingError | None:
        """Wait for background writes; a failed one comes back as a `TrackingError` (`_end` reports it on stderr)."""
        try:
            self._writer.close()
        except TrackingError as err:
            failure = err
        except Exception as err:
            failure = TrackingServerError(
                f"writing to the MLflow store {shown(self.uri)} failed ({err}); check the store and re-run"
            )
            failure.__cause__ = err
        else:
            return None
        return failure

    @property
    def uri(self) -> str:
        return tracking_uri(self.root or project_root())

    def _check_resumable(self, run_id: str) -> None:
        """The run to resume (the train stage's, named by outputs/run.json) must be in the store and not deleted:
        DVC takes the outputs naming it as up to date after `rm mlflow.db`, so this stage is the first to see it."""
        from mlflow.exceptions import MlflowException

        from tracking.store.recorded import RecordedRun, fix_for

        try:
            info = self.client.get_run(run_id).info
            gone = info.lifecycle_stage == "deleted"
            if self.keep_end_time and info.status == "FINISHED":
                self._kept_end_time = info.end_time
        except MlflowException as err:
            if getattr(err, "error_code", "") != "RESOURCE_DOES_NOT_EXIST":
                raise
            gone = True
        if gone:
            recorded = RecordedRun(RUN_FILE, run_id, TRAIN)
            raise RunStateError(
                f"{recorded.describe(shown(self.uri))} (the store was deleted or replaced, or the run deleted), "
                "so DVC takes the outputs as up to date",
                fix=fix_for([recorded]),
            )

    def in_background(self, write: Callable[[], object]) -> None:
        """Run `write` on the background writer, so it overlaps training; it completes before the run ends."""
        self._writer.submit(write)

    def log_params(self, flat: dict[str, Any]) -> None:
        """Every param under its dotted name, as text spelled the way YAML and `dvc exp show` spell it (null, true).

        Secret-looking values (a credential's name, a token, a URL's password: tracking/redaction.py)
        are logged as `<redacted>`; the tag `tracking.redacted_params` says which and why, and a warning, once per
        process, that dvc.lock and DVC's run cache still hold them.
        """
        logged, reasons = {}, {}
        for key, value in flat.items():
            logged[key], why = redact_param(key, value)
            if why:
                reasons[key] = why
        self._sink.write(batch(params=logged))
        if reasons:
            self.set_tags({REDACTED_PARAMS_TAG: "; ".join(f"{key}: {why}" for key, why in reasons.items())})
            _warn_secret_params(tuple(reasons))

    def log_metrics(self, metrics: dict[str, float], step: int | None = None, wait: bool = True) -> None:
        """Log metrics; with `wait=False` they are written in the background, gathered into one write at most every
        `METRICS_FLUSH_S` (each keeps the time it was logged at), all of them before the run ends."""
        now = int(time.time() * 1000)
        op = batch(metrics=[(key, float(value), now, step or 0) for key, value in metrics.items()])
        if wait:
            self._sink.write(op)
            return
        with self._queued_lock:
            self._queued_metrics.extend(op["metrics"])
        if time.monotonic() >= self._next_flush:
            self._next_flush = time.monotonic() + METRICS_FLUSH_S
            self._writer.submit(self._flush_metrics)

    def _flush_metrics(self) -> None:
        """Write the metrics queued so far, in the order they were logged (on the background writer)."""
        with self._queued_lock:
            queued, self._queued_metrics = self._queued_metrics, []
        if queued:
            self._sink.write(batch(metrics=queued))

    def set_tags(self, tags: dict[str, Any]) -> None:
        self._sink.write(batch(tags={key: str(value)[:MAX_TAG_CHARS] for key, value in tags.items()}))

    def log_weights(self, trained: str | None = None, initial: str | None = None) -> None:
        """The SHA-256 of the trained and/or the initial weights, as the provenance tags `tracking diff` and
        `tracking rerun` compare (tracking.data.hashing.weights_sha256 computes them)."""
        hashes = {WEIGHTS_TAG: trained, INITIAL_WEIGHTS_TAG: initial}
        self.set_tags({tag: digest for tag, digest in hashes.items() if digest is not None})

    def log_provenance(self, record: dict[str, Any], packages: list[str]) -> None:
        """`provenance.json`, the package list and the git diff as artifacts; scalars as `prov.*` tags."""
        self.log_json(record, "provenance/provenance.json")
        self.log_text("\n".join(packages) + "\n", "provenance/packages.txt")
        git = record.get("git", {})
        if git.get("diff"):
            diff = encode_diff(git["diff"])  # git's bytes exactly, so that it applies byte for byte
            self._write_file("provenance/uncommitted.diff", lambda path: path.write_bytes(diff))
        tags = to_tags(record)
        tags[MLFLOW_GIT_COMMIT_TAG] = git.get("commit", "")
        if git.get("branch"):
            tags[MLFLOW_GIT_BRANCH_TAG] = git["branch"]
        if os.environ.get(DVC_EXP_NAME):
            tags[DVC_EXP_NAME_TAG] = os.environ[DVC_EXP_NAME]
        if os.environ.get(DVC_EXP_BASELINE_REV):
            tags[DVC_BASELINE_REV_TAG] = os.environ[DVC_EXP_BASELINE_REV]
        self.set_tags(tags)

    def log_dataset(self, manifest: Manifest, x: Any, y: Any, location: Path, context: str) -> None:
        """The data as an MLflow dataset input whose digest is the full-content SHA-256 (truncated to fit)."""
        import mlflow

        with warnings.catch_warnings():
            # MLflow registers two identical resolvers for local paths and warns that it picked one of them.
            warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
            dataset = mlflow.data.from_numpy(
                x,
                targets=y,
                source=location.resolve().as_uri(),
                name=manifest.source,
                digest=manifest.content_sha256[:DATASET_DIGEST_CHARS],
            )
        tags = {DATASET_CONTEXT_TAG: context, DATASET_CONTENT_TAG: manifest.content_sha256}
        self._sink.write(inputs([{"dataset": dataset._to_mlflow_entity().to_dictionary(), "tags": tags}]))
        self.log_json(manifest.as_dict(), LOGGED_MANIFEST)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self._sink.write(artifact(path, artifact_path))

    def log_figure(self, figure: Any, name: str) -> None:
        self._write_file(name, lambda path: figure.savefig(path))

    def log_json(self, data: Any, name: str) -> None:
        self._write_file(name, lambda path: path.write_text(json.dumps(data, indent=2), encoding="utf-8"))

    def log_text(self, text: str, name: str) -> None:
        self._write_file(name, lambda path: path.write_text(text, encoding="utf-8"))

    def _write_file(self, name: str, save: Callable[[Path], object]) -> None:
        """Save content as the artifact `name` (folder/file) through a temporary file (the journal keeps a copy)."""
        folder, _, filename = name.rpartition("/")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / filename
            save(path)
            self._sink.write(artifact(path, folder or None))

    def log_keras_model(self, model: Any, example: Any) -> None:
        """The trained model as an MLflow model (Keras flavour) with its signature and the packages it needs; a model
        of several inputs or outputs has them named in the signature.

        The signature's call on `example` leaves the model's random generators where they were, so that a layer
        drawing at inference (a VAE's sampling) scores afterwards as it would have without tracking."""
        import mlflow
        from keras import ops, tree

        from tracking.determinism.backend import BACKEND_PACKAGES, configured
        from tracking.determinism.seeding import generators_kept
        from tracking.provenance.software import installed_version

        with generators_kept(model):  # as NumPy: a PyTorch tensor that requires grad has no `__array__`
            outputs = tree.map_structure(ops.convert_to_numpy, model(example, training=False))
        inputs = _named(example, [tensor.name for tensor in getattr(model, "inputs", None) or []])
        outputs = _named(outputs, list(getattr(model, "output_names", None) or []))
        signature = mlflow.models.infer_signature(inputs, outputs)
        # The backend the model was trained on, as installed (tensorflow-cpu where that is the build), and Keras.
        requirements = [
            f"{name}=={version}"
            for name in (*BACKEND_PACKAGES[configured()], "keras")
            if (version := installed_version(name)) is not None
        ]
        self._sink.write(model_op(model, "model", signature.to_dict(), requirements))


def _named(data: Any, names: list[str]) -> Any:
    """One array, or a model's several inputs or outputs as a dict of arrays by name (a list's by the model's
    `names` for it, as MLflow's signature takes them)."""
    import numpy as np

    if isinstance(data, dict):
        return {str(key): np.asarray(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        keys = names if len(names) == len(data) else [str(index) for index in range(len(data))]
        return {key: np.asarray(value) for key, value in zip(keys, data, strict=True)}
    return np.asarray(data)


def run_name(stage: str) -> str:
    """The name of a run no caller named: the DVC experiment's (`dvc exp run` sets it), else the stage and six
    random hex digits, e.g. `train-3f9a1c`.

    Never MLflow's own name: the store draws it from Python's `random`, which `seed_frameworks` seeded before the
    run opens, so every `dvc repro` drew the same name (and a SQLite store's draw, made in this process, moved the
    seeded stream a server's does not). `secrets` reads the operating system's randomness and leaves the seeded
    streams as they were."""
    import secrets

    return os.environ.get(DVC_EXP_NAME) or f"{stage}-{secrets.token_hex(3)}"


@functools.cache
def _warn_secret_params(keys: tuple[str, ...]) -> None:
    """Say once per process which params held secrets, and that DVC keeps them (every param a stage declares is
    written to dvc.lock, which is committed, and to DVC's run cache)."""
    log.warning(
        "param(s) %s hold secret-looking values: MLflow gets <redacted> (tag %s says why), but dvc.lock and DVC's "
        "run cache hold them as params.yaml does; keep secrets in the environment and have the loader read them "
        "(docs/configuration.md#secrets)",
        ", ".join(keys),
        REDACTED_PARAMS_TAG,
    )
