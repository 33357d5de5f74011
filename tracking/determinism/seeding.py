"""Seeds for any Keras model: each layer's randomness re-seeded by its position in the model, not by its name.

After a builder returns (ours or a team's), `seed_model` walks the model's layers depth first in the order
they are tracked (sub-layers of a layer right after it) and gives
- every weight drawn by a random initializer the seed `seeds.init + k`, k counting those weights in walk
  order (each layer's weights in creation order), and re-draws it;
- every `SeedGenerator` of an augmentation layer (a Keras preprocessing layer or a subclass of one, or a team's
  layer named as augmentation is named, `Random...` or `...Augment...`: keras-io's `RandomColorAffine`) the state
  `[seeds.augment + i, 0]`, i counting those generators in walk order;
- every other layer's `SeedGenerator` (the Dropout family, GaussianNoise, recurrent dropout in RNN cells,
  MultiHeadAttention's dropout, a custom layer's own generator) the state `[seeds.dropout + j, 0]`.
The record names the layers each generator stream seeds (`prov.model.seeded_*_layers`), so which layers follow
`seeds.dropout` and which `seeds.augment` is written down, not inferred. So changing one of the three seeds changes
its stream alone. The built-in builders' seeds follow the same numbering (their k-th kernel initializer used
`seeds.init + k`), so their weights are unchanged.

Randomness that cannot be attributed to a layer's stream is seeded from `seeds.base` and named in the run's
provenance (`prov.seeds.unattributed`): an initializer that is not a Keras one and draws, or a variable made outside
`add_weight` (found here), a `keras.random` call without a generator or a stateful `tf.random` op (found by
tracing the model, tracking/determinism/unattributed.py). It is also warned about once.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tracking.determinism.backend import TORCH, configured
from tracking.determinism.seeds import Seeds
from tracking.determinism.unattributed import seed_global_generator, unattributed_randomness, warn_unattributed

log = logging.getLogger(__name__)

# The counter every generator scores from (`inference_streams`): far beyond the draws a training makes, so inference
# never repeats a training draw.
INFERENCE_COUNTER = 1 << 30
# Initializers that draw nothing: re-seeding them is not needed, and they are not unattributed randomness.
_DETERMINISTIC_INITIALIZERS = frozenset({"Zeros", "Ones", "Constant", "Identity", "STFT", "STFTInitializer"})


@dataclass
class Created:
    """Weights created while a builder ran: (layer, variable, initializer) in creation order; `missing` says why a
    variable of the model is not among them, as provenance names it. `kept`: the ids of the variables assigned
    after their first draw (a teacher the builder trained, weights it loaded or set), which seeding never re-draws;
    `first` holds each weight's first draw while the builder runs, to find them."""

    weights: list[tuple[Any, Any, Any]] = field(default_factory=list)
    missing: str = "made outside add_weight"
    kept: set[int] = field(default_factory=set)
    first: dict[int, Any] = field(default_factory=dict)

    def find_kept(self) -> None:
        """Mark every weight whose value is no longer its first draw as kept, and let the first draws go."""
        import keras
        import numpy as np

        for _, variable, _ in self.weights:
            first = self.first.get(id(variable))
            if first is not None and not np.array_equal(first, keras.ops.convert_to_numpy(variable), equal_nan=True):
                self.kept.add(id(variable))
        self.first.clear()

    def kept_variables(self) -> list[Any]:
        """The kept weights, in creation order."""
        return [variable for _, variable, _ in self.weights if id(variable) in self.kept]


