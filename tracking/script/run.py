"""`tracking.start`: a team's own training script opens one MLflow run with our provenance, seeds and determinism.

```python
import tracking
with tracking.start(params="params.yaml", seeds={"base": "seed"}) as run:
    model = run.seeded(build_model())
    run.log_data(x_train, y_train)
    model.fit(x_train, y_train, callbacks=[run.callback()], ...)
    run.log_model(model); run.log_metrics(scores)
```

The run records what our train stage records (`prov.*`: seeds, determinism requested and effective, software,
CPU/GPU, git commit and redacted diff, the running DVC stage's dependencies hashed now), through the same
`Tracker` (honest endings, the offline journal) and the same seeding by position. A source of randomness the
script decided itself (Keras's own `fit(shuffle=True)`, a model it did not hand to `run.seeded`) is recorded as
decided by it, never as a seed that went unused.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from tracking.config.params import DeterminismParams
from tracking.env import DVC_STAGE, TRACKING_EXPERIMENT, TRACKING_RERUN_OF
from tracking.errors import ParamsError, UsageError
from tracking.names import RERUN_OF_TAG
from tracking.script.ending import end_at_exit, user_errors_in_one_line
from tracking.script.params import ScriptParams, read_params
from tracking.script.process import reproducible_script
from tracking.script.repeat import ScriptRepeat, repeat_from_env

# The stage tag of a run whose script DVC did not start.
SCRIPT_STAGE = "script"
# Who decided a source of randomness the script did not hand to the run, as its `prov.seeds.<source>` says.
DECIDED_BY_SCRIPT = {
    "init": "script: the model's own initializers (not passed to run.seeded), drawn from seeds.base",
    "dropout": "script: the model's own generators (not passed to run.seeded), drawn from seeds.base",
    "augment": "script: the model's own generators (not passed to run.seeded), drawn from seeds.base",
    "shuffle": "script: Keras fit's own order (run.batches not used), drawn from seeds.base",
}

# `prov.model.outputs` of a classifier whose loss is a function of the script's own: only its outputs could tell
# logits from probabilities, and predicting would move the generators of a model that draws at inference.
UNDECLARED_OUTPUTS = "not declared by the loss (a loss function of the script's own)"


def start(
    params: str | Path = "params.yaml",
    seeds: Mapping[str, str | int] | None = None,
    experiment: str | None = None,
    determinism: Mapping[str, Any] | None = None,
) -> ScriptRun:
    """Set the process up for a reproducible run and open it: the run ends with the `with` block it heads, or
    else when the script exits (FINISHED after a clean exit, FAILED on an uncaught error, KILLED on Ctrl-C).

    `seeds` maps our sources of randomness (base, init, shuffle, dropout, augment) to the keys of `params` that
    hold them (or to seeds); `determinism` overrides our determinism defaults (op_determinism, intra_op_threads,
    inter_op_threads, onednn); `experiment` defaults to the project folder's name. Call it before training; if
    Keras is already imported, the script is restarted once with the hash seed and oneDNN set.
    """
    from tracking.store.location import find_project

    user_errors_in_one_line()
    root = find_project() or Path.cwd()
    read = read_params(root / params, seeds)
    repeat = repeat_from_env()
    if repeat is not None:  # a repeat of `tracking calibrate`: its variant's seeds
        read = replace(
            read,
            seeds=repeat.seeds(read.seeds),
            origins={**read.origins, "repeat": f"{repeat.variant} {repeat.repeat}"},
        )
    try:
        wanted = DeterminismParams(**dict(determinism or {}))
    except Exception as err:  # pydantic's ValidationError: which field and why, in one line
        first = str(err).splitlines()
        raise ParamsError(
            f"tracking.start(determinism=...): {' '.join(first[1:3]).strip() or first[0]}",
            fix=f"valid keys: {', '.join(DeterminismParams.model_fields)}",
        ) from err
    reproducible_script(read.seeds, wanted)
    return ScriptRun(root, read, wanted, experiment or os.environ.get(TRACKING_EXPERIMENT) or root.name, repeat).open()


class ScriptRun:
    """One MLflow run of a team's script: open it with `with`; it ends FINISHED, FAILED or KILLED as the block does."""

    def __init__(
        self,
        root: Path,
        params: ScriptParams,
        determinism: DeterminismParams,
        experiment: str,
        repeat: ScriptRepeat | None = None,
    ) -> None:
        self.root = root
        self.repeat = repeat
        self.params = params
        self.seeds = params.seeds
        self.determinism = determinism
        self.experiment = experiment
        self.stage = os.environ.get(DVC_STAGE) or None
        self._tracker: Any = None
        self._record: dict[str, Any] = {}
        self._used: dict[str, Any] = {"base": self.seeds.base, "hash": self.seeds.hash}
        self._model: dict[str, Any] = {}
        self._unattributed = ""
        self._example: Any = None
        self._classifier: bool | None = None

    @property
    def run_id(self) -> str:
        return self._open().run_id

    def __enter__(self) -> ScriptRun:
        return self

    def open(self) -> ScriptRun:
        """Seed the frameworks, open the MLflow run and log the params and provenance; ended by `__exit__` or at exit."""
        from tracking.determinism.process import apply_determinism
        from tracking.provenance.git import open_repository
        from tracking.run.tracker import Tracker
        from tracking.store.excluded import exclude_store_files

        exclude_store_files(open_repository(self.root), self.root)
        self.effective = apply_determinism(self.determinism, self.seeds)
        rerun_of = os.environ.get(TRACKING_RERUN_OF)
        tags = {RERUN_OF_TAG: rerun_of} if rerun_of else {}
        repeat = self.repeat
        tracker = Tracker(
            self.experiment,
            self.root,
            stage=self.stage or SCRIPT_STAGE,
            tags={**tags, **(repeat.tags() if repeat else {})},
            nested=repeat is not None,
            parent_run_id=repeat.parent_run_id if repeat else None,
            run_name=f"{repeat.variant}-{repeat.repeat}" if repeat else None,
        )
        self._tracker = tracker.__enter__()
        try:
            tracker.log_params(self.params.flat)
            tracker.in_background(lambda: self._log_provenance(tracker))
        except BaseException as err:
            tracker.__exit__(type(err), err, err.__traceback__)
            self._tracker = None
            raise
        self._cancel_exit = end_at_exit(lambda error: self.__exit__(type(error), error, None))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        """End the run: FINISHED when `error` is None, FAILED on an error, KILLED on Ctrl-C or SIGTERM."""
        tracker, self._tracker = self._tracker, None
        if tracker is None:
            return
        self._cancel_exit()
        try:
            tracker.in_background(lambda: self._log_seeds(tracker))
        finally:
            tracker.__exit__(kind if error else None, error, tb)

    def _open(self) -> Any:
        if self._tracker is None:
            raise UsageError(
                "the run is not open", fix="use it inside `with tracking.start(...) as run:` (the block is the run)"
            )
        return self._tracker

    def _log_provenance(self, tracker: Any) -> None:
        """The provenance record as our train stage logs it, with the script's stage, command and seeds' origins."""
        from tracking.provenance.software import installed_packages

        self._record = script_record(self.root, self.params, self.determinism, self.effective, self._used, self.stage)
        tracker.log_provenance(self._record, installed_packages())

    def _log_seeds(self, tracker: Any) -> None:
        """At the end: each seed the run used, who decided each source it did not, and the seeded model's counts."""
        from tracking.provenance import to_tags

        seeds = {name: self._used.get(name, DECIDED_BY_SCRIPT.get(name)) for name in ("base", *DECIDED_BY_SCRIPT)}
        unattributed = {"unattributed": self._unattributed} if self._unattributed else {}
        final: dict[str, Any] = {"seeds": {**seeds, "hash": self.seeds.hash, **unattributed}}
        if self._model:
            final["model"] = self._model
        tracker.set_tags(to_tags(final))
        if self._record:
            tracker.log_json({**self._record, **final}, "provenance/provenance.json")

    def seeded(self, model: Any) -> Any:
        """`model` with every random initial weight and generator re-drawn from the run's seeds by position
        (tracking/determinism/seeding.py), as our stages seed theirs; refused for a model that already trained."""
        from tracking.data.hashing import weights_sha256
        from tracking.determinism.seeding import reset_global_streams, seed_model

        tracker = self._open()
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None and getattr(optimizer, "built", False) and int(optimizer.iterations.numpy()) > 0:
            raise UsageError(
                f"run.seeded(): the model already trained {int(optimizer.iterations.numpy())} step(s), so re-seeding "
                "would throw its training away",
                fix="call run.seeded(model) right after building the model, before fit",
            )
        inputs = getattr(model, "inputs", None) or []
        if not inputs:
            raise UsageError(
                "run.seeded(): the model is not built (it has no inputs yet)",
                fix="build it first, e.g. start a Sequential with keras.Input(shape=...)",
            )
        report = seed_model(model, created_weights(model), self.seeds, tuple(inputs[0].shape[1:]))
        reset_global_streams(self.seeds)
        self._model = report.as_record()
        self._unattributed = self._model.pop("unattributed", "")
        self._used.update(init=self.seeds.init, dropout=self.seeds.dropout, augment=self.seeds.augment)
        tracker.log_weights(initial=weights_sha256(model.get_weights()))
        return model

    def batches(self, x: Any, y: Any, batch_size: int, epochs: int) -> Any:
        """The training batches of all `epochs` in the order drawn from the run's shuffle seed (tf.data); fit it with
        `epochs=epochs, steps_per_epoch=math.ceil(len(y) / batch_size), shuffle=False`."""
        from tracking.training.batches import epoch_batches

        self._open()
        self._used["shuffle"] = self.seeds.shuffle
        return epoch_batches(x, y, batch_size, epochs, self.seeds.shuffle)

    def callback(self) -> Any:
        """A Keras callback logging every epoch's metrics to the run (and acting on Ctrl-C between batches)."""
        from tracking.training.callback import MlflowMetricsCallback

        return MlflowMetricsCallback(self._open())

    def log_data(self, x: Any, y: Any, name: str = "training") -> str:
        """The training data as the run's MLflow dataset and data manifest, its digest the full-content SHA-256 of x
        and y (as our prepare stage hashes a split); returned."""
        import numpy as np

        from tracking.data.hashing import array_sha256, combine
        from tracking.data.manifest import Manifest

        tracker = self._open()
        x, y = np.asarray(x), np.asarray(y)
        hashes = {"train/x": array_sha256(x), "train/y": array_sha256(y)}
        labels = y.ndim == 1 and np.issubdtype(y.dtype, np.integer) and len(y) > 0
        classes = int(y.max()) + 1 if labels else None
        manifest = Manifest(
            source=name,
            source_sha256=combine(hashes),
            content_sha256=combine(hashes),
            arrays=hashes,
            target_shape=[int(size) for size in y.shape[1:]],
            n_samples={"train": len(y)},
            shapes={"train": [int(size) for size in x.shape[1:]]},
            n_outputs=classes or int(np.prod(y.shape[1:], dtype=np.int64)),
            n_classes=classes,
        )
        tracker.log_dataset(manifest, x, y, location=self.root, context="training")
        self._example = x[:2]
        one_hot = y.ndim == 2 and len(y) > 0 and bool(np.isin(y, (0, 1)).all() and (y.sum(axis=1) == 1).all())
        self._classifier = bool(labels) or one_hot
        return manifest.content_sha256

    def log_model(self, model: Any) -> str:
        """The trained weights' SHA-256 (`prov.weights_sha256`, what `tracking rerun` compares), the model's dtype
        policy, jit_compile and what its outputs are (`prov.model.*`, as our train stage records them), and the
        model as an MLflow model (its signature from the logged data); returns the hash."""
        import keras

        from tracking.data.hashing import weights_sha256
        from tracking.training.scoring import declared_output_kind

        tracker = self._open()
        digest = weights_sha256(model.get_weights())
        tracker.log_weights(trained=digest)
        self._model.update(dtype_policy=keras.config.dtype_policy().name, jit_compile=str(model.jit_compile).lower())
        if self._classifier is not None:  # the task is known from the logged targets: class labels or one-hot
            kind = (declared_output_kind(model) or UNDECLARED_OUTPUTS) if self._classifier else "values"
            self._model["outputs"] = kind
        if self._example is not None:
            tracker.log_keras_model(model, self._example)
        return digest

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Metrics of the run (a test score, a final loss)."""
        self._open().log_metrics(dict(metrics), step=step)


def created_weights(model: Any) -> Any:
    """The weights of a built model with the initializer each was drawn from, found by Keras's naming (a layer's
    `kernel` from its `kernel_initializer`); one whose initializer is not found is left out and reported by the
    seeding as randomness no seed covers."""
    from keras import initializers

    from tracking.determinism.seeding import Created, walk_layers

    created = Created()
    for layer in walk_layers(model):
        for variable in layer._trainable_variables + layer._non_trainable_variables:
            initializer = getattr(layer, f"{variable.name}_initializer", None)
            if initializer is not None:
                created.weights.append((layer, variable, initializers.get(initializer)))
    return created


def script_record(
    root: Path,
    params: ScriptParams,
    determinism: DeterminismParams,
    effective: Any,
    seeds: dict[str, Any],
    stage: str | None,
) -> dict[str, Any]:
    """What a script's run records (`provenance.json`, the `prov.*` tags): our record (tracking/provenance) with
    `seeds` as given, the running DVC `stage`'s deps hashed now, and the script's stage, command and seeds' origins."""
    from tracking.determinism.settings import as_record
    from tracking.provenance import capture

    record = capture(root, seeds, as_record(determinism, effective), running=stage)
    record["script"] = {
        "stage": stage or "",
        "command": shlex.join(sys.orig_argv[1:]),
        "params": Path(os.path.relpath(params.path, root)).as_posix(),
        "seeds_from": dict(params.origins),
    }
    return record
