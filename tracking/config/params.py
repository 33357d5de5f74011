"""The schema of params.yaml: every section's keys, types and bounds (tracking/config/model_checks.py checks what
needs the model or the data).

Unknown keys, wrong types and out-of-range values are rejected (read by tracking/config/params_file.py, which
names the key, what was expected and the valid keys), so a typo never silently falls back to a default.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tracking.errors import ParamsError
from tracking.names import MAX_EXPERIMENT_NAME_CHARS
from tracking.yaml_text import flatten

SHA256_PATTERN = r"^[0-9a-f]{64}$"
Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]
# derive_seed(42, "split"): the split seed that seeds.base 42 gave when the split still derived from it, so the
# default pipeline keeps exactly the split (and the prepared data) it always had.
DEFAULT_SPLIT_SEED = 1714860770
# "package.module:function", found at the project root or among installed packages.
CALLABLE_SPEC_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
CallableSpec = Annotated[str, Field(pattern=CALLABLE_SPEC_PATTERN)]
# The tasks (`data.task`), named here once: one class per label (a label per sample, or per pixel or step),
# numeric targets, or several labels per sample (multi-hot rows).
CLASSIFICATION, REGRESSION, MULTILABEL = "classification", "regression", "multilabel"
Task = Literal["classification", "regression", "multilabel"]
# The frameworks Keras 3 runs on (`determinism.backend`; tracking/determinism/backend.py).
Backend = Literal["tensorflow", "jax", "torch"]
# The executors of calibration repeats (`compute.executor`), named here once.
LOCAL, RAY = "local", "ray"
# What the compare stage and `tracking diff` judge when `compare.metrics` is null: each metric to max or min.
DEFAULT_COMPARE_METRICS: dict[str, dict[str, str]] = {
    CLASSIFICATION: {"test_accuracy": "max", "test_loss": "min"},
    REGRESSION: {"test_loss": "min", "test_mae": "min"},
    MULTILABEL: {"test_loss": "min", "test_subset_accuracy": "max"},
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)  # NaN fails no bound


class MlflowParams(_Section):
    experiment: Annotated[str, Field(min_length=1, max_length=MAX_EXPERIMENT_NAME_CHARS)] = "digits"

    @field_validator("experiment")
    @classmethod
    def _printable(cls, name: str) -> str:
        if any(not char.isprintable() for char in name):
            raise ValueError(
                f"an MLflow experiment name must be printable, got {name!r} (a newline, NUL or other control "
                "character splits it in the UI, in `tracking bands --experiment` and in filter strings)"
            )
        return name


class DataParams(_Section):
    """Where the samples come from (a built-in or `.npz` `source`, or a `loader` function: exactly one) and their split."""

    source: Annotated[str, Field(min_length=1)] | None = "sklearn:digits"
    loader: CallableSpec | None = None
    kwargs: dict[str, Any] = {}
    inputs: list[Annotated[str, Field(min_length=1)]] = []  # files or folders the loader reads: deps of prepare
    task: Task = "classification"
    test_fraction: Annotated[float, Field(gt=0, lt=1)] = 0.2
    val_fraction: Annotated[float, Field(ge=0, lt=1)] = 0.1
    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)] | None = None
    split_seed: Seed = DEFAULT_SPLIT_SEED  # the split belongs to the data: fixed while the training seeds vary

    @model_validator(mode="after")
    def _one_origin(self) -> DataParams:
        if (self.source is None) == (self.loader is None):
            given = "both are set" if self.source is not None else "neither is set"
            raise ValueError(f"exactly one of data.source and data.loader must be set, the other null; {given}")
        if self.source is not None and self.kwargs:
            raise ValueError("data.kwargs is passed to data.loader only; with data.source set it must be {}")
        if self.source is not None and self.inputs:
            raise ValueError("data.inputs lists what data.loader reads; with data.source set it must be []")
        return self


class SeedParams(_Section):
    base: Seed = 42
    init: Seed | None = None
    shuffle: Seed | None = None
    dropout: Seed | None = None
    augment: Seed | None = None


class DeterminismParams(_Section):
    """How the process computes: Keras's backend, its op determinism, threads and (TensorFlow) oneDNN."""

    backend: Backend = "tensorflow"
    op_determinism: bool = True
    intra_op_threads: Annotated[int, Field(ge=0, le=1024)] = 1
    inter_op_threads: Annotated[int, Field(ge=0, le=1024)] = 1
    onednn: bool = False


