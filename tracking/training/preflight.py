"""The check a prepared model passes before any MLflow run opens: fail before training, not after it.

The model is saved and reloaded once with the team's custom objects (as evaluate will reload it), the reloaded copy
must give the model's own outputs at inference (as scoring will see it), and the copy trains one step and evaluates
one step on a batch of the training data shaped as `fit` hands it, `(x, y)`. Each failure is one `UserCodeError`
line naming the layer or the method to fix (`get_config`, `call`, `train_step`'s data); the model itself is left as
it was. Metrics that read exactly 0.0 because a model with its own `train_step` has no `test_step` are named in a
`warning:` line.
"""

from __future__ import annotations

import logging
import re
import tempfile
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tracking.config.model_checks import check_class_weight
from tracking.config.params import CLASSIFICATION, MULTILABEL, Params, TrainParams
from tracking.data.arrays import columns, map_arrays, n_rows, rows
from tracking.determinism.seeding import generators_kept, inference_streams, walk_layers
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import is_determinism_error
from tracking.errors import UserCodeError
from tracking.training.augment import augment_function
from tracking.training.batches import fit_arrays, in_batches
from tracking.training.compiling import compile_model, custom_objects
from tracking.training.weighting import training_weights

log = logging.getLogger(__name__)

# Examples in the batch the check trains and evaluates on.
CHECK_BATCH = 8
# The keras-io guide a team's custom layers and models follow, named in the error lines.
SUBCLASSING_GUIDE = "keras.io/guides/making_new_layers_and_models_via_subclassing"
CUSTOM_FIT_GUIDE = "keras.io/guides/custom_train_step_in_tensorflow"


def preflight(model: Any, params: Params, seeds: Seeds, inputs: Any) -> str:
    """Check that `model` (compiled) saves, reloads to the same outputs, trains and evaluates a step, and that a
    classifier's outputs are probabilities or logits its loss reads; raise a `UserCodeError` naming what to fix.
    Return what the outputs are (`prov.model.outputs`: probabilities, logits, values for regression, or compiled
    for a model of several outputs, which its compiled losses and metrics alone score)."""
    from tracking.training.scoring import COMPILED, label_probabilities, task_output_kind

    spec = params.model.builder
    if params.data.task == CLASSIFICATION:
        check_class_weight(params.train, inputs.n_outputs)
    x, y = rows(inputs.train["x"], slice(CHECK_BATCH)), rows(inputs.train["y"], slice(CHECK_BATCH))
    weights = training_weights(params.train, inputs.train)
    with tempfile.TemporaryDirectory(prefix="tracking-preflight-") as folder:
        path = Path(folder) / "model.keras"
        _save(model, path, spec, inputs.root)
        copy = _reload(path, model, params, spec, inputs.root)
    outputs = _same_outputs(model, copy, x, seeds, spec, inputs.root)
    task = params.data.task
    if isinstance(y, Mapping):
        kind = COMPILED
    elif task in (CLASSIFICATION, MULTILABEL):
        kind = task_output_kind(model, task, y, outputs)
        label_probabilities(outputs, y, inputs.n_outputs, task, kind)
    else:
        kind = "values"
    compile_model(copy, params, inputs.root)
    copy.run_eagerly = True  # one step: tracing the copy's train and test functions would cost ten times the step
    batch = fit_arrays({"x": x, "y": y, "sample_weight": None if weights is None else weights[:CHECK_BATCH]})
    augment = augment_function(params.train, inputs.root)
    _one_step(
        copy, batch if augment is None else _augmented(batch, augment, params.train, inputs.root), spec, inputs.root
    )
    return kind


