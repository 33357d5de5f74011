"""A model from any builder: called with checked kwargs, built where it was returned unbuilt, its output checked
against the task (tracking/training/compiling.py then compiles it). Each mistake is one `UserCodeError` line naming
the params.yaml key.

A builder is `build(input_shape, n_outputs, **kwargs)` returning an uncompiled `keras.Model`; `input_shape` is
the features' shape without the sample axis, or a dict of them by input name where the data's `x` is a dict;
`n_outputs` the class count or target width, or a dict of each output's values per sample where `y` is a dict
(the model then has an output named after each of its keys).
One declaring `seeds` or `task` receives the run's `Seeds` and `data.task`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracking.config.params import CLASSIFICATION, MULTILABEL
from tracking.config.references import referenced_values, resolved
from tracking.config.user_code import team_call
from tracking.errors import TrackingError, UserCodeError
from tracking.redaction import redact_params, redact_text, secret_values


def call_builder(
    builder: Callable[..., Any],
    spec: str,
    input_shape: tuple[int, ...] | Mapping[str, tuple[int, ...]],
    n_outputs: int,
    kwargs: Mapping[str, Any],
    extra: Mapping[str, Any],
    sample: Any = None,
) -> Any:
    """`builder(input_shape, n_outputs, **extra, **kwargs)`, where `extra` holds what the builder declares of
    `seeds` and `task`; a kwarg it does not take, any exception from it, its `sys.exit` or `os._exit`
    (`team_call`), or anything but a `keras.Model` returned is a `UserCodeError`, without the credentials
    model.kwargs gave it. A model not built until called (subclassed) is called once on `sample`, a few rows of
    the training inputs, so its weights exist to be seeded (`build_unbuilt`)."""
    import keras

    signature = inspect.signature(builder)
    accepted = {name: value for name, value in extra.items() if name in signature.parameters}
    parameters = ", ".join(name for name in signature.parameters)
    try:
        signature.bind(input_shape, n_outputs, **accepted, **kwargs)
    except TypeError as err:
        unknown = [name for name in kwargs if name not in signature.parameters]
        what = f"has no parameter '{unknown[0]}'" if unknown else f"cannot be called so ({err})"
        raise UserCodeError(
            f"model.kwargs: builder '{spec}' {what}; its parameters: {parameters}; fix model.kwargs in params.yaml"
        ) from err
    secrets = secret_values(dict(kwargs), "model.kwargs.") | referenced_values(kwargs)
    values = resolved(kwargs, "model.kwargs.")  # `env:NAME` read now; the error lines show the references
    exited_fix = "return keras.Model(inputs, outputs) from it, or raise an exception saying why it cannot"
    with team_call(f"model.builder: '{spec}'", "returning a model", fix=exited_fix):
        try:
            model = builder(input_shape, n_outputs, **accepted, **values)
        except TrackingError:  # the builder said what is wrong and how to fix it: its line, as it wrote it
            raise
        except (TypeError, ValueError) as err:
            rank = (
                f"; it was given input_shape {dict(input_shape) if isinstance(input_shape, Mapping) else input_shape}, "
                "the data's x.shape[1:] as the loader or file gave it (nothing is reshaped): build the layers for "
                "that rank"
                if "ndim" in str(err)
                else ""
            )
            raise UserCodeError(
                f"model.kwargs: builder '{spec}' raised {type(err).__name__} with model.kwargs "
                f"{redact_params(dict(kwargs), 'model.kwargs.')}: {redact_text(first_line(err), secrets)}{rank}; its "
                f"parameters: {parameters}; fix model.kwargs in params.yaml (or the builder)"
            ) from err
        except Exception as err:  # the team's code failed: its error is the message, ours only says where
            raise UserCodeError(
                f"model.builder: '{spec}' raised {type(err).__name__}: {redact_text(first_line(err), secrets)}",
                fix="fix the builder (or model.kwargs in params.yaml)",
            ) from err
    if not isinstance(model, keras.Model):
        raise UserCodeError(
            f"model.builder: '{spec}' returned {type(model).__name__}, not a keras.Model; "
            "return keras.Model(inputs, outputs) (uncompiled) from it"
        )
    build_unbuilt(model, spec, input_shape, sample)
    return model


def build_unbuilt(model: Any, spec: str, input_shape: Any, sample: Any) -> None:
    """Build `model` where it or one of its layers is not built yet: called once at inference on `sample` (rows of
    the training inputs, their dtypes the data's: a dict of integer ids builds its embeddings), or built from
    `input_shape` where there is no sample. Keras's `build(shape)` of a subclassed model leaves its layers unbuilt
    (it warns), so their weights would be drawn at the first `fit`, from no seed of ours."""
    from tracking.determinism.seeding import walk_layers
    from tracking.determinism.unattributed import is_model_of_models

    if model.built and all(layer.built for layer in walk_layers(model)):
        return
    if sample is None or is_model_of_models(model):  # a GAN's has no call: its parts are built by the builder
        if model.built:
            return
        named = isinstance(input_shape, Mapping)
        model.build({k: (None, *s) for k, s in input_shape.items()} if named else (None, *input_shape))
        return
    try:
        model(sample, training=False)
    except Exception as err:
        raise UserCodeError(
            f"model.builder: '{spec}' returned a model that is not built, and calling it on two samples of the "
            f"training inputs, to create its weights, raised {type(err).__name__}: {first_line(err)}",
            fix="fix its call(), or build its layers in build() (keras.io/guides/making_new_layers_and_models_via_subclassing)",
        ) from err


def expected_output(task: str, n_outputs: int, target_shape: Sequence[int] | None) -> list[tuple[int, ...]]:
    """The output shapes (without the batch axis) that fit the task: K class scores (or 1 for two classes) per
    label, after the labels' own shape where each sample has several (a mask's (H, W): (H, W, K)); one score per
    label of multi-hot rows; or the targets' shape ((1,) for 1-D targets; a trailing 1 is taken for (H, W))."""
    shape = tuple(target_shape) if target_shape is not None else ()
    if task == CLASSIFICATION:
        return [(*shape, n_outputs), (*shape, 1)] if n_outputs == 2 else [(*shape, n_outputs)]
    if task == MULTILABEL:
        return [(n_outputs,)]
    shape = shape if target_shape is not None else (n_outputs,)
    return [shape, (*shape, 1)] if len(shape) > 1 else [shape or (1,)]


