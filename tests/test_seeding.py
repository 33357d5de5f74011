"""Seeds for any model: a team's model, written without a single seed, gets each stream of randomness from its
own seed (init, dropout, augment) by layer position; randomness no stream covers is found and named."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

ZOO = '''\
import keras
import tensorflow as tf


class Jitter(keras.layers.Layer):
    """A custom stochastic layer drawing from its own generator."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.generator = keras.random.SeedGenerator()

    def call(self, x, training=False):
        return x + keras.random.normal(keras.ops.shape(x), seed=self.generator) if training else x


class Unseeded(keras.layers.Layer):
    """Randomness no generator of the layer makes: Keras's global generator and a stateful tf.random op."""

    def call(self, x, training=False):
        if not training:
            return x
        return x + keras.random.normal(keras.ops.shape(x)) + tf.random.uniform(tf.shape(x))


def everything(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    x = keras.layers.RandomFlip("horizontal")(inputs)
    x = keras.layers.RandomTranslation(0.25, 0.25)(x)
    x = keras.layers.Conv2D(4, 3, padding="same")(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.SpatialDropout2D(0.3)(x)
    x = keras.layers.Reshape((input_shape[0], input_shape[1] * 4))(x)
    x = keras.layers.GaussianNoise(0.5)(x)
    x = keras.layers.LSTM(6, return_sequences=True, dropout=0.3, recurrent_dropout=0.3)(x)
    x = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, dropout=0.3)(x, x)
    x = Jitter()(x)
    x = keras.layers.Dropout(0.4)(keras.layers.Flatten()(x))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))


def own_seeds(input_shape, n_outputs, seeds):
    """A builder that seeds its initialisers itself from the run's `seeds`, as a team may prefer."""
    inputs = keras.Input(input_shape)
    initializer = keras.initializers.GlorotUniform(seeds.init)
    output = keras.layers.Dense(n_outputs, activation="softmax", kernel_initializer=initializer)
    return keras.Model(inputs, output(keras.layers.Flatten()(inputs)))


def still(input_shape, n_outputs, rate=0.0):
    """Generators that draw only where `rate` > 0 (Keras makes an LSTM's whatever its dropout)."""
    inputs = keras.Input(input_shape)
    x = keras.layers.LSTM(3, dropout=rate)(keras.layers.Reshape((input_shape[0], -1))(inputs))
    x = keras.layers.Dropout(rate)(x)
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))