def _augmented(batch: tuple[Any, ...], augment: Any, train_params: TrainParams, root: Path) -> tuple[Any, ...]:
    """The check's batch through `train.augment`, as training maps it, as NumPy arrays; a `UserCodeError` naming
    the function where it fails or returns other than `(x, y)`."""
    import tensorflow as tf

    from tracking.training.augment import augmented

    try:
        found = next(iter(augmented(tf.data.Dataset.from_tensors(batch), augment, 0)))
    except Exception as err:
        raise UserCodeError(
            f"train.augment: '{train_params.augment}' failed on a training batch inside the tf.data pipeline: "
            f"{_summary(err, root)}; it is called as augment(x, y, seed) on each batch (tensors, seed the "
            "stateless pair [seeds.augment, step]) and must return the pair (x, y) (docs/configuration.md)"
        ) from err
    return tuple(map_arrays(np.asarray, value) for value in found)


def _save(model: Any, path: Path, spec: str, root: Path) -> None:
    try:
        model.save(path)
    except Exception as err:
        layer = _unconfigurable_layer(model)
        what = f"layer '{layer.name}' ({type(layer).__name__})" if layer is not None else "the model"
        raise UserCodeError(
            f"model.builder: '{spec}' builds a model that cannot be saved: {what} raised {_summary(err, root)}; "
            f"give it a get_config() that returns every argument of its __init__ ({SUBCLASSING_GUIDE})"
        ) from err


def _unconfigurable_layer(model: Any) -> Any:
    """The first layer whose `get_config` raises, or None."""
    for layer in [*walk_layers(model)[1:], model]:
        try:
            layer.get_config()
        except Exception:
            return layer
    return None


def _reload(path: Path, model: Any, params: Params, spec: str, root: Path) -> Any:
    import keras

    found = custom_objects(params, root)
    try:
        return keras.models.load_model(path, custom_objects=found, compile=False)
    except Exception as err:
        layer, why = _unrecreatable_layer(model, found)
        what = f"layer '{layer.name}' ({type(layer).__name__}) raised {why}" if layer else _summary(err, root)
        function = getattr(layer, "function", None) if isinstance(layer, keras.layers.Lambda) else None
        if function is not None and getattr(function, "__name__", "<lambda>") != "<lambda>":
            raise UserCodeError(
                f"model.builder: the model '{spec}' builds is saved but cannot be re-created: its Lambda layer "
                f"'{layer.name}' saves its function '{function.__name__}' by name, and Keras finds a function by "
                f"name only once it is registered; decorate '{function.__name__}' in its module with "
                "@keras.saving.register_keras_serializable()"
            ) from err
        raise UserCodeError(
            f"model.builder: the model '{spec}' builds is saved but cannot be re-created from its config: {what}; "
            "give each custom layer a get_config() that returns every argument of its __init__, and define the "
            f"classes in the builder's module so they are found ({SUBCLASSING_GUIDE})"
        ) from err


def _unrecreatable_layer(model: Any, found: dict[str, Any]) -> tuple[Any, str]:
    """The first layer that its class cannot re-create from its config, with what it raised; (None, "") if none."""
    from keras.saving import custom_object_scope

    with custom_object_scope(found):
        for layer in walk_layers(model)[1:]:
            try:
                type(layer).from_config(layer.get_config())
            except Exception as err:
                return layer, f"{type(err).__name__}: {_text(err)}"
    return None, ""


def _same_outputs(model: Any, copy: Any, x: np.ndarray, seeds: Seeds, spec: str, root: Path) -> np.ndarray:
    """The model's outputs on `x` at inference, checked equal to the reloaded copy's; the model's generators are left
    where they were (layers that draw at inference draw here)."""
    with generators_kept(model):
        inference_streams(model, seeds)
        inference_streams(copy, seeds)
        outputs = _inference(model, x, "the model", spec, root)
        reloaded = _inference(copy, x, "the reloaded model", spec, root)
    if outputs.shape != reloaded.shape or not np.array_equal(outputs, reloaded, equal_nan=True):
        gap = np.nanmax(np.abs(outputs - reloaded)) if outputs.shape == reloaded.shape else "other shapes"
        raise UserCodeError(
            f"model.builder: the model '{spec}' builds gives other outputs once saved and reloaded (largest "
            f"difference {gap}{_first_differing_layer(model, copy, x)}), so the saved model is not the trained one; "
            "keep a layer's state in weights made with add_weight, return every __init__ argument from get_config, "
            f"and pass Keras objects by name (activation='gelu', not a function Keras saves by name) ({SUBCLASSING_GUIDE})"
        )
    return outputs


