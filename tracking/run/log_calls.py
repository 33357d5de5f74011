"""What an open run records: params (secrets redacted), metrics (epochs gathered into few writes), tags,
provenance, the data set, files and the Keras model, each as writes to the run's `RunSink` (the MLflow store,
or the offline journal while the server is lost). `Tracker` (tracking/run/tracker.py) owns the run's life and
inherits these calls, so where a record goes is decided in the sink and not by each call.
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
from typing import Any

from tracking.data.manifest import LOGGED_MANIFEST, Manifest
from tracking.env import DVC_EXP_BASELINE_REV, DVC_EXP_NAME
from tracking.names import (
    DATASET_CONTENT_TAG,
    DATASET_CONTEXT_TAG,
    DVC_BASELINE_REV_TAG,
    DVC_EXP_NAME_TAG,
    INITIAL_WEIGHTS_TAG,
    MAX_TAG_CHARS,
    MLFLOW_GIT_BRANCH_TAG,
    MLFLOW_GIT_COMMIT_TAG,
    REDACTED_PARAMS_TAG,
    WEIGHTS_TAG,
)
from tracking.provenance import LOCKED_DEPS_ARTIFACT, RECORD_ARTIFACT, to_tags
from tracking.redaction import redact_name, redact_param
from tracking.run.writer import BackgroundWriter
from tracking.store.operations import artifact, batch, inputs
from tracking.store.operations import model as model_op
from tracking.store.sinks import RunSink

log = logging.getLogger(__name__)

DATASET_DIGEST_CHARS = 32  # MLflow's datasets.digest column holds at most 36 characters.
# Metrics logged with `wait=False` (every epoch's) reach the store at most this often, gathered into one write:
# the default model's epochs take 0.2 s, and 20 writes of one epoch each cost 37 ms of the cores training runs
# on against 10 ms for one write of all 20 (over HTTP each write is also a round trip). The first goes at once.
METRICS_FLUSH_S = 1.0


class QueuedMetrics:
    """Metric values that need not wait (every epoch's, every system metrics sample), kept in the order they were
    logged until the background writer takes them: the first at once, then at most every `METRICS_FLUSH_S`. The
    training thread and the system metrics sampler add to it; only the writer touches the store."""

    def __init__(self) -> None:
        self._values: list[list[Any]] = []
        self._lock = threading.Lock()
        self._next_flush = 0.0

    def add(self, values: list[list[Any]]) -> bool:
        """Queue `values`; True when a flush is due."""
        with self._lock:
            self._values.extend(values)
            if time.monotonic() < self._next_flush:
                return False
            self._next_flush = time.monotonic() + METRICS_FLUSH_S
            return True

    def take(self) -> list[list[Any]]:
        """Every value queued so far, in order; the queue is left empty."""
        with self._lock:
            taken, self._values = self._values, []
        return taken


class RunLogCalls:
    """The `log_*` calls of an open run, written through its sink; the background writer takes those that need
    not wait (epochs' metrics)."""

    _sink: RunSink
    _writer: BackgroundWriter
    _queued: QueuedMetrics

    def log_params(self, flat: dict[str, Any]) -> None:
        """Every param under its dotted name, as text spelled the way YAML and `dvc exp show` spell it (null, true).

        Secret-looking values (a credential's name, a token, a URL's password: tracking/redaction/)
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
        self.queue_metrics(op["metrics"])

    def queue_metrics(self, values: list[list[Any]]) -> None:
        """Queue metric values `[key, value, timestamp in ms, step]` for the background writer, without waiting: the
        caller (the training thread, the system metrics sampler) never waits for the store."""
        if self._queued.add(values):
            self._writer.submit(self._flush_metrics)

    def _flush_metrics(self) -> None:
        """Write the metrics queued so far, in the order they were logged (on the background writer)."""
        queued = self._queued.take()
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
        """`provenance.json` and the package list as artifacts; the searchable scalars as `prov.*` tags. The working
        tree is in git (`prov.git.snapshot`), never here; names from outside (the branch, DVC's experiment) pass the
        redactor."""
        self.log_json(record, RECORD_ARTIFACT)
        self.log_text("\n".join(packages) + "\n", "provenance/packages.txt")
        git = record.get("git", {})
        tags = to_tags(record)
        tags[MLFLOW_GIT_COMMIT_TAG] = git.get("commit", "")
        if git.get("branch"):
            tags[MLFLOW_GIT_BRANCH_TAG] = git["branch"]
        if os.environ.get(DVC_EXP_NAME):
            tags[DVC_EXP_NAME_TAG] = redact_name(os.environ[DVC_EXP_NAME])
        if os.environ.get(DVC_EXP_BASELINE_REV):
            tags[DVC_BASELINE_REV_TAG] = redact_name(os.environ[DVC_EXP_BASELINE_REV])
        self.set_tags(tags)

    def amend_provenance(self, record: dict[str, Any], amendment: dict[str, dict[str, Any]]) -> None:
        """Fields known only once training ran (a seed whose generators never drew): merged section by section
        into `record` (as logged by `log_provenance`), which is logged again, and tagged where searchable."""
        for section, fields in amendment.items():
            record[section] = {**record.get(section, {}), **fields}
        self.log_json(record, RECORD_ARTIFACT)
        self.set_tags(to_tags(amendment))

    def log_locked_deps(self, deps: dict[str, dict[str, str]]) -> None:
        """DVC's locked hashes of the deps of the stages that made the run ({stage: {path: md5}}): all of them as an
        artifact, the training data's as a tag."""
        record = {"dvc": {"deps": deps}}
        self.log_json(record, LOCKED_DEPS_ARTIFACT)
        self.set_tags(to_tags(record))

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

    def log_bytes(self, data: bytes, name: str) -> None:
        self._write_file(name, lambda path: path.write_bytes(data))

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


def prepare_model_logging() -> None:
    """Do once per process, beside training (on the background writer), what `log_keras_model` would do after fit:
    import MLflow's Keras flavour, and build MLflow's map of the installed packages, which it reads to check the
    model's requirements against the environment (0.3 s of CPU on a quiet core, 1 to 2 s on a loaded one, as
    `importlib.metadata` walks every installed distribution's files)."""
    import mlflow.keras  # noqa: F401
    from mlflow.utils import requirements_utils

    # Private, so looked up: an MLflow without it builds the map when the model is logged, as before.
    build_map = getattr(requirements_utils, "_init_modules_to_packages_map", None)
    if build_map is not None:
        build_map()


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