@dataclass(frozen=True)
class SeedReport:
    """How many weights and generators each stream seeded, and the randomness no stream covers."""

    init: int
    dropout: int
    augment: int
    unattributed: tuple[str, ...]
    kept: int = 0
    kept_sha256: str = ""  # the kept weights' SHA-256, in creation order (`with_kept_digest`, tracking/training)
    layers: dict[str, str] = field(default_factory=dict)  # by stream: its layers' classes, counted (`stream_layers`)

    def as_record(self) -> dict[str, Any]:
        """The provenance entries (`prov.model.*`): counts per stream, the weights kept as the builder left them (their
        count and SHA-256) where any were, and the unattributed sources, if any."""
        record: dict[str, Any] = {
            "seeded_weights": self.init,
            "seeded_dropout_generators": self.dropout,
            "seeded_augment_generators": self.augment,
        }
        record.update({f"seeded_{stream}_layers": layers for stream, layers in self.layers.items() if layers})
        if self.kept:
            record.update(kept_weights=self.kept, kept_weights_sha256=self.kept_sha256)
        if self.unattributed:
            record["unattributed"] = "; ".join(self.unattributed)
        return record

    def unused(self) -> dict[str, str]:
        """The seeds of streams that seeded nothing in the model, each with what it would have drawn: recorded as
        unused (`prov.seeds.<source>`), never as a seed the run used."""
        found = {"init": self.init, "dropout": self.dropout, "augment": self.augment}
        return {source: UNUSED[source] for source, count in found.items() if not count}


# `prov.seeds.<source>` of a stream the model has nothing of (the template's train.augment uses seeds.augment too).
UNUSED = {
    "init": "unused: no weight of the model was at its initializer's first draw",
    "dropout": "unused: the model has no dropout or other generator outside augmentation layers",
    "augment": "unused: the model has no augmentation layer (a Keras preprocessing layer, or one named Random... or "
    "...Augment...) with a generator",
}
# `prov.seeds.<source>` of a stream whose generators all stood still in training.
IDLE = "unused: the model's {n} generator(s) of this stream drew nothing in training (a dropout rate of 0, say)"


@contextlib.contextmanager
def capturing_weights() -> Iterator[Created]:
    """Record every weight a layer adds (with its initializer) while the block runs, e.g. while a builder builds."""
    from keras import initializers
    from keras.src.layers.layer import Layer

    created = Created()
    original = Layer.add_weight

    def add_weight(layer: Any, *args: Any, **kwargs: Any) -> Any:
        variable = original(layer, *args, **kwargs)
        initializer = kwargs.get("initializer", args[1] if len(args) > 1 else None)
        if initializer is None:
            initializer = "glorot_uniform" if "float" in str(variable.dtype) else "zeros"
        created.weights.append((layer, variable, initializers.get(initializer)))
        created.first[id(variable)] = _first_draw(variable)
        return variable

    Layer.add_weight = add_weight
    try:
        yield created
    finally:
        Layer.add_weight = original
    created.find_kept()


def _first_draw(variable: Any) -> Any:
    """A copy of the value `variable` was created with (a view on PyTorch would follow it); None where it holds
    none yet (a variable Keras initialises later)."""
    import keras
    import numpy as np

    try:
        return np.array(keras.ops.convert_to_numpy(variable), copy=True)
    except Exception:  # an uninitialised variable: nothing assigned it, so it is at its first draw
        return None


def walk_layers(model: Any) -> list[Any]:
    """`model` and every sub-layer, depth first in tracking order, each once: the positions seeds follow."""
    found: list[Any] = []
    seen: set[int] = set()

    def visit(layer: Any) -> None:
        if id(layer) in seen:
            return
        seen.add(id(layer))
        found.append(layer)
        for sub in layer._layers:
            visit(sub)

    visit(model)
    return found


def is_augmentation(layer: Any) -> bool:
    """An augmentation layer, whose randomness is the augment stream: a Keras preprocessing layer (RandomFlip,
    RandomTranslation, ...) or a subclass of one, or a layer whose class (or a base class of it) is named as Keras
    and keras-io name augmentation, `Random...` or `...Augment...` (keras-io's `RandomColorAffine`, Barlow twins'
    `Augmentation` subclasses). Any other layer's generator (Dropout, StochasticDepth) is the dropout stream."""
    return any(
        cls.__module__.startswith("keras.src.layers.preprocessing")
        or cls.__name__.startswith("Random")
        or "Augment" in cls.__name__
        for cls in type(layer).__mro__
    )


