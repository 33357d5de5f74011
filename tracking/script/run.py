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
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from tracking.config.params import DeterminismParams
from tracking.determinism import backend
from tracking.determinism.seeds import Seeds
from tracking.env import DVC_STAGE, TRACKING_EXPERIMENT, TRACKING_RERUN_OF
from tracking.errors import ParamsError, UsageError
from tracking.names import RERUN_OF_TAG
from tracking.script.ending import end_at_exit, user_errors_in_one_line
from tracking.script.params import ScriptParams, read_params
from tracking.script.process import reproducible_script
from tracking.script.repeat import ScriptRepeat, repeat_from_env

log = logging.getLogger(__name__)

# The stage tag of a run whose script DVC did not start.
SCRIPT_STAGE = "script"
# Who decided a source of randomness the script did not hand to the run, as its `prov.seeds.<source>` says.
DECIDED_BY_SCRIPT = {
    "init": "script: the model's own initializers (not passed to run.seeded), drawn from seeds.base",
    "dropout": "script: the model's own generators (not passed to run.seeded), drawn from seeds.base",
    "augment": "script: the model's own generators (not passed to run.seeded), drawn from seeds.base",
    "shuffle": "script: Keras fit's own order (run.batches not used), drawn from seeds.base",
}
# `prov.seeds.shuffle` of a run whose models were not trained by Keras's `fit` (a `GradientTape` loop, say).
OWN_ORDER = "script: its own order (no Keras fit seen, run.batches not used), drawn from seeds.base"

