"""A built model compiled: a checked optimizer, loss and metrics (the task's defaults where params.yaml leaves them
null), `train.compile_kwargs` for a model's own `compile`, and the team's objects a saved model reloads with. Each
mistake is one `UserCodeError` line naming the params.yaml key.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracking.config.model_checks import check_output_keys
from tracking.config.params import CLASSIFICATION, MULTILABEL, REGRESSION, Params, TrainParams
from tracking.config.user_code import load_callable
from tracking.errors import UserCodeError, did_you_mean
from tracking.training.building import first_line, output_names

# Where the valid identifiers are listed, for the error lines.
LIST_LOSSES = 'python -c "import keras; print(sorted(n for n in dir(keras.losses) if n[0].islower()))"'
# Keras metrics that threshold one probability per sample: a softmax over classes fails them mid-training.
THRESHOLD_METRICS = {
    "auc",
    "precision",
    "recall",
    "truepositives",
    "truenegatives",
    "falsepositives",
    "falsenegatives",
    "precisionatrecall",
    "recallatprecision",
    "sensitivityatspecificity",
    "specificityatsensitivity",
    "f1score",
    "fbetascore",
}
LIST_METRICS = 'python -c "import keras; print(sorted(n for n in dir(keras.metrics) if n[0].islower()))"'
LIST_OPTIMIZERS = 'python -c "import keras; print(sorted(n for n in dir(keras.optimizers) if n[0].isupper()))"'

# A "module:name" spec among compile_kwargs' values (any other string is a value of its own).
SPEC_VALUE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


# What a task compiles with when params.yaml leaves train.loss or train.metrics null.
DEFAULT_METRICS = {CLASSIFICATION: ["accuracy"], REGRESSION: ["mae"], MULTILABEL: ["binary_accuracy"]}


def per_output(value: Any, names: Sequence[str], resolve: Callable[[Any], Any]) -> Any:
    """`value` as `compile()` takes it for a model with outputs `names`: a mapping resolved per output; one value
    resolved once, or for several outputs resolved once per output (a fresh loss or metric object each)."""
    if isinstance(value, Mapping):
        return {name: resolve(item) for name, item in value.items()}
    if len(names) > 1:
        return {name: resolve(value) for name in names}
    return resolve(value)


def resolve_loss(loss: str, root: Path) -> Any:
    """One `train.loss` as `compile()` takes it: a team's function ("module:function"), a fresh instance of a
    team's `keras.losses.Loss` subclass ("module:Class", or its registered name "package>Class"), else a checked
    Keras identifier."""
    import keras

    if ":" in loss or ">" in loss:
        return _team_object(loss, "train.loss", keras.losses.Loss, "keras.losses.Loss", root)
    try:
        keras.losses.get(loss)
    except ValueError as err:
        hint = did_you_mean(loss, _known(keras.losses.get, _public(keras.losses, str.islower)))
        raise UserCodeError(
            f"train.loss: unknown Keras loss '{loss}'; {hint}list them with {LIST_LOSSES}, "
            "or name your own as 'module:function' or 'module:Class'"
        ) from err
    return loss


def resolve_metrics(metrics: Sequence[str], root: Path) -> list[Any]:
    """`train.metrics` as `compile()` takes them: Keras identifiers as they are, a team's function or a fresh
    instance of its `keras.metrics.Metric` subclass for "module:function", "module:Class" or "package>Class"."""
    import keras

    return [
        _team_object(metric, "train.metrics", keras.metrics.Metric, "keras.metrics.Metric", root)
        if ":" in metric or ">" in metric
        else metric
        for metric in metrics
    ]


def _team_object(spec: str, key: str, base: type, base_name: str, root: Path) -> Any:
    """The function, or a fresh instance of the `base` subclass, that `spec` names: "module:name" imported from
    the project, "package>Class" as `keras.saving.register_keras_serializable` registered it (by a module the
    builder imports). A class outside `base`, or one that needs arguments, is a `UserCodeError` naming `key`."""
    import keras

    if ":" in spec:
        found = load_callable(spec, key, root)
    else:
        found = keras.saving.get_registered_object(spec)
        if found is None:
            raise UserCodeError(
                f"{key}: no Keras object is registered as '{spec}'; register it with "
                "@keras.saving.register_keras_serializable(package=...) in a module the builder imports, "
                "or name it as 'module:Class'"
            )
    if not inspect.isclass(found):
        return _made_by_factory(found, spec, key, base, base_name)
    if not issubclass(found, base):
        raise UserCodeError(
            f"{key}: '{spec}' is a class but not a {base_name} subclass; name a {base_name} subclass or a function"
        )
    try:
        return found()
    except TypeError as err:
        raise UserCodeError(
            f"{key}: '{spec}' cannot be made without arguments ({first_line(err)}); give its __init__ defaults, "
            "or name a function that returns it configured"
        ) from err


def _made_by_factory(function: Any, spec: str, key: str, base: type, base_name: str) -> Any:
    """`function` as `compile()` takes it: a function of no arguments is a factory (keras-io's
    `lambda: keras.metrics.AUC(multi_label=True)` as a function), called once for the object it returns; a function
    taking arguments (`y_true, y_pred`) is the metric or loss itself. A factory that fails or returns neither a
    `base` nor a function is a `UserCodeError` naming `key`."""
    try:
        inspect.signature(function).bind()
    except (TypeError, ValueError):  # it needs arguments (or has no signature to read): the function itself
        return function
    try:
        made = function()
    except Exception as err:
        raise UserCodeError(
            f"{key}: '{spec}' takes no arguments, so it is called as a factory, and it raised "
            f"{type(err).__name__}: {first_line(err)}; fix it, or give it the arguments (y_true, y_pred) of a "
            "function Keras calls on each batch"
        ) from err
    if not isinstance(made, base) and (inspect.isclass(made) or not callable(made)):
        raise UserCodeError(
            f"{key}: '{spec}' takes no arguments, so it is called as a factory, and it returned "
            f"{type(made).__name__}, not a {base_name} or a function; return one configured (e.g. "
            "keras.metrics.AUC(multi_label=True))"
        )
    return made


def check_metrics(metrics: Sequence[str], task: str = CLASSIFICATION, outputs: int | None = None) -> None:
    """A `UserCodeError` for a `train.metrics` entry Keras does not know, or a threshold metric (AUC, precision,
    recall, ...) on a classifier with several outputs, which Keras would only reject in the middle of training.
    A team's own ("module:Class", "package>Class") is checked when it is resolved."""
    import keras

    for metric in metrics:
        if ":" in metric or ">" in metric:
            continue
        if task == CLASSIFICATION and (outputs or 1) > 1 and metric.lower().replace("_", "") in THRESHOLD_METRICS:
            raise UserCodeError(
                f"train.metrics: '{metric}' reads one probability per sample, but the model outputs "
                f"{outputs} class probabilities; for two classes build the last layer as "
                "Dense(1, activation='sigmoid'), or drop it (evaluate logs test_auc for two classes)"
            )
        if metric in ("accuracy", "acc", "crossentropy", "ce"):
            continue  # resolved by compile against the loss and output
        try:
            keras.metrics.get(metric)
        except ValueError as err:
            hint = did_you_mean(metric, _known(keras.metrics.get, _public(keras.metrics, str.isalpha)))
            raise UserCodeError(
                f"train.metrics: unknown Keras metric '{metric}'; {hint}list them with {LIST_METRICS}, or name your "
                "own as 'module:function' or 'module:Class'"
            ) from err