def _first_differing_layer(model: Any, copy: Any, x: np.ndarray) -> str:
    """`, first in layer '<name>' (<class>)[: its config differs in <keys>]` for the first layer of a functional
    model whose output differs once reloaded; "" where the model has no such layers to read."""
    import keras

    if not getattr(model, "inputs", None) or len(model.layers) != len(copy.layers):
        return ""
    for mine, theirs in zip(model.layers, copy.layers, strict=True):
        try:
            ours = keras.ops.convert_to_numpy(keras.Model(model.inputs, mine.output)(x, training=False))
            reloaded = keras.ops.convert_to_numpy(keras.Model(copy.inputs, theirs.output)(x, training=False))
        except Exception:  # a layer with several outputs or inputs: say no more than the model's gap
            return ""
        if ours.shape != reloaded.shape or not np.array_equal(ours, reloaded, equal_nan=True):
            before, after = mine.get_config(), theirs.get_config()
            keys = sorted(key for key in before.keys() | after.keys() if str(before.get(key)) != str(after.get(key)))
            differs = (
                f": its config differs in {', '.join(keys)} ({before.get(keys[0])} saved as {after.get(keys[0])})"
                if keys
                else ""
            )
            return f", first in layer '{mine.name}' ({type(mine).__name__}){differs}"
    return ""


def _inference(model: Any, x: np.ndarray, which: str, spec: str, root: Path) -> np.ndarray:
    """The model's outputs on `x` at inference, as NumPy; several outputs as every output's values per sample."""
    from tracking.training.scoring import by_output

    try:
        import keras

        found = keras.tree.map_structure(keras.ops.convert_to_numpy, model(x, training=False))  # any device's
        return columns(by_output(model, found)) if isinstance(found, (dict, list, tuple)) else found
    except Exception as err:
        if is_determinism_error(err):
            raise  # an op op determinism refuses: not the team's mistake (the audit names the op and its alternatives)
        raise UserCodeError(
            f"model.builder: {which} of '{spec}' fails at inference on a batch of the training inputs: "
            f"{_summary(err, root)}; fix its call()"
        ) from err


def _one_step(copy: Any, arrays: tuple[Any, ...], spec: str, root: Path) -> None:
    """Train one step and evaluate one step on `arrays`, `(x, y)` or `(x, y, sample_weight)`, as fit and evaluate
    hand a batch; warn about metrics that a model without its own `test_step` leaves at exactly 0.0."""
    import keras

    batch = in_batches(arrays, n_rows(arrays[1]))
    for method, run in (
        ("train_step", lambda: copy.fit(batch, epochs=1, shuffle=False, verbose=0)),
        ("test_step", lambda: copy.evaluate(batch, verbose=0, return_dict=True)),
    ):
        try:
            result = run()
        except Exception as err:
            if is_determinism_error(err):
                raise
            result = _traced_step(copy, run)
            if result is not None:
                continue
            own = getattr(type(copy), method) is not getattr(keras.Model, method)
            blamed = method if own else OWN_CODE_IN_A_STEP  # Keras's own step: what the team gave it to call
            raise UserCodeError(
                f"model.builder: one {method.split('_')[0]}ing step of the model '{spec}' builds failed on a batch "
                f"as Keras hands it (data = (x, y)): {_summary(err, root)}; fix its {_method(err, root, blamed)}"
                + (f" ({CUSTOM_FIT_GUIDE})" if own else "")
            ) from err
    cls = type(copy)
    if cls.train_step is not keras.Model.train_step and cls.test_step is keras.Model.test_step:
        zeros = sorted(name for name, value in result.items() if name != "loss" and value == 0.0)
        if zeros:
            log.warning(
                "model.builder: the model '%s' builds has its own train_step but no test_step, and its metrics %s "
                "read exactly 0.0 when evaluated: validation and test values of them are not measured; define "
                "test_step beside train_step (%s)",
                spec,
                ", ".join(zeros),
                CUSTOM_FIT_GUIDE,
            )