def stream_layers(layers: list[Any]) -> dict[str, str]:
    """By generator stream, the classes of the layers holding its generators, counted (`Dropout: 2, StochasticDepth:
    1`): the record of which layers draw from `seeds.dropout` and which from `seeds.augment`."""
    found: dict[str, Counter[str]] = {"dropout": Counter(), "augment": Counter()}
    for layer in layers:
        if layer._seed_generators:
            found["augment" if is_augmentation(layer) else "dropout"][type(layer).__name__] += 1
    return {stream: ", ".join(f"{name}: {n}" for name, n in counts.most_common()) for stream, counts in found.items()}


def seed_model(model: Any, created: Created, seeds: Seeds, input_shape: Any, example: Any = None) -> SeedReport:
    """Re-seed `model`'s initial weights and generators by position (see the module docstring); report them, with
    the weights kept as the builder trained or loaded them (`created.kept`). `input_shape` None: a model of models
    with no inputs of its own (a GAN), whose call is not traced; a dict of shapes by input name for a model fed a
    dict. `example`: a sample of the inputs, whose dtypes a model without symbolic inputs (subclassed) is traced
    with."""
    init, counts, unattributed = reseed(model, created, seeds)
    unattributed += unattributed_randomness(model, input_shape, seeds.base, example)
    kept = created.kept_variables()
    layers = stream_layers(walk_layers(model))
    report = SeedReport(init, counts["dropout"], counts["augment"], tuple(unattributed), len(kept), layers=layers)
    if kept:
        log.info(
            "%d weight(s) of the model (%s%s) were trained, loaded or set before it was returned: kept as they are "
            "(prov.model.kept_weights_sha256), not drawn from seeds.init",
            len(kept),
            ", ".join(variable.path for variable in kept[:3]),
            ", ..." if len(kept) > 3 else "",
        )
    if report.unattributed:
        warn_unattributed(report.unattributed)
    return report


def reseed(model: Any, created: Created, seeds: Seeds) -> tuple[int, dict[str, int], list[str]]:
    """Draw every random initial weight and set every generator's state from `seeds`, by position; return the
    counts of weights and generators seeded and the initializers and variables no stream covers."""
    from keras.src.initializers.random_initializers import RandomInitializer

    layers = walk_layers(model)
    order = {id(layer): index for index, layer in enumerate(layers)}
    by_layer = sorted(enumerate(created.weights), key=lambda item: (order.get(id(item[1][0]), len(order)), item[0]))
    unattributed = []
    k = 0
    for _, (layer, variable, initializer) in by_layer:
        name = type(initializer).__name__
        if id(variable) in created.kept:
            continue  # trained or loaded by the builder: the model as the team made it
        if isinstance(initializer, RandomInitializer):
            config = {**initializer.get_config(), "seed": seeds.init + k}
            variable.assign(type(initializer).from_config(config)(variable.shape, dtype=variable.dtype))
            k += 1
        elif name not in _DETERMINISTIC_INITIALIZERS and _draws(initializer, variable):
            unattributed.append(f"initializer {name} of {_describe(layer, order)}")
    captured = {id(variable) for _, variable, _ in created.weights}
    for layer in layers:
        for variable in layer._trainable_variables + layer._non_trainable_variables:
            if id(variable) not in captured:
                unattributed.append(f"variable {variable.path} of {_describe(layer, order)} {created.missing}")
                captured.add(id(variable))
    return k, set_generators(layers, seeds), unattributed