def make_optimizer(name: str, config: Mapping[str, Any]) -> Any:
    """The Keras optimizer `name` with `config`; an unknown name or keyword is a `UserCodeError`."""
    import keras

    try:
        keras.optimizers.get({"class_name": name, "config": {}})
    except ValueError as err:
        named = [form for found in _public(keras.optimizers, str.isupper) for form in (found.lower(), found)]
        hint = did_you_mean(name, _known(lambda form: keras.optimizers.get({"class_name": form, "config": {}}), named))
        raise UserCodeError(
            f"train.optimizer: unknown Keras optimizer '{name}'; {hint}list them with {LIST_OPTIMIZERS}"
        ) from err
    try:
        return keras.optimizers.get({"class_name": name, "config": dict(config)})
    except (TypeError, ValueError) as err:
        raise UserCodeError(
            f"train.optimizer_kwargs: optimizer '{name}' rejects them: {first_line(err)}; "
            "fix train.optimizer_kwargs in params.yaml"
        ) from err


def _public(module: Any, first: Callable[[str], bool]) -> list[str]:
    """The names `module` exports whose first letter passes `first` (as the LIST_* commands list them)."""
    return [name for name in dir(module) if name[0].isalpha() and first(name[0])]


def _known(get: Callable[[str], Any], names: Sequence[str]) -> list[str]:
    """The `names` that `get` (Keras's lookup) accepts: what a did-you-mean may suggest, on the error path only."""
    known = []
    for name in names:
        try:
            get(name)
        except (ValueError, TypeError, KeyError):  # KeyError: a wrapper needing its inner optimizer
            continue
        known.append(name)
    return known


