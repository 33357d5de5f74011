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

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tracking.config.params import DeterminismParams
from tracking.determinism import backend
from tracking.env import DVC_STAGE, TRACKING_EXPERIMENT, TRACKING_RERUN_OF
from tracking.errors import ParamsError, UsageError
from tracking.names import RERUN_OF_TAG
from tracking.script.ending import end_at_exit, user_errors_in_one_line
from tracking.script.fit_arrays import first_rows, for_mlflow
from tracking.script.initial_weights import created_weights, keep_moved
from tracking.script.interpreter_setup import reproducible_script
from tracking.script.logged_data import logged_data
from tracking.script.model_outputs import declared_outputs
from tracking.script.provenance_record import script_record
from tracking.script.repeat_context import ScriptRepeat, repeat_from_env
from tracking.script.seed_use import DECIDED_BY_SCRIPT, OWN_ORDER, ReadSeeds
from tracking.script.team_params import ScriptParams, read_params

if TYPE_CHECKING:
    from tracking.training.callback import EpochSteps

log = logging.getLogger(__name__)

# The stage tag of a run whose script DVC did not start.
SCRIPT_STAGE = "script"


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
    wanted = script_determinism(determinism)
    reproducible_script(read.seeds, wanted)
    return ScriptRun(root, read, wanted, experiment or os.environ.get(TRACKING_EXPERIMENT) or root.name, repeat).open()