def set_generators(layers: list[Any], seeds: Seeds, counter: int = 0) -> dict[str, int]:
    """Set every generator of `layers` (in walk order) to `[seed of its stream + its position, counter]`;
    return how many each stream holds.

    On PyTorch, Keras's dropout draws from torch's global generator, not the layer's, when the layer was made
    without a seed (its "fast path"); the generator is then marked seeded, so that dropout follows its stream.
    """
    import numpy as np

    torch = configured() == TORCH
    counts = {"dropout": 0, "augment": 0}
    for generator, stream, seed in generator_seeds(layers, seeds):
        generator.state.assign(np.array([seed, counter], dtype=generator.state.dtype))
        if torch:
            generator._initial_seed = seed
        counts[stream] += 1
    return counts


def generator_seeds(layers: list[Any], seeds: Seeds) -> Iterator[tuple[Any, str, int]]:
    """Every generator of `layers` in walk order, with its stream and the seed its position gives it."""
    counts = {"dropout": 0, "augment": 0}
    for layer in layers:
        stream = "augment" if is_augmentation(layer) else "dropout"
        for generator in layer._seed_generators:
            yield generator, stream, getattr(seeds, stream) + counts[stream]
            counts[stream] += 1


def idle_streams(models: list[Any], seeds: Seeds) -> dict[str, str]:
    """After training: the streams whose generators were seeded and never drew (a Dropout of rate 0, a recurrent
    layer's generator with no dropout set), each with why, so their seed is recorded as unused, not as used. A
    generator that drew has moved from its seeded state `[seed, 0]` (Keras counts each draw in its state)."""
    import numpy as np

    held, drew = {"dropout": 0, "augment": 0}, {"dropout": 0, "augment": 0}
    for model in models:
        for generator, stream, seed in generator_seeds(walk_layers(model), seeds):
            held[stream] += 1
            drew[stream] += not np.array_equal(np.asarray(generator.state.numpy()), [seed, 0])
    return {stream: IDLE.format(n=held[stream]) for stream in held if held[stream] and not drew[stream]}


@contextlib.contextmanager
def generators_kept(model: Any) -> Iterator[None]:
    """Put every generator of `model` back where it was after the block: a call in it of a layer that draws at
    inference (a check's, a signature's) leaves no trace in what the model draws afterwards."""
    generators = [generator for layer in walk_layers(model) for generator in layer._seed_generators]
    import numpy as np

    states = [np.array(generator.state.numpy(), copy=True) for generator in generators]  # a view on PyTorch
    try:
        yield
    finally:
        for generator, state in zip(generators, states, strict=True):
            generator.state.assign(state)


def inference_streams(model: Any, seeds: Seeds) -> None:
    """Set every generator to the state it scores from: its training stream's seed at counter `INFERENCE_COUNTER`.

    A layer that draws at inference (a VAE's sampling layer, Monte Carlo dropout) would otherwise score from
    wherever training left its generator, and a reloaded model from a state Keras draws afresh (a generator's state
    is not saved with the model). Set here before every scoring, the candidate (reloaded by evaluate) and each
    calibration repeat (scored in memory) draw the same numbers.
    """
    set_generators(walk_layers(model), seeds, INFERENCE_COUNTER)


def reset_global_streams(seeds: Seeds) -> None:
    """Seed Python's, NumPy's, TensorFlow's and Keras's global random streams from `seeds.base` again: what training
    draws from them (randomness no layer's seed covers) then follows the seeds alone, not what ran before."""
    import keras

    keras.utils.set_random_seed(seeds.base)
    seed_global_generator(seeds.base)


def _draws(initializer: Any, variable: Any) -> bool:
    """Whether an initializer that is not a Keras random one (e.g. LSTM's forget-gate bias function) draws
    randomness: two calls differ."""
    import keras
    import numpy as np

    first, second = (keras.ops.convert_to_numpy(initializer(variable.shape, dtype=variable.dtype)) for _ in range(2))
    return not np.array_equal(first, second)


def _describe(layer: Any, order: dict[int, int]) -> str:
    """A layer as provenance names it: its class and position in the walk."""
    return f"layer #{order.get(id(layer), '?')} ({type(layer).__name__})"