def _traced_step(copy: Any, run: Any) -> Any:
    """The step `run` takes once more as `fit` runs it, traced, after it failed eagerly on TensorFlow: its result
    where it passes now (the next step then runs traced too), else None (the eager failure is the team's to fix).
    Keras's eager loop on TensorFlow hands each step's logs through a `tf.data` Optional, which cannot carry a
    metric's variable (`result()` returning `self.total.value`, as Keras's guides write it); traced, as `fit` runs
    it, the value is a tensor."""
    from tracking.determinism.backend import TENSORFLOW, configured

    if configured() != TENSORFLOW or not copy.run_eagerly:
        return None
    copy.run_eagerly = False  # and the next step traced too, without failing eagerly first
    copy.train_function = copy.test_function = None  # made for the eager loop: made again, traced
    try:
        return run()
    except Exception:  # the step fails traced too: the eager error names the team's line better
        copy.run_eagerly = True
        return None


# What a step of Keras's own calls of the team's code, named where the error's traceback does not reach it.
OWN_CODE_IN_A_STEP = (
    "layers' call, loss, or metrics' update_state and result (on JAX a metric's result() returns a value, "
    "e.g. `self.total.value`, not the variable)"
)
_COLOUR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # ANSI escape sequences (Keras makes its messages bold)
_KERAS_ARGUMENTS = re.compile(r"Arguments received by .*", re.DOTALL)


def _user_frame(err: BaseException, root: Path) -> traceback.FrameSummary | None:
    """The innermost frame of the team's own code (a file under the project root, outside `tracking/`) in `err`."""
    own, library = root.resolve(), (root / "tracking").resolve()
    found = None
    for frame in traceback.extract_tb(err.__traceback__):
        file = Path(frame.filename).resolve()
        if file.is_relative_to(own) and not file.is_relative_to(library):
            found = frame
    return found


def _method(err: BaseException, root: Path, fallback: str) -> str:
    """The team's method the error came from (`call`, `train_step`, ...), with its place, or `fallback`'s name."""
    frame = _user_frame(err, root)
    if frame is None:
        return (
            f"{fallback} (its data is a tuple (x, y): unpack it as `x, y = data`)" if "train" in fallback else fallback
        )
    name = frame.name if frame.name in ("call", "train_step", "test_step", "compute_loss") else f"{frame.name}()"
    where = f"{Path(frame.filename).name}:{frame.lineno}"
    if name == "train_step":
        return f"train_step's handling of its data ({where}): fit passes a tuple (x, y), unpack it as `x, y = data`"
    return f"{name} ({where})"


def _summary(err: BaseException, root: Path) -> str:
    """`Type: first line` of `err`, with the team's line it came from when there is one."""
    frame = _user_frame(err, root)
    where = f" at {Path(frame.filename).name}:{frame.lineno} in {frame.name}" if frame else ""
    return f"{type(err).__name__}{where}: {_text(err)}"


def _text(err: BaseException, limit: int = 240) -> str:
    """`err`'s message on one line, cut at `limit` characters, without terminal colour codes or the arguments
    Keras appends (`Arguments received by ...`: the batch's raw training values)."""
    message = _KERAS_ARGUMENTS.sub("", _COLOUR.sub("", str(err)))
    text = " ".join(message.split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