def check_output(
    model: Any,
    spec: str,
    task: str,
    n_outputs: int | Mapping[str, int],
    target_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
) -> None:
    """A `UserCodeError` unless the model has one output of a shape that fits the task, or, where the data's `y`
    is a dict, one output named after each of its keys (their shapes are the compiled losses' to check)."""
    outputs = model.outputs if getattr(model, "outputs", None) else None
    if outputs is None:
        return  # a subclassed model declares no symbolic output: fit checks it against the loss
    if isinstance(n_outputs, Mapping):
        names = output_names(model)
        if sorted(names) != sorted(n_outputs):
            raise UserCodeError(
                f"model.builder: '{spec}' returned a model with outputs {', '.join(names)} but the data's y has "
                f"targets {', '.join(sorted(n_outputs))}; name each output layer after the key of its targets in y"
            )
        return
    if len(outputs) != 1:
        raise UserCodeError(
            f"model.builder: '{spec}' returned a model with {len(outputs)} outputs "
            f"({', '.join(output_names(model))}) but the data's y is one array; return one output, or give y as a "
            "dict of targets keyed by the output names (docs/configuration.md, several outputs)"
        )
    got = tuple(outputs[0].shape[1:])
    allowed = expected_output(task, n_outputs, target_shape)
    if got not in allowed:
        want = " or ".join(str(shape) for shape in allowed)
        rows = task == CLASSIFICATION and n_outputs == 2 and target_shape is not None and len(target_shape) == 1
        hint = f", or, if y holds multi-hot rows, set data.task: multilabel ({got} fits it)" if rows else ""
        labels = (
            f" (labels of shape {tuple(target_shape)} per sample)" if task == CLASSIFICATION and target_shape else ""
        )
        raise UserCodeError(
            f"model.builder: '{spec}' returned a model whose output shape is {got} (without the batch "
            f"axis); data.task {task} with {n_outputs} output(s) needs {want}{labels}; change the last layer{hint}"
        )


def output_names(model: Any) -> list[str]:
    """The model's output names in Keras's order: a functional model's, a `Sequential`'s last layer's name, none
    for a subclassed model (it declares no outputs)."""
    if not getattr(model, "outputs", None):
        return []
    return list(model.output_names) if hasattr(model, "output_names") else [model.layers[-1].name]


def first_line(err: BaseException) -> str:
    """The first line of an error's message (its type where it has none): what a one-line user error quotes."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