def default_loss(task: str, n_outputs: int) -> str:
    """The task's loss: cross-entropy on integer labels (binary for one output, and for each label of multi-hot
    rows), mean squared error for regression."""
    if task == REGRESSION:
        return "mean_squared_error"
    if task == MULTILABEL:
        return "binary_crossentropy"
    return "sparse_categorical_crossentropy" if n_outputs > 1 else "binary_crossentropy"


def task_loss(model: Any, task: str) -> str:
    """The task's own loss for `model`'s output (`default_loss`; a subclassed model without symbolic outputs is
    taken for several classes): what a model compiles with when `train.loss` is null."""
    return default_loss(task, _output_width(model))


def _output_width(model: Any) -> int:
    return model.outputs[0].shape[-1] if getattr(model, "outputs", None) else 2


def compile_model(model: Any, params: Params, root: Path = Path(".")) -> None:
    """Compile with the configured optimizer, loss, metrics and loss weights (the task's defaults where params.yaml
    says null); the default loss follows the model's output (one sigmoid output for two classes: binary
    cross-entropy). A model of several outputs takes a loss for each (one name is used for every output), the
    metrics listed for every output or those mapped to each, and no default metrics. A model whose own `compile`
    takes other arguments (keras-io's `Distiller`) gets those of ours it takes, and `train.compile_kwargs`."""
    train, task = params.train, params.data.task
    takes = compile_parameters(model)
    names = output_names(model)
    takes_loss, takes_metrics = (takes is None or name in takes for name in ("loss", "metrics"))
    check_output_keys(train, names)
    several = len(names) > 1
    arguments: dict[str, Any] = {"optimizer": optimizer_from_params(params.train)}
    if takes_loss or train.loss:
        if train.loss:
            loss = per_output(train.loss, names, lambda name: resolve_loss(name, root))
        elif several:
            raise UserCodeError(
                f"train.loss: null, but the model has {len(names)} outputs ({', '.join(names)}), which have no task "
                "default; name a loss for each in params.yaml (train.loss: {"
                + ", ".join(f"{n}: ..." for n in names)
                + "})"
            )
        else:
            loss = task_loss(model, task)
        arguments["loss"] = loss
    if takes_metrics or train.metrics:
        metrics = train.metrics if train.metrics is not None else {} if several else DEFAULT_METRICS[task]
        for listed in metrics.values() if isinstance(metrics, Mapping) else [metrics]:
            check_metrics(listed, task, None if several else _output_width(model))
        arguments["metrics"] = per_output(metrics, names, lambda listed: resolve_metrics(listed, root))
    if train.loss_weights is not None:
        arguments["loss_weights"] = train.loss_weights
    model.compile(**compile_arguments(model, takes, arguments, train.compile_kwargs, root))


def compile_parameters(model: Any) -> set[str] | None:
    """The arguments the model's `compile` takes by name (Keras's own, or those of a `compile` the team's model
    class overrides); None where it takes any (`**kwargs`)."""
    parameters = inspect.signature(model.compile).parameters.values()
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
        return None
    return {parameter.name for parameter in parameters if parameter.kind is not parameter.VAR_POSITIONAL}


