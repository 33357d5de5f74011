"""The model every training path uses: built from `model.builder`, seeded by position, compiled, checked once
before any run opens, reused across calibration repeats, saved and reloaded.

The train stage, every calibration repeat (in the stage's process or on a Ray worker), `tracking rerun` (which
runs the stages) and the audit prepare their model here, so a CONTROL repeat starts from the very model the
candidate started from.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tracking.config.params import Params, TrainParams, model_builder
from tracking.config.user_code import describe_callable, load_callable, require_stage_dep
from tracking.data.arrays import Arrays, Shapes, map_arrays, rows, shapes
from tracking.data.hashing import weights_sha256
from tracking.data.manifest import Manifest
from tracking.determinism.seeding import (
    Created,
    SeedReport,
    capturing_weights,
    idle_streams,
    reseed,
    reset_global_streams,
    seed_model,
    walk_layers,
)
from tracking.determinism.seeds import Seeds
from tracking.errors import RunStateError
from tracking.layout import DVC_FILE, MODEL_STAGES, TRAIN
from tracking.redaction import redact_params
from tracking.training.building import call_builder, check_output
from tracking.training.compiling import compile_model, custom_objects, team_code


def require_code_deps(params: Params, stage: str, root: Path, dvc_file: str = DVC_FILE) -> None:
    """The team's code `stage` trains with (model.builder, a "module:name" train.loss or train.metrics entry) is a
    DVC dep of it and, for a stage of the default pipeline, of every stage that builds the model
    (`MODEL_STAGES`): the first to run names them all. Without a `model.builder` the stage stops here, before any
    run opens."""
    model_builder(params)
    stages = MODEL_STAGES if dvc_file == DVC_FILE and stage in MODEL_STAGES else (stage,)
    for key, spec in team_code(params):
        require_stage_dep(load_callable(spec, key, root), key, stages, root, dvc_file)


@dataclass(frozen=True)
class BuildInputs:
    """What a model is built for: the training split (handed read-only to a builder that declares `train`, to
    adapt its preprocessing), the number of outputs, the regression targets' shape (both by output name where `y`
    is a dict) and the project root."""

    train: dict[str, Arrays]
    n_outputs: int | dict[str, int]
    target_shape: Shapes | None
    root: Path

    @property
    def input_shape(self) -> Shapes:
        """The features' shape without the sample axis; by input name where `x` is a dict."""
        return shapes(self.train["x"])

    @classmethod
    def of(cls, manifest: Manifest, train: dict[str, Arrays], root: Path) -> BuildInputs:
        """The inputs of a model trained on prepared data described by `manifest` (data/prepared/manifest.json)."""
        shape = manifest.target_shape
        found = (
            None
            if shape is None
            else {k: tuple(v) for k, v in shape.items()}
            if isinstance(shape, dict)
            else tuple(shape)
        )
        return cls(train, manifest.n_outputs, found, root)

    def read_only_train(self) -> dict[str, Arrays]:
        """The training inputs and targets as views a builder cannot write to."""
        return {name: map_arrays(_read_only, self.train[name]) for name in ("x", "y")}


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True)
class Built:
    """A built, seeded model with what provenance records of it (`prov.model.*`, `prov.seeds.*`), and the
    weights its builder created (to re-seed it)."""

    model: Any
    initial_weights_sha256: str
    seeding: SeedReport
    builder: dict[str, Any]
    created: Created


def build_model(params: Params, seeds: Seeds, inputs: BuildInputs) -> Built:
    """The model `model.builder` returns for `model.kwargs`, checked against the task and seeded by position."""
    spec = model_builder(params)
    builder = load_callable(spec, "model.builder", inputs.root)
    with capturing_weights() as created:
        model = call_builder(
            builder,
            spec,
            inputs.input_shape,
            inputs.n_outputs,
            params.model.kwargs,
            {"seeds": seeds, "task": params.data.task, "train": inputs.read_only_train()},
            sample=rows(inputs.train["x"], slice(2)),
        )
    check_output(model, spec, params.data.task, inputs.n_outputs, inputs.target_shape)
    example = rows(inputs.train["x"], slice(1))
    report = with_kept_digest(seed_model(model, created, seeds, inputs.input_shape, example), created)
    described = {
        **describe_callable(spec, builder, inputs.root),
        "kwargs": json.dumps(redact_params(params.model.kwargs, "model.kwargs."), sort_keys=True),
        **dtype_fields(model),
    }
    return Built(model, weights_sha256(model.get_weights()), report, described, created)


def with_kept_digest(report: SeedReport, created: Created) -> SeedReport:
    """`report` with the SHA-256 of the weights kept as the builder (or the script) trained or loaded them."""
    kept = created.kept_variables()
    return replace(report, kept_sha256=weights_sha256([variable.numpy() for variable in kept])) if kept else report


def dtype_fields(model: Any) -> dict[str, str]:
    """The model's precision as both routes record it (`prov.model.*`): the global `dtype_policy`, and the
    `dtype_policies` its layers compute in, counted, most first (e.g. `mixed_bfloat16: 4, float32: 1`): a layer's
    own policy overrides the global one, so a model with per-layer mixed precision is not taken for a float32 one."""
    import keras

    containers = (keras.Model, keras.layers.InputLayer)
    counts = Counter(layer.dtype_policy.name for layer in walk_layers(model) if not isinstance(layer, containers))
    return {
        "dtype_policy": keras.config.dtype_policy().name,
        "dtype_policies": ", ".join(f"{name}: {count}" for name, count in counts.most_common()),
    }