def script_determinism(determinism: Mapping[str, Any] | None) -> DeterminismParams:
    """Our determinism defaults with a script's overrides; the backend is the team's Keras choice (KERAS_BACKEND,
    keras.json) unless they name one; a bad key or value is one line."""
    try:
        return DeterminismParams(**{"backend": backend.configured(), **dict(determinism or {})})
    except Exception as err:  # pydantic's ValidationError: which field and why, in one line
        first = str(err).splitlines()
        raise ParamsError(
            f"tracking.start(determinism=...): {' '.join(first[1:3]).strip() or first[0]}",
            fix=f"valid keys: {', '.join(DeterminismParams.model_fields)}",
        ) from err


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
        self._seeds = params.seeds
        self.determinism = determinism
        self.experiment = experiment
        self.stage = os.environ.get(DVC_STAGE) or None
        self._tracker: Any = None
        self._record: dict[str, Any] = {}
        self._used: dict[str, Any] = {"base": self._seeds.base, "hash": self._seeds.hash}
        self._model: dict[str, Any] = {}
        self._unused: dict[str, str] = {}  # sources run.seeded found nothing of in the model, and why
        self._seeded: set[str] = set()  # sources run.seeded seeded something of: used if it drew in training
        self._seeded_models: list[Any] = []  # handed to run.seeded, their generators at the seeds' states
        self._unattributed = ""
        self._example: Any = None
        self._classifier: bool | None = None
        self._models: list[Any] = []  # handed to seeded or log_model: whether Keras's fit trained them
        self._epoch_steps: EpochSteps | None = None  # the step axis every run.callback() logs epochs on

    @property
    def run_id(self) -> str:
        return self._open().run_id

    @property
    def seeds(self) -> ReadSeeds:
        """The run's seeds for the script's own use (a loop's noise, an augmentation's generator): each source the
        script reads is recorded as used (`prov.seeds.<source>`), not as decided by the script."""
        return ReadSeeds(self._seeds, self._used)

    def __enter__(self) -> ScriptRun:
        return self

    def open(self) -> ScriptRun:
        """Seed the frameworks, open the MLflow run and log the params and provenance; ended by `__exit__` or at exit."""
        from tracking.determinism.process import apply_determinism
        from tracking.provenance.git import open_repository
        from tracking.run.tracker import Tracker
        from tracking.script.autolog import pause_keras_autolog
        from tracking.store.excluded import exclude_store_files

        exclude_store_files(open_repository(self.root), self.root)
        self.effective = apply_determinism(self.determinism, self._seeds)
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
        self._resume_autolog = pause_keras_autolog()
        try:
            tracker.log_params(self.params.flat)
            tracker.in_background(lambda: self._log_provenance(tracker))
        except BaseException as err:
            try:
                tracker.__exit__(type(err), err, err.__traceback__)
            finally:
                self._tracker = None
                self._resume_autolog()
            raise
        self._cancel_exit = end_at_exit(lambda error: self.__exit__(type(error), error, None))
        if repeat is None:  # a calibration's repeats are counted by `tracking calibrate`, not named one by one
            import mlflow

            name = mlflow.active_run().info.run_name  # the run the tracker just started
            log.info(f"tracking: MLflow run {name} ({tracker.run_id}) in experiment '{self.experiment}'")
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
            try:
                tracker.__exit__(kind if error else None, error, tb)
                if error is None and self.repeat is None:
                    log.info(
                        f"tracking: run {tracker.run_id} finished; `tracking judge {tracker.run_id[:8]}` judges it "
                        "against the project's calibration (`tracking calibrate`)"
                    )
            finally:
                self._resume_autolog()

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
        from tracking.determinism.seeding import idle_streams
        from tracking.provenance import to_tags

        idle = idle_streams(self._seeded_models, self._seeds)
        seeded = {source: getattr(self._seeds, source) for source in self._seeded - idle.keys()}
        decided = {**DECIDED_BY_SCRIPT, **self._unused, **idle}
        if not any(getattr(model, "train_function", None) is not None for model in self._models):
            decided["shuffle"] = OWN_ORDER
        used = {**seeded, **self._used}
        seeds = {name: used.get(name, decided.get(name)) for name in ("base", *decided)}
        unattributed = {"unattributed": self._unattributed} if self._unattributed else {}
        final: dict[str, Any] = {"seeds": {**seeds, "hash": self._seeds.hash, **unattributed}}
        if self._model:
            final["model"] = self._model
        if self._record:
            tracker.amend_provenance(self._record, final)
        else:
            tracker.set_tags(to_tags(final))

    def seeded(self, model: Any) -> Any:
        """`model` with every random initial weight and generator re-drawn from the run's seeds by position
        (tracking/determinism/seeding.py), as our stages seed theirs; refused for a model that already trained."""
        from tracking.data.hashing import weights_sha256
        from tracking.determinism.seeding import reset_global_streams, seed_model
        from tracking.determinism.unattributed import is_model_of_models
        from tracking.training.building import build_unbuilt
        from tracking.training.model import with_kept_digest

        tracker = self._open()
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None and getattr(optimizer, "built", False) and int(optimizer.iterations.numpy()) > 0:
            raise UsageError(
                f"run.seeded(): the model already trained {int(optimizer.iterations.numpy())} step(s), so re-seeding "
                "would throw its training away",
                fix="call run.seeded(model) right after building the model, before fit",
            )
        inputs = getattr(model, "inputs", None) or []
        own_call = not inputs and not is_model_of_models(model)  # subclassed: built and traced on the data's sample
        if own_call and self._example is not None:
            build_unbuilt(model, type(model).__name__, None, self._example)
        if not inputs and not model.weights:  # a model of built models (a GAN's) has weights but no inputs
            raise UsageError(
                "run.seeded(): the model is not built (it has no inputs or weights yet)",
                fix="call run.log_data(x, y) before run.seeded(model), which then calls it on the data's first "
                "samples to build it, or build it first, e.g. start a Sequential with keras.Input(shape=...)",
            )
        created = created_weights(model)
        keep_moved(created)
        self._models.append(model)
        self._seeded_models.append(model)
        example = self._example if own_call else None
        shape = tuple(inputs[0].shape[1:]) if inputs else None
        report = with_kept_digest(seed_model(model, created, self._seeds, shape, example), created)
        reset_global_streams(self._seeds)
        self._model = report.as_record()
        self._unattributed = self._model.pop("unattributed", "")
        unused = report.unused()
        self._seeded.update(source for source in ("init", "dropout", "augment") if source not in unused)
        self._unused.update(unused)
        tracker.log_weights(initial=weights_sha256(model.get_weights()))
        return model

    def batches(
        self,
        x: Any,
        y: Any,
        batch_size: int,
        epochs: int,
        sample_weight: Any = None,
        augment: Callable[..., Any] | None = None,
    ) -> Any:
        """The training batches of all `epochs` in the order drawn from the run's shuffle seed, as the template's
        train stage draws them (tf.data); fit it with `epochs=epochs, steps_per_epoch=math.ceil(len(y) /
        batch_size), shuffle=False`. `x` and `y` as `fit` takes them (arrays, or dicts by input and output name);
        with `sample_weight`, batches are `(x, y, w)`; with `augment`, each batch is what `augment(x, y, seed)`
        returns, `seed` the stateless pair `[seeds.augment, step]` (`train.augment`'s contract; TensorFlow only)."""
        import numpy as np

        from tracking.data.arrays import n_rows
        from tracking.training.batches import epoch_batches

        self._open()
        self._used["shuffle"] = self._seeds.shuffle
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype="float32")
        if weights is not None and weights.shape != (n_rows(y),):
            raise UsageError(
                f"run.batches(): sample_weight has shape {weights.shape}, and y holds {n_rows(y)} samples",
                fix="give one weight per sample, as fit's sample_weight takes them",
            )
        if augment is not None:
            if backend.configured() != backend.TENSORFLOW:
                raise UsageError(
                    "run.batches(augment=...): augmentation maps a tf.data pipeline, which needs the TensorFlow "
                    f"backend (this one is {backend.configured()})",
                    fix="augment inside your loop, with keras.random and a SeedGenerator seeded from run.seeds.augment",
                )
            self._used["augment"] = self._seeds.augment
        return epoch_batches(
            x,
            y,
            batch_size,
            epochs,
            self._seeds.shuffle,
            sample_weight=weights,
            augment=augment,
            augment_seed=self._seeds.augment,
        )

    def callback(self) -> Any:
        """A Keras callback logging every epoch's metrics to the run (and acting on Ctrl-C between batches); every
        callback of the run logs on one step axis, so the epochs of several `fit` calls follow each other."""
        from tracking.training.callback import EpochSteps, MlflowMetricsCallback

        if self._epoch_steps is None:
            self._epoch_steps = EpochSteps()
        return MlflowMetricsCallback(self._open(), self._epoch_steps)

    def log_data(self, x: Any, y: Any = None, name: str = "training", sample_weight: Any = None) -> str:
        """The training data as the run's MLflow dataset and data manifest, its digest the full-content SHA-256 of
        every array of x and y (as our prepare stage hashes a split); returned. `x` and `y` are what `fit` takes:
        an array, or a dict (or list) of arrays for a model with named inputs or outputs, each array hashed under
        its key (`train/x/<key>`), so a renamed key changes the digest; `y` None for a model trained on `x` alone;
        `sample_weight`, where the script weights its samples, hashed as data too (`train/sample_weight`)."""
        tracker = self._open()
        data = logged_data(x, y, name, sample_weight)
        targets = None if y is None else for_mlflow(y, data.ys)
        tracker.log_dataset(data.manifest, for_mlflow(x, data.xs), targets, location=self.root, context="training")
        self._example = first_rows(x)
        self._classifier = data.classifier
        return data.manifest.content_sha256

    def log_model(self, model: Any, outputs: str | Mapping[str, str] | None = None) -> str:
        """The trained weights' SHA-256 (`prov.weights_sha256`, what `tracking rerun` compares), the model's dtype
        policy, jit_compile and what its outputs are (`prov.model.*`, as our train stage records them), and the
        model as an MLflow model (its signature from the logged data); returns the hash.

        `outputs` declares what the model outputs: `logits`, `probabilities` or `values`, or a mapping from each
        output's name to one of them; without it `prov.model.outputs` is what the compiled loss declares, else
        `unknown` (never a guess)."""

        from tracking.data.hashing import weights_sha256
        from tracking.determinism.unattributed import is_model_of_models
        from tracking.training.model import dtype_fields

        tracker = self._open()
        kind = declared_outputs(model, outputs, self._classifier)
        self._models.append(model)
        digest = weights_sha256(model.get_weights())
        tracker.log_weights(trained=digest)
        self._model.update(**dtype_fields(model), jit_compile=str(model.jit_compile).lower())
        self._model["outputs"] = kind
        if is_model_of_models(model):
            log.warning(
                "run.log_model(): the model has no inputs and no call of its own (a model of models, as a GAN's), so "
                "its weights are hashed but no MLflow model is logged; log a part that predicts with "
                "mlflow.keras.log_model"
            )
        elif self._example is not None:
            tracker.log_keras_model(model, self._example)
        return digest

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Metrics of the run (a test score, a final loss)."""
        self._open().log_metrics(dict(metrics), step=step)