class ModelParams(_Section):
    """The model: a builder `build(input_shape, n_outputs, **kwargs)` returning an uncompiled `keras.Model`. The
    library has no default model: params.yaml names the builder (`model_builder` asks for it where training needs it)."""

    builder: CallableSpec | None = None
    kwargs: dict[str, Any] = {}


def model_builder(params: Params) -> str:
    """`model.builder`, which every training needs; a `ParamsError` saying how to name one where it is unset."""
    if params.model.builder is None:
        raise ParamsError(
            "model.builder: not set, and training builds the model it names (the library has no default model)",
            fix="name the builder in params.yaml, `model.builder: package.module:function` (docs/configuration.md)",
        )
    return params.model.builder


# A name `compile()` takes for a loss or metric: a Keras identifier, "module:function", "module:Class" or "package>Class".
CompileName = Annotated[str, Field(min_length=1)]
Weight = Annotated[float, Field(ge=0)]
# `train.class_weight` as a mapping: class label -> weight, as Keras's `fit(class_weight=...)` takes it.
ClassWeights = dict[int, float]
BALANCED = "balanced"


class TrainParams(_Section):
    """How the model is compiled and fitted; a null loss or metrics list means the task's default. `loss`,
    `metrics` and `loss_weights` also take a mapping from the model's output names to what `compile()` takes for
    that output (`check_output_keys` checks the names once the model is built).

    `class_weight`: each class's weight in the training loss (`balanced`: n / (K * count), sklearn's rule, from
    the training split), multiplying the data's `sample_weight`. `augment`: "module:function" called on every
    training batch inside the tf.data pipeline as `augment(x, y, seed) -> (x, y)`, `seed` a stateless seed pair
    from `seeds.augment` and the step (tracking/training/augment.py). `compile_kwargs`: the arguments of a model's own
    `compile` beyond the optimizer, loss and metrics (keras-io's `Distiller`: `student_loss_fn`, `alpha`, ...), a
    "module:name" value the team's object (tracking/training/compiling.py, `compile_arguments`).
    """

    epochs: Annotated[int, Field(ge=1, le=10_000)] = 20
    batch_size: Annotated[int, Field(ge=1, le=1_000_000)] = 32
    optimizer: Annotated[str, Field(min_length=1)] = "adam"
    optimizer_kwargs: dict[str, Any] = {}
    learning_rate: Annotated[float, Field(gt=0, le=10)] = 0.001
    loss: CompileName | dict[str, CompileName] | None = None
    metrics: list[CompileName] | dict[str, list[CompileName]] | None = None
    loss_weights: list[Weight] | dict[str, Weight] | None = None
    class_weight: ClassWeights | Literal["balanced"] | None = None
    augment: CallableSpec | None = None
    compile_kwargs: dict[str, Any] = {}

    @field_validator("loss", "metrics", "loss_weights", mode="before")
    @classmethod
    def _per_output(cls, value: Any, info: Any) -> Any:
        """One value for every output or a mapping from output name to one; anything else is one line showing
        both forms (pydantic's own message would name each branch of the union)."""
        field = info.field_name
        if value is None or _fits(field, value, True):
            return value
        if (
            isinstance(value, dict)
            and value
            and all(isinstance(k, str) and _fits(field, v, False) for k, v in value.items())
        ):
            return value
        every, example = PER_OUTPUT_FORMS[field]
        shown = repr(value)
        raise ValueError(
            f"expected {every}, or a mapping from each output's name to its value (e.g. {{priority: {example}}}), "
            f"got {shown if len(shown) <= 80 else shown[:60] + '...'}"
        )

    @field_validator("class_weight", mode="before")
    @classmethod
    def _class_weights(cls, value: Any) -> Any:
        """A mapping of labels (integers >= 0; digits as text too, as `tracking rerun` writes a logged mapping's
        keys back) to finite weights >= 0, or `balanced`."""
        if value is None or value == BALANCED:
            return value
        if not isinstance(value, dict) or not value:
            raise ValueError(
                f"expected 'balanced' or a mapping of class label to weight, e.g. {{0: 1.0, 1: 5.0}}, got {value!r}"
            )
        weights = {}
        for label, weight in value.items():
            number = label if isinstance(label, int) and not isinstance(label, bool) else None
            if isinstance(label, str) and label.isdigit():
                number = int(label)
            if number is None or number < 0:
                raise ValueError(f"class label {label!r} is not an integer >= 0 (the data's labels are 0..K-1)")
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight < float("inf"):
                raise ValueError(f"class {number}'s weight {weight!r} is not a finite number >= 0")
            weights[number] = float(weight)
        return weights