# What a model's outputs are, as `run.log_model(outputs=...)` declares them; `unknown` when nothing declares them.
OUTPUT_KINDS = ("logits", "probabilities", "values")
UNKNOWN_OUTPUTS = "unknown"


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
        # The backend is the team's Keras choice (KERAS_BACKEND, keras.json) unless they name one here.
        wanted = DeterminismParams(**{"backend": backend.configured(), **dict(determinism or {})})
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
        self._seeds = params.seeds
        self.determinism = determinism
        self.experiment = experiment
        self.stage = os.environ.get(DVC_STAGE) or None
        self._tracker: Any = None
        self._record: dict[str, Any] = {}
        self._used: dict[str, Any] = {"base": self._seeds.base, "hash": self._seeds.hash}
        self._model: dict[str, Any] = {}
        self._unattributed = ""
        self._example: Any = None
        self._classifier: bool | None = None
        self._models: list[Any] = []  # handed to seeded or log_model: whether Keras's fit trained them

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
        from tracking.provenance import to_tags

        decided = dict(DECIDED_BY_SCRIPT)
        if not any(getattr(model, "train_function", None) is not None for model in self._models):
            decided["shuffle"] = OWN_ORDER
        seeds = {name: self._used.get(name, decided.get(name)) for name in ("base", *decided)}
        unattributed = {"unattributed": self._unattributed} if self._unattributed else {}
        final: dict[str, Any] = {"seeds": {**seeds, "hash": self._seeds.hash, **unattributed}}
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
        if not inputs and not model.weights:  # a model of built models (a GAN's) has weights but no inputs
            raise UsageError(
                "run.seeded(): the model is not built (it has no inputs or weights yet)",
                fix="build it first, e.g. start a Sequential with keras.Input(shape=...)",
            )
        created = created_weights(model)
        moved = moved_weights(created)
        if moved:
            raise UsageError(
                f"run.seeded(): {len(moved)} weight(s) of the model ({', '.join(moved[:3])}"
                f"{', ...' if len(moved) > 3 else ''}) are not what their initializers drew: it trained (by fit or "
                "a loop of its own), had weights set or loaded, or was seeded already, so re-seeding would throw "
                "them away",
                fix="call run.seeded(model) once, right after building the model, before any training",
            )
        self._models.append(model)
        report = seed_model(model, created, self._seeds, tuple(inputs[0].shape[1:]) if inputs else None)
        reset_global_streams(self._seeds)
        self._model = report.as_record()
        self._unattributed = self._model.pop("unattributed", "")
        self._used.update(init=self._seeds.init, dropout=self._seeds.dropout, augment=self._seeds.augment)
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
        """A Keras callback logging every epoch's metrics to the run (and acting on Ctrl-C between batches)."""
        from tracking.training.callback import MlflowMetricsCallback

        return MlflowMetricsCallback(self._open())

    def log_data(self, x: Any, y: Any = None, name: str = "training", sample_weight: Any = None) -> str:
        """The training data as the run's MLflow dataset and data manifest, its digest the full-content SHA-256 of
        every array of x and y (as our prepare stage hashes a split); returned. `x` and `y` are what `fit` takes:
        an array, or a dict (or list) of arrays for a model with named inputs or outputs, each array hashed under
        its key (`train/x/<key>`), so a renamed key changes the digest; `y` None for a model trained on `x` alone;
        `sample_weight`, where the script weights its samples, hashed as data too (`train/sample_weight`)."""
        import numpy as np

        from tracking.data.hashing import array_sha256, combine
        from tracking.data.manifest import Manifest

        tracker = self._open()
        xs, ys = named_arrays("train/x", x), {} if y is None else named_arrays("train/y", y)
        weights = {} if sample_weight is None else {"train/sample_weight": np.asarray(sample_weight)}
        hashes = {key: array_sha256(array) for key, array in {**xs, **ys, **weights}.items()}
        samples = {len(array) for array in {**xs, **ys, **weights}.values() if array.ndim}
        if len(samples) != 1:
            raise UsageError(
                "run.log_data(): the arrays of x, y and sample_weight hold different numbers of samples "
                f"({sorted(samples)})",
                fix="pass x, y and sample_weight as fit takes them: every array's first axis is the sample",
            )
        target = next(iter(ys.values())) if len(ys) == 1 else None
        labels = target is not None and target.ndim == 1 and len(target) > 0 and np.issubdtype(target.dtype, np.integer)
        classes = int(target.max()) + 1 if labels else None
        manifest = Manifest(
            source=name,
            source_sha256=combine(hashes),
            content_sha256=combine(hashes),
            arrays=hashes,
            target_shape=None if target is None else [int(size) for size in target.shape[1:]],
            n_samples={"train": samples.pop()},
            shapes=_shapes("train", xs),
            n_outputs=classes or sum(int(np.prod(array.shape[1:], dtype=np.int64)) for array in ys.values()),
            n_classes=classes,
        )
        targets = None if y is None else _for_mlflow(y, ys)
        tracker.log_dataset(manifest, _for_mlflow(x, xs), targets, location=self.root, context="training")
        self._example = _first_rows(x)
        one_hot = (
            target is not None
            and target.ndim == 2
            and bool(np.isin(target, (0, 1)).all() and (target.sum(axis=1) == 1).all())
        )
        self._classifier = (bool(labels) or one_hot) if ys else None  # no targets: nothing says what the task is
        return manifest.content_sha256

    def log_model(self, model: Any, outputs: str | Mapping[str, str] | None = None) -> str:
        """The trained weights' SHA-256 (`prov.weights_sha256`, what `tracking rerun` compares), the model's dtype
        policy, jit_compile and what its outputs are (`prov.model.*`, as our train stage records them), and the
        model as an MLflow model (its signature from the logged data); returns the hash.

        `outputs` declares what the model outputs: `logits`, `probabilities` or `values`, or a mapping from each
        output's name to one of them; without it `prov.model.outputs` is what the compiled loss declares, else
        `unknown` (never a guess)."""

        from tracking.data.hashing import weights_sha256
        from tracking.training.model import dtype_fields

        tracker = self._open()
        kind = declared_outputs(model, outputs, self._classifier)
        self._models.append(model)
        digest = weights_sha256(model.get_weights())
        tracker.log_weights(trained=digest)
        self._model.update(**dtype_fields(model), jit_compile=str(model.jit_compile).lower())
        self._model["outputs"] = kind
        if not getattr(model, "inputs", None):
            log.warning(
                "run.log_model(): the model has no inputs of its own (a model of models, as a GAN's), so its weights "
                "are hashed but no MLflow model is logged; log a part that predicts with mlflow.keras.log_model"
            )
        elif self._example is not None:
            tracker.log_keras_model(model, self._example)
        return digest

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Metrics of the run (a test score, a final loss)."""
        self._open().log_metrics(dict(metrics), step=step)


class ReadSeeds:
    """A run's `Seeds` as its script reads them: reading a source (`init`, `shuffle`, `dropout`, `augment`) records
    it as used by the run."""

    def __init__(self, seeds: Seeds, used: dict[str, Any]) -> None:
        self._seeds, self._used = seeds, used

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._seeds, name)
        if name in DECIDED_BY_SCRIPT:
            self._used[name] = value
        return value

    def __repr__(self) -> str:
        return f"ReadSeeds({self._seeds!r})"


def declared_outputs(model: Any, outputs: str | Mapping[str, str] | None, classifier: bool | None) -> str:
    """`prov.model.outputs`: what the script declares (a kind, or `name: kind` per output), else what the compiled
    loss declares of a classifier's outputs (a Keras loss's `from_logits`, a loss named by string) or `values` for
    targets that are not class labels, else `unknown`: an uncompiled model, a loss per output or a loss function of
    the script's own declare nothing, and predicting would move the generators of a model that draws at inference."""
    from tracking.training.scoring import declared_output_kind

    if outputs is not None:
        declared = dict(outputs) if isinstance(outputs, Mapping) else {"": outputs}
        names = list(getattr(model, "output_names", None) or [])
        wrong = [f"{name}={kind!r}" for name, kind in declared.items() if kind not in OUTPUT_KINDS]
        wrong += [f"{name!r} is not an output" for name in declared if name and names and name not in names]
        if wrong:
            raise UsageError(
                f"run.log_model(outputs=...): {', '.join(wrong)}",
                fix=f"name one of {', '.join(OUTPUT_KINDS)}, or map output names ({', '.join(names)}) to them",
            )
        return "; ".join(f"{name}: {kind}" if name else kind for name, kind in declared.items())
    loss = getattr(model, "loss", None)
    if loss is None or isinstance(loss, (Mapping, list, tuple)) or classifier is None:
        return UNKNOWN_OUTPUTS
    return (declared_output_kind(model) or UNKNOWN_OUTPUTS) if classifier else "values"