def compile_arguments(
    model: Any, takes: set[str] | None, ours: Mapping[str, Any], given: Mapping[str, Any], root: Path
) -> dict[str, Any]:
    """`ours` (optimizer, loss, metrics, loss weights) and `train.compile_kwargs` (`given`) as the model's `compile`
    takes them: one of ours it does not take, a kwarg it does not know or one of ours given again, or an argument it
    needs and was not given, is a `UserCodeError` naming the key. A "module:name" value is the team's object: a
    class made without arguments, a function of no arguments called (a factory, returning e.g. a configured loss),
    any other function as it is."""
    owner = f"{type(model).__name__}.compile"
    listed = ", ".join(sorted(takes)) if takes is not None else "any"
    for key in ours:
        if takes is not None and key not in takes:
            raise UserCodeError(
                f"train.{key}: the model's own {owner} takes no {key} "
                f"(its parameters: {listed}); set it to null in params.yaml and give {owner} its own arguments in "
                "train.compile_kwargs (docs/configuration.md)"
            )
    for key in given:
        if key in ("optimizer", "loss", "metrics", "loss_weights"):
            raise UserCodeError(
                f"train.compile_kwargs.{key}: params.yaml gives the {key} as train.{key}; move it there"
            )
        if takes is not None and key not in takes:
            hint = did_you_mean(key, sorted(takes))
            raise UserCodeError(
                f"train.compile_kwargs.{key}: {owner} has no parameter '{key}'; {hint}its parameters: {listed}; "
                "fix train.compile_kwargs in params.yaml"
            )
    required = [
        parameter.name
        for parameter in inspect.signature(model.compile).parameters.values()
        if parameter.default is parameter.empty
        and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        and parameter.name not in ours
        and parameter.name not in given
    ]
    if required:
        raise UserCodeError(
            f"train.compile_kwargs: the model's own {owner} needs {', '.join(required)}, which params.yaml does not "
            f"give; add them under train.compile_kwargs (a 'module:name' value names your object, e.g. a loss)"
        )
    own = {key: _team_value(value, f"train.compile_kwargs.{key}", root) for key, value in given.items()}
    return {**ours, **own}


def _team_value(value: Any, key: str, root: Path) -> Any:
    """A `train.compile_kwargs` value: a "module:name" string the team's object it names, anything else as given."""
    if not (isinstance(value, str) and SPEC_VALUE.fullmatch(value)):
        return value
    return _team_object(value, key, object, "class", root)


def optimizer_from_params(train_params: TrainParams) -> Any:
    """`train.optimizer` (a Keras identifier) with `train.learning_rate` and `train.optimizer_kwargs`."""
    return make_optimizer(
        train_params.optimizer, {"learning_rate": train_params.learning_rate, **train_params.optimizer_kwargs}
    )


def custom_objects(params: Params, root: Path) -> dict[str, Any]:
    """What `keras.models.load_model` needs to reload a model `params` trained: the user loss by its name, and
    every Keras layer, loss or metric class defined in the builder's, the loss's and the metrics' modules, by
    class name."""
    import keras

    found: dict[str, Any] = {}
    for key, spec in team_code(params):
        function = load_callable(spec, key, root)
        module = inspect.getmodule(function)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and issubclass(value, (keras.layers.Layer, keras.losses.Loss, keras.metrics.Metric))
            ):
                found[name] = value
        if key == "train.loss" and hasattr(function, "__name__"):  # a Loss instance is found by its class instead
            found[function.__name__] = function
    return found


def team_code(params: Params) -> list[tuple[str, str]]:
    """The params.yaml keys naming the team's code as "module:name", with each spec: the builder, the loss, the
    metrics, the augmentation and the objects `train.compile_kwargs` names."""
    losses, metrics = params.train.loss, params.train.metrics or []
    named = [("model.builder", params.model.builder), ("train.augment", params.train.augment)]
    named += [("train.loss", loss) for loss in (losses.values() if isinstance(losses, Mapping) else [losses])]
    listed = metrics.values() if isinstance(metrics, Mapping) else [metrics]
    named += [("train.metrics", metric) for found in listed for metric in found]
    named += [
        (f"train.compile_kwargs.{key}", value)
        for key, value in params.train.compile_kwargs.items()
        if isinstance(value, str) and SPEC_VALUE.fullmatch(value)
    ]
    return [(key, spec) for key, spec in named if spec and ":" in spec]