# What `train.loss`, `train.metrics` and `train.loss_weights` take for every output at once, what they take for one
# output in a mapping by output name, and an example of the mapping's value.
PER_OUTPUT_FORMS = {
    "loss": ("a loss name", "binary_crossentropy"),
    "metrics": ("a list of metric names", "[mae]"),
    "loss_weights": ("a list of weights >= 0, one per output", "0.2"),
}


def _fits(field: str, value: Any, every: bool) -> bool:
    """Whether `value` is what `field` takes for every output (`every`) or, in a mapping, for one."""
    if field == "loss":
        return isinstance(value, str) and bool(value)
    if field == "metrics":
        return isinstance(value, list) and all(isinstance(item, str) and item for item in value)
    if every:
        return isinstance(value, list) and all(_fits(field, item, False) for item in value)
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


# `compare.candidate_repeats: auto`: candidate runs one at a time until the verdict is decided.
AUTO = "auto"
Variant = Literal["algo+impl", "algo", "impl", "control"]
VARIANTS: tuple[str, ...] = ("algo+impl", "algo", "impl", "control")


class CalibrationParams(_Section):
    """Repeated training of the frozen baseline, per noise variant (Zhuang et al. 2021)."""

    baseline: Annotated[str, Field(min_length=1)] = "baseline.yaml"
    repeats: Annotated[int, Field(ge=3, le=1000)] = 5
    variants: Annotated[list[Variant], Field(min_length=1)] = list(VARIANTS)
    simulate_impl_noise: bool = True

    @field_validator("variants")
    @classmethod
    def _unique(cls, variants: list[str]) -> list[str]:
        if len(set(variants)) != len(variants):
            raise ValueError(f"each variant at most once, got {variants}")
        return variants


class KnownBand(_Section):
    """A declared band, e.g. a published mean, standard deviation (ddof=1) and number of runs."""

    mean: float
    std: Annotated[float, Field(ge=0)]
    n: Annotated[int, Field(ge=2)]


_RUN_COUNT = TypeAdapter(Annotated[int, Field(ge=1, le=100, strict=True)])


def _count_or_auto(value: Any) -> int | str:
    """`auto`, or a count of runs from 1 to 100: one error for the count, not one for each alternative."""
    if value == AUTO:
        return AUTO
    try:
        return _RUN_COUNT.validate_python(value)
    except ValidationError as err:
        found = err.errors()[0]
        raise PydanticCustomError(found["type"], found["msg"]) from None