def named_arrays(prefix: str, data: Any) -> dict[str, Any]:
    """The arrays of `data` as `fit` takes it, by name: one array as `prefix`, a dict's under `prefix/<key>`, a
    list's or tuple's under `prefix/<index>`."""
    import numpy as np

    if isinstance(data, Mapping):
        return {f"{prefix}/{key}": np.asarray(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return {f"{prefix}/{index}": np.asarray(value) for index, value in enumerate(data)}
    return {prefix: np.asarray(data)}


def _shapes(split: str, xs: dict[str, Any]) -> dict[str, list[int]]:
    """The manifest's feature shapes: the split's, as our prepare stage records them, or each named input's."""
    if len(xs) == 1 and f"{split}/x" in xs:
        return {split: [int(size) for size in xs[f"{split}/x"].shape[1:]]}
    return {name: [int(size) for size in array.shape[1:]] for name, array in xs.items()}


def _for_mlflow(data: Any, arrays: dict[str, Any]) -> Any:
    """`data` as MLflow's dataset takes it: one array, or a dict of arrays by the key or index it came under."""
    if len(arrays) == 1 and not isinstance(data, (Mapping, list, tuple)):
        return next(iter(arrays.values()))
    return {name.rsplit("/", 1)[1]: array for name, array in arrays.items()}


def _first_rows(data: Any) -> Any:
    """The first two samples of `x`, kept in its structure (a dict or list of arrays), for the model's signature."""
    import numpy as np

    if isinstance(data, Mapping):
        return {key: np.asarray(value)[:2] for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [np.asarray(value)[:2] for value in data]
    return np.asarray(data)[:2]


def moved_weights(created: Any) -> list[str]:
    """The trainable weights, among those drawn by a layer's own Keras random initializer with a fixed seed, that
    no longer hold that initializer's draw (the draw repeats exactly): the paths of weights a training moved, whatever ran
    it (`fit`, a `GradientTape` loop with its optimizer outside the model) or that were set or loaded."""
    import numpy as np
    from keras.src.initializers.random_initializers import RandomInitializer

    moved = []
    for layer, variable, initializer in created.weights:
        # Only the layer's own initializer object drew the weight; one named by a string is drawn afresh each time.
        own = any(getattr(layer, name, None) is initializer for name in initializer_names(variable.name))
        seeded = isinstance(initializer, RandomInitializer) and isinstance(initializer.seed, int)
        if own and seeded and variable.trainable:
            drawn = np.asarray(initializer(variable.shape, dtype=variable.dtype))
            if not np.array_equal(drawn, np.asarray(variable)):
                moved.append(variable.path)
    return moved


def created_weights(model: Any) -> Any:
    """The weights of a built model with the initializer each was drawn from, found by Keras's naming (a layer's
    `kernel` from its `kernel_initializer`); one whose initializer is not found is left out and reported by the
    seeding as randomness no seed covers."""
    from keras import initializers

    from tracking.determinism.seeding import Created, walk_layers

    created = Created(missing="with no initializer the layer names after it (`<weight>_initializer`)")
    for layer in walk_layers(model):
        for variable in layer._trainable_variables + layer._non_trainable_variables:
            names = [name for name in initializer_names(variable.name) if getattr(layer, name, None) is not None]
            if names:
                initializer = getattr(layer, names[0])
                created.weights.append((layer, variable, initializers.get(initializer)))
    return created


def initializer_names(weight: str) -> tuple[str, ...]:
    """The layer attributes that may hold a weight's initializer, by Keras's naming: `<weight>_initializer`, and for
    a `<kind>_kernel` also `<kind>_initializer` (an RNN cell's `recurrent_kernel` is drawn by its
    `recurrent_initializer`, a separable convolution's `depthwise_kernel` by its `depthwise_initializer`)."""
    kind = weight.removesuffix("_kernel")
    return (f"{weight}_initializer",) if kind == weight else (f"{weight}_initializer", f"{kind}_initializer")


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