def prepare_model(params: Params, seeds: Seeds, inputs: BuildInputs) -> Built:
    """Build, seed, compile and check the model (frameworks already seeded): every mistake in the team's code or in
    params.yaml surfaces here, before a stage opens its MLflow run (tracking/training/preflight.py).

    The global random streams are reset to `seeds.base` last, so what training draws from them (randomness no
    layer's seed covers) does not depend on what building and checking the model drew.
    """
    from tracking.training.preflight import preflight

    built = build_model(params, seeds, inputs)
    compile_model(built.model, params, inputs.root)
    outputs = preflight(built.model, params, seeds, inputs)
    reset_global_streams(seeds)
    described = {"jit_compile": str(built.model.jit_compile).lower(), "outputs": outputs}
    return replace(built, builder={**built.builder, **described})


class RepeatedModel:
    """One configuration's model, built and compiled once, then handed to every repeat reset to what a fresh
    build with that repeat's seeds gives: every variable back to its built value, the random initial weights
    and the generators re-drawn from the seeds, the optimizer's state back to its start.

    A repeat then traces no tf.function again (Keras keeps the model's train and test functions), which is
    most of what a repeat of a small model costs beyond its training steps. The weights after training are
    bit-identical to a freshly built model's. A model with randomness no layer's seed covers is built afresh
    for every repeat instead, since the global generator it draws from is not part of its state.
    """

    def __init__(self, inputs: BuildInputs) -> None:
        self.inputs = inputs
        self._built: Built | None = None
        self._key: str = ""
        self._fresh: list[Any] = []

    def prepare(self, params: Params, seeds: Seeds) -> Built:
        """A compiled model seeded with `seeds`, as `prepare_model(params, seeds, ...)` builds it."""
        key = json.dumps(
            {name: value for name, value in params.flat().items() if not name.startswith("seeds.")}, default=str
        )
        built = self._built
        if built is None or key != self._key or built.seeding.unattributed:
            built = prepare_model(params, seeds, self.inputs)
            built.model.optimizer.build(built.model.trainable_variables)
            self._built, self._key = built, key
            # Copies: on PyTorch `numpy()` is a view of the variable's memory, which training then overwrites.
            self._fresh = [np.array(variable.numpy(), copy=True) for variable in self._state(built.model)]
            return built
        for variable, value in zip(self._state(built.model), self._fresh, strict=True):
            variable.assign(value)
        init, counts, _ = reseed(built.model, built.created, seeds)
        reset_global_streams(seeds)
        report = replace(built.seeding, init=init, dropout=counts["dropout"], augment=counts["augment"])
        return replace(built, initial_weights_sha256=weights_sha256(built.model.get_weights()), seeding=report)

    @staticmethod
    def _state(model: Any) -> list[Any]:
        """Every variable training moves: the model's weights and the optimizer's (step count, moments)."""
        return [*model.weights, *model.optimizer.variables]


def with_model(record: dict[str, Any], built: Built, params: Params) -> dict[str, Any]:
    """The provenance record with the builder (`prov.model.*`: spec, kwargs, file hash, package version, dtype
    policy, jit_compile, seeded and kept counts), the randomness no seed covers (`prov.seeds.unattributed`), and each
    seed nothing drew from recorded as unused (`seeds.augment` is used by `train.augment` too)."""
    seeding = built.seeding.as_record()
    unattributed = {"unattributed": seeding.pop("unattributed")} if "unattributed" in seeding else {}
    unused = _model_streams(built.seeding.unused(), params.train)
    return {**record, "seeds": {**record["seeds"], **unused, **unattributed}, "model": {**built.builder, **seeding}}


def idle_after_fit(model: Any, seeds: Seeds, params: Params) -> dict[str, str]:
    """The seeds whose generators in the trained `model` never drew (`idle_streams`), as `prov.seeds.<source>`
    says them once training has shown it: read before scoring, which moves every generator."""
    return _model_streams(idle_streams([model], seeds), params.train)


def _model_streams(unused: dict[str, str], train_params: TrainParams) -> dict[str, str]:
    """`unused`, less `augment` where the template's `train.augment` draws from seeds.augment outside the model."""
    return {source: why for source, why in unused.items() if source != "augment" or not train_params.augment}


def load_trained_model(path: Path, params: Params, root: Path) -> Any:
    """A saved model, compiled as it was trained, with the custom layers and loss of the team's modules; a file
    Keras cannot load (damaged, or not a model) is one line naming it and the fix."""
    import keras

    objects = custom_objects(params, root)
    try:
        model = keras.models.load_model(path, custom_objects=objects, compile=False)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        why = (str(err).strip().splitlines() or [""])[0][:200]
        raise RunStateError(
            f"{path} cannot be loaded as a Keras model ({type(err).__name__}: {why})",
            fix=f"train it again with `dvc repro --force --single-item {TRAIN}`",
        ) from err
    compile_model(model, params, root)
    return model