class CompareParams(_Section):
    """How the compare stage judges a candidate (docs/noise-statistics.md).

    `candidate_repeats`: N, the candidate's runs per comparison: the train stage's run and N - 1 more that the
    compare stage trains with the candidate's seeds varied as its band's variant varies them (none under CONTROL,
    where they would be copies). With 5 calibration repeats the smallest shift the two default metrics detect
    with 80% power (under normal noise, t(3) and 10% bad seeds) is 7.25 band stds for one run, 3.79 for three and
    3.75 for five; three buy most of that for two more trainings of an experiment (docs/noise-statistics.md).
    `auto`: one run at a time until the verdict is decided (`tracking.noise.sequential`), at most
    `candidate_repeats_max` runs. `min_effect`: per metric, the smallest gap that matters (default: the larger of 4
    band stds and two points of an accuracy or a tenth of the band's mean, `tracking.noise.metric_family`); a gap
    beyond noise whose interval lies inside ± a named one is `within_tolerance`.
    """

    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    metrics: Annotated[dict[str, Literal["max", "min"]], Field(min_length=1)] | None = None  # null: the task's default
    fail_on_drift: bool = False
    known_bands: dict[str, KnownBand] = {}
    candidate_repeats: Annotated[int | Literal["auto"], PlainValidator(_count_or_auto)] = 3
    candidate_repeats_max: Annotated[int, Field(ge=1, le=100)] = 10
    min_effect: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] = {}

    def candidate_runs(self) -> int:
        """The most candidate runs a comparison trains: `candidate_repeats`, or under `auto` its cap."""
        return self.candidate_repeats if isinstance(self.candidate_repeats, int) else self.candidate_repeats_max


class AuditParams(_Section):
    """`tracking audit`: repeats per determinism mode and the training steps traced in each (a prefix of training)."""

    repeats: Annotated[int, Field(ge=2, le=100)] = 3
    steps: Annotated[int, Field(ge=1, le=100_000)] = 40


class ComputeParams(_Section):
    """Where calibration repeats train and what every training run records of its hardware (docs/cluster.md).

    No stage declares this section as a DVC param: where a repeat ran never changes what it trained, so moving
    between executors, or turning system metrics off, re-runs nothing.
    """

    executor: Literal["local", "ray"] = LOCAL
    address: Annotated[str, Field(min_length=1)] | None = None  # null: a private Ray; "auto" or "host:port"
    workers: Annotated[int, Field(ge=1, le=10_000)] | None = None  # null: as many as the cluster fits
    cpus_per_run: Annotated[float, Field(gt=0, le=1024)] = 1
    gpus_per_run: Annotated[float, Field(ge=0, le=64)] | None = None  # null: 1 where the cluster has GPUs, else 0
    accelerator_type: Annotated[str, Field(min_length=1)] | None = None
    max_retries: Annotated[int, Field(ge=0, le=100)] = 2
    system_metrics: bool = True


class Params(_Section):
    """Everything one pipeline execution depends on; the single source of configuration."""

    mlflow: MlflowParams = MlflowParams()
    data: DataParams = DataParams()
    seeds: SeedParams = SeedParams()
    determinism: DeterminismParams = DeterminismParams()
    model: ModelParams = ModelParams()
    train: TrainParams = TrainParams()
    calibration: CalibrationParams = CalibrationParams()
    compare: CompareParams = CompareParams()
    audit: AuditParams = AuditParams()
    compute: ComputeParams = ComputeParams()

    @model_validator(mode="after")
    def _training_fits(self) -> Params:
        if self.train.class_weight is not None and self.data.task != CLASSIFICATION:
            raise ValueError(
                f"train.class_weight weights classes, and data.task is {self.data.task}; set it null, or give "
                "regression samples their weights as the loader's sample_weight"
            )
        if self.train.augment is not None and self.determinism.backend != "tensorflow":
            raise ValueError(
                f"train.augment runs inside the tf.data pipeline of the training batches, which only the "
                f"tensorflow backend has (on {self.determinism.backend} the batches are NumPy arrays from a Python "
                "generator, where TensorFlow's stateless random ops do not run); set determinism.backend: "
                "tensorflow, or put the augmentation in the model as Keras preprocessing layers (seeds.augment's)"
            )
        return self

    def compare_metrics(self) -> dict[str, str]:
        """`compare.metrics`, or the task's default: each judged metric to `max` or `min`."""
        return dict(self.compare.metrics or DEFAULT_COMPARE_METRICS[self.data.task])

    def flat(self) -> dict[str, Any]:
        """The params under DVC's dotted names (`train.learning_rate`), as MLflow and `dvc exp show` list them."""
        return flatten(self.model_dump(mode="json"))
