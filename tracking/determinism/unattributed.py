"""Randomness no layer's seed covers: the draws a training-mode call of the model makes without a layer's generator
(a `keras.random` call without one, from Keras's global generator; a stateful `tf.random` op), found by tracing the
call (on JAX and PyTorch, one stateless call on zeros) and seeded from `seeds.base`; and the one warning naming all
such randomness (`prov.seeds.unattributed`) with what makes each kind follow a layer's seed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from tracking.determinism.backend import TENSORFLOW, configured

log = logging.getLogger(__name__)


# Stateful TensorFlow random ops: seeded from the global TF seed and a graph counter, so not by any layer's
# seed. (Keras's own random functions use the stateless kind with a seed from a generator.)
STATEFUL_RANDOM_OPS = frozenset(
    {
        "RandomStandardNormal",
        "RandomUniform",
        "RandomUniformInt",
        "TruncatedNormal",
        "RandomShuffle",
        "Multinomial",
        "RandomGamma",
        "RandomPoisson",
        "RandomPoissonV2",
        "ParameterizedTruncatedNormal",
        "RandomCrop",
        "RandomGammaGrad",
        "StatefulStandardNormalV2",
        "StatefulUniform",
        "StatefulUniformInt",
        "StatefulUniformFullInt",
        "StatefulTruncatedNormal",
        "StatefulRandomBinomial",
    }
)


def unattributed_randomness(model: Any, input_shape: Any, base: int, example: Any = None) -> list[str]:
    """Random draws in a training-mode call of `model` that no layer's generator makes, after seeding Keras's
    global generator from `base`: found by tracing the call (nothing runs, so no state moves). `input_shape` is
    one shape, or a dict of them by input name for a model fed a dict. On JAX and PyTorch the model is called
    instead, once, statelessly, on one sample of zeros (`global_draws_in_call`). `example` gives the dtypes of a
    model without symbolic inputs."""
    seed_global_generator(base)
    if input_shape is None and not model_inputs(model) and example is None:
        return ["not checked: the model has no inputs of its own (a model of models), so its call is not traced"]
    if configured() != TENSORFLOW:
        return global_draws_in_call(model, input_shape, example)
    import tensorflow as tf

    spec = sample_inputs(model, input_shape, tf.TensorSpec, example)
    with recording_global_draws(tf.get_current_name_scope) as global_calls:
        try:
            graph = tf.function(lambda x: model(x, training=True)).get_concrete_function(spec).graph
        except Exception as err:  # a model that only runs eagerly: say the check could not look, never stay silent
            first = (str(err).splitlines() or [""])[0][:200]
            return [f"not checked: tracing the model in training mode failed ({type(err).__name__}: {first})"]
    found = [f"keras.random without a SeedGenerator in {scope}" for scope in dict.fromkeys(global_calls)]
    found += [f"tf.random op {op.type} at {op.name}" for op in graph.get_operations() if op.type in STATEFUL_RANDOM_OPS]
    return found


def global_draws_in_call(model: Any, input_shape: Any, example: Any = None) -> list[str]:
    """`unattributed_randomness` where nothing can be traced without running (JAX, PyTorch): one training-mode
    `stateless_call` on a sample of zeros, which leaves every variable and generator of the model as it was,
    recording each draw from Keras's global generator by the layer it came from."""
    import numpy as np
    from keras.src.backend.common.name_scope import current_path

    x = sample_inputs(model, input_shape, lambda shape, dtype: np.zeros((1, *shape[1:]), dtype), example)
    trainable = [variable.value for variable in model.trainable_variables]
    non_trainable = [variable.value for variable in model.non_trainable_variables]
    with recording_global_draws(current_path) as calls:
        try:
            model.stateless_call(trainable, non_trainable, x, training=True)
        except Exception as err:  # a model that cannot be called on zeros: say the check could not look
            first = (str(err).splitlines() or [""])[0][:200]
            return [f"not checked: calling the model in training mode failed ({type(err).__name__}: {first})"]
    return [f"keras.random without a SeedGenerator in {scope}" for scope in dict.fromkeys(calls)]


def is_model_of_models(model: Any) -> bool:
    """A model of models (keras-io's GAN): no symbolic inputs and no `call` of its own, so it cannot be called on
    the data; a subclassed model with its own `call` is a single model, called to be built and traced."""
    import keras

    return not model_inputs(model) and type(model).call is keras.Model.call


def model_inputs(model: Any) -> list[Any]:
    """The model's symbolic inputs (none for a subclassed model or a model of models)."""
    return getattr(model, "inputs", None) or []


def sample_inputs(
    model: Any, input_shape: Any, leaf: Callable[[tuple[int | None, ...], Any], Any], example: Any = None
) -> Any:
    """The inputs `model` is called with, in the structure it takes (a dict by name, its functional inputs' own
    structure, or one array), each made by `leaf(shape, dtype)`, the shape with its sample axis (None where the
    model leaves it open): a TensorSpec to trace, or zeros to call. A model without symbolic inputs takes the
    structure, shapes and dtypes of `example` (a sample of its data) where one is given."""
    inputs = model_inputs(model)
    if not inputs and example is not None:
        from keras import tree

        return tree.map_structure(lambda array: leaf((None, *array.shape[1:]), array.dtype), example)
    if isinstance(input_shape, dict):
        dtypes = {tensor.name: tensor.dtype for tensor in inputs}
        return {name: leaf((None, *shape), dtypes.get(name, "float32")) for name, shape in input_shape.items()}
    if len(inputs) > 1:  # a functional model of several inputs, in the structure it was built with
        from keras import tree

        return tree.map_structure(
            lambda tensor: leaf(tuple(tensor.shape), tensor.dtype), getattr(model, "_inputs_struct", inputs)
        )
    return leaf((None, *input_shape), inputs[0].dtype if inputs else "float32")


@contextlib.contextmanager
def recording_global_draws(scope: Callable[[], str | None]) -> Iterator[list[str]]:
    """The scope (`scope()`, else "the model") of every draw from Keras's global generator made in the block."""
    from keras.src.random import seed_generator

    calls: list[str] = []
    original = seed_generator.global_seed_generator

    def recording() -> Any:
        calls.append(scope() or "the model")
        return original()

    seed_generator.global_seed_generator = recording
    try:
        yield calls
    finally:
        seed_generator.global_seed_generator = original


def seed_global_generator(base: int) -> None:
    """Keras's global generator (what `keras.random` calls without a generator draw from), seeded from `base`."""
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator

    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, seed_generator.SeedGenerator(base))


_warned = False


def warn_unattributed(sources: tuple[str, ...]) -> None:
    """Say once per process that some randomness follows `seeds.base` only, naming it."""
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "randomness no layer's seed covers, seeded from seeds.base (recorded in prov.seeds.unattributed): %s",
            "; ".join((*sources, *_advice(sources))),
        )


def _advice(sources: tuple[str, ...]) -> list[str]:
    """What makes each kind of unattributed randomness among `sources` follow a layer's seed."""
    advice = []
    if any(source.startswith(("variable ", "initializer ")) for source in sources):
        advice.append(
            "create a weight with the layer's add_weight(initializer=...), a Keras initializer, kept as the layer's "
            "`<weight>_initializer`, so seeds.init draws it"
        )
    if any(source.startswith(("keras.random ", "tf.random ")) for source in sources):
        advice.append("give the layer its own keras.random.SeedGenerator so seeds.dropout or seeds.augment decides it")
    return advice