class RandomColorAffine(keras.layers.Layer):
    """keras-io's augmentation layer (semi-supervised contrastive learning), its own generator seeded 1337:
    brightness and a colour jitter drawn per image, here for any number of channels."""

    def __init__(self, brightness=0.5, jitter=0.2, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(1337)
        self.brightness, self.jitter = brightness, jitter

    def call(self, images, training=True):
        if not training:
            return images
        n, channels = keras.ops.shape(images)[0], images.shape[-1]
        scale = 1 + keras.random.uniform((n, 1, 1, 1), -self.brightness, self.brightness, seed=self.seed_generator)
        jitter = keras.random.uniform((n, 1, channels, channels), -self.jitter, self.jitter, seed=self.seed_generator)
        return keras.ops.clip(keras.ops.matmul(images, keras.ops.eye(channels) * scale + jitter), 0, 1)


def color_augmented(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    x = keras.layers.Flatten()(RandomColorAffine()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(keras.layers.Dropout(0.3)(x)))


def unseeded(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    x = Unseeded()(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))
'''
SHAPE = (6, 6, 1)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project root holding a team's module `seeding_zoo` (imported from the root, as a builder is)."""
    root = tmp_path_factory.mktemp("zoo")
    (root / "seeding_zoo.py").write_text(ZOO)
    return root


def build(root: Path, builder: str = "everything", kwargs: dict | None = None, **seeds: int):
    import numpy as np

    from tracking.config.params import Params
    from tracking.determinism.process import seed_frameworks
    from tracking.determinism.seeds import resolve_seeds
    from tracking.training.model import BuildInputs, build_model

    params = Params.model_validate(
        {
            "model": {"builder": f"seeding_zoo:{builder}", "kwargs": kwargs or {}},
            "seeds": {"base": 5, "init": 11, "dropout": 22, "augment": 33, **seeds},
        }
    )
    resolved = resolve_seeds(params.seeds)
    seed_frameworks(params, resolved)
    train = {"x": np.zeros((4, *SHAPE), "float32"), "y": np.arange(4) % 3}
    return build_model(params, resolved, BuildInputs(train, 3, None, root))


def digest(*arrays) -> str:
    hashed = hashlib.sha256()
    for array in arrays:
        hashed.update(np.ascontiguousarray(np.asarray(array, dtype=np.float32)).tobytes())
    return hashed.hexdigest()


def streams(built) -> dict[str, str]:
    """Each stream's draws, taken from the layers themselves on fixed inputs in training mode."""
    import keras

    layers = {type(layer).__name__: layer for layer in built.model._flatten_layers()}
    image = np.linspace(0, 1, 2 * 36, dtype=np.float32).reshape(2, *SHAPE)
    ones = np.ones((2, 6, 6, 4), dtype=np.float32)
    sequence = np.ones((2, 6, 6), dtype=np.float32)
    cell = layers["LSTMCell"]
    dropout = [
        layers["SpatialDropout2D"](ones, training=True),
        layers["GaussianNoise"](sequence, training=True),
        cell.get_dropout_mask(keras.ops.ones((2, 24))),
        cell.get_recurrent_dropout_mask(keras.ops.ones((2, 6))),
        layers["MultiHeadAttention"]._dropout_layer(sequence, training=True),
        layers["Jitter"](sequence, training=True),
        layers["Dropout"](ones, training=True),
    ]
    augment = [layers["RandomFlip"](image, training=True), layers["RandomTranslation"](image, training=True)]
    return {"init": built.initial_weights_sha256, "dropout": digest(*dropout), "augment": digest(*augment)}


@pytest.fixture(scope="module")
def reference(zoo: Path) -> dict[str, str]:
    return streams(build(zoo))


@pytest.mark.parametrize("seed", ["init", "dropout", "augment"])
def test_each_seed_changes_its_own_stream_alone(zoo: Path, reference: dict[str, str], seed: str):
    changed = streams(build(zoo, **{seed: 99}))
    assert changed[seed] != reference[seed], f"seeds.{seed} does not reach its stream"
    others = {name: value for name, value in changed.items() if name != seed}
    assert others == {name: reference[name] for name in others}, f"seeds.{seed} leaks into another stream"


def test_the_same_seeds_rebuild_the_same_model_and_every_generator_is_seeded(zoo: Path, reference: dict[str, str]):
    built = build(zoo)
    assert streams(built) == reference
    # SpatialDropout2D, GaussianNoise, the LSTM cell, MultiHeadAttention's dropout, Jitter, Dropout; flip, translation.
    assert (built.seeding.dropout, built.seeding.augment) == (6, 2)
    assert built.seeding.unattributed == ()


def test_a_builder_taking_seeds_gets_the_run_s_seeds(zoo: Path):
    """`seeds` in a builder's signature receives the run's `Seeds`: its own initialiser follows `seeds.init`."""
    first, again, other = build(zoo, "own_seeds"), build(zoo, "own_seeds"), build(zoo, "own_seeds", init=99)
    assert first.initial_weights_sha256 == again.initial_weights_sha256 != other.initial_weights_sha256
    assert first.seeding.unattributed == ()


def test_randomness_without_a_generator_is_named_and_warned_about(zoo: Path, caplog: pytest.LogCaptureFixture):
    import tracking.determinism.unattributed

    tracking.determinism.unattributed._warned = False
    built = build(zoo, "unseeded")
    found = built.seeding.unattributed
    assert len(found) == 2, found
    assert "keras.random without a SeedGenerator" in found[0] and "unseeded" in found[0]
    assert found[1].startswith("tf.random op RandomUniform at ")
    assert [record.message for record in caplog.records if "seeds.base" in record.message]


@pytest.mark.parametrize("rate", [0.0, 0.5])
def test_a_seed_whose_generators_never_drew_in_training_is_recorded_as_unused(zoo: Path, rate: float):
    """An LSTM makes a generator whatever its dropout, so seeding finds one, but with a rate of 0 it never draws:
    after training, `seeds.dropout` is unused (it was recorded as used, though it moved nothing)."""
    from tracking.config.params import Params
    from tracking.determinism.seeds import resolve_seeds
    from tracking.training.fitting import fit_model
    from tracking.training.model import idle_after_fit

    built = build(zoo, "still", {"rate": rate})
    assert built.seeding.dropout, "the LSTM's generator is seeded"
    params = Params.model_validate(
        {"seeds": {"base": 5, "init": 11, "dropout": 22, "augment": 33}, "train": {"epochs": 1}}
    )
    seeds = resolve_seeds(params.seeds)
    train = {"x": np.linspace(0, 1, 8 * 36, dtype="float32").reshape(8, *SHAPE), "y": np.arange(8) % 3}
    built.model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    fit_model(built.model, params, seeds, train, None)
    idle = idle_after_fit(built.model, seeds, params)
    if rate:
        assert idle == {}
    else:
        assert set(idle) == {"dropout"} and idle["dropout"].startswith(
            f"unused: the model's {built.seeding.dropout} generator"
        )


def test_a_custom_augmentation_layer_follows_seeds_augment_and_the_record_names_each_streams_layers(zoo: Path):
    """keras-io's RandomColorAffine holds its own generator: it is augmentation (it followed `seeds.dropout` while
    `seeds.augment` was recorded "unused: the model has no augmentation layer"), and the record says which layers
    each stream seeds."""
    image = np.linspace(0, 1, 2 * 36, dtype=np.float32).reshape(2, *SHAPE)

    def drawn(built) -> str:
        (layer,) = [layer for layer in built.model.layers if type(layer).__name__ == "RandomColorAffine"]
        return digest(layer(image, training=True))

    first = build(zoo, "color_augmented")
    assert (first.seeding.augment, first.seeding.dropout) == (1, 1)
    assert first.seeding.unused() == {}
    record = first.seeding.as_record()
    assert record["seeded_augment_layers"] == "RandomColorAffine: 1"
    assert record["seeded_dropout_layers"] == "Dropout: 1"
    assert drawn(build(zoo, "color_augmented")) == drawn(first) == drawn(build(zoo, "color_augmented", dropout=99))
    assert drawn(build(zoo, "color_augmented", augment=99)) != drawn(first)


def test_a_depthwise_kernel_a_script_seeds_follows_seeds_init():
    """`run.seeded` finds a DepthwiseConv2D's `kernel` initializer by Keras's naming (`depthwise_initializer`): the
    kernel follows `seeds.init`, and is no longer named as randomness only `seeds.base` covers."""
    import keras

    from tracking.determinism.seeding import reseed
    from tracking.determinism.seeds import Seeds
    from tracking.script.initial_weights import created_weights

    def kernel(init: int) -> np.ndarray:
        inputs = keras.Input(SHAPE)
        model = keras.Model(inputs, keras.layers.DepthwiseConv2D(3, padding="same")(inputs))
        seeded, _, unattributed = reseed(model, created_weights(model), Seeds(5, init, 6, 7, 8, 9))
        assert (seeded, unattributed) == (1, [])
        return model.layers[-1].kernel.numpy()

    assert np.array_equal(kernel(11), kernel(11)) and not np.array_equal(kernel(11), kernel(12))
