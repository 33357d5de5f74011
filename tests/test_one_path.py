"""One way to train and score: the train stage's model (saved, reloaded, scored as evaluate scores it) and a
calibration repeat's (scored in memory) give the same numbers, on models that draw at inference and that output
logits; a model that would fail after training fails before it, in one line."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from tracking.config.params import Params
from tracking.data.dataset import load_source
from tracking.determinism.process import seed_frameworks
from tracking.determinism.seeds import resolve_seeds
from tracking.errors import UserCodeError
from tracking.training.fitting import fit_model
from tracking.training.model import BuildInputs, load_trained_model, prepare_model
from tracking.training.repeat import train_and_score
from tracking.training.scoring import declared_output_kind, score_model
from tracking.training.task_scores import flat_metrics, summary_metrics

# A team's module: a layer that draws at inference with its own generator (a VAE's sampling, Monte Carlo dropout),
# a logits head, and the custom-fit mistakes keras-io readers make.
TEAM = '''
import keras
import numpy as np


class Jitter(keras.layers.Layer):
    """Adds noise at inference too, from a generator of its own."""

    def __init__(self, scale=0.05, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale
        self.seed_generator = keras.random.SeedGenerator(1)

    def call(self, x):
        return x + self.scale * keras.random.normal(keras.ops.shape(x), seed=self.seed_generator)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


class Forgetful(keras.layers.Layer):
    """Takes an argument its config drops: it cannot be re-created."""

    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return super().get_config()


class Projected(keras.layers.Layer):
    """Takes an array, which Keras cannot put in a config, and has no get_config: it cannot be saved."""

    def __init__(self, weights_by_unit, **kwargs):
        super().__init__(**kwargs)
        self.weights_by_unit = weights_by_unit

    def call(self, x):
        return x * self.weights_by_unit


class XOnly(keras.Model):
    """keras-io's unsupervised `train_step`, which expects `x` alone."""

    def train_step(self, data):
        x = data
        with __import__("tensorflow").GradientTape() as tape:
            loss = keras.ops.mean(self(x, training=True) ** 2)
        self.optimizer.apply(tape.gradient(loss, self.trainable_weights), self.trainable_weights)
        return {"loss": loss}


class Tracked(keras.Model):
    """keras-io's `train_step` with its own metric trackers, and no `test_step`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name="own_loss")

    @property
    def metrics(self):
        return [self.loss_tracker]

    def train_step(self, data):
        x, y = data
        with __import__("tensorflow").GradientTape() as tape:
            loss = keras.losses.sparse_categorical_crossentropy(y, self(x, training=True))
        self.optimizer.apply(tape.gradient(loss, self.trainable_weights), self.trainable_weights)
        self.loss_tracker.update_state(loss)
        return {"own_loss": self.loss_tracker.result()}


def _body(input_shape, n_outputs, activation):
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(12, activation="relu")(keras.layers.Flatten()(inputs))
    x = keras.layers.Dropout(0.2)(Jitter()(x))
    return inputs, keras.layers.Dense(n_outputs, activation=activation)(x)


def jitter(input_shape, n_outputs):
    return keras.Model(*_body(input_shape, n_outputs, "softmax"))


def logits(input_shape, n_outputs):
    return keras.Model(*_body(input_shape, n_outputs, None))


def forgetful(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    x = Forgetful(2.0)(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))


def projected(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    x = Projected(np.ones(64, "float32"))(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))


def approximate_gelu(input_shape, n_outputs):
    """keras-io CCT's MLP: `keras.ops.gelu` is saved as 'gelu' and reloaded as the exact GELU."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(12, activation=keras.ops.gelu)(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))


def x_only(input_shape, n_outputs):
    return XOnly(*_body(input_shape, n_outputs, "softmax"))


def tracked(input_shape, n_outputs):
    return Tracked(*_body(input_shape, n_outputs, "softmax"))


def adapted(input_shape, n_outputs, train):
    norm = keras.layers.Normalization(axis=None)
    norm.adapt(train["x"])
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(8, activation="relu")(keras.layers.Flatten()(norm(inputs)))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))


logits_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def smoothed_logits(y_true, y_pred):
    """keras-io CCT's loss as a team writes it for integer labels: a function, not a Loss object."""
    labels = keras.ops.one_hot(keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32"), 10)
    return keras.losses.categorical_crossentropy(labels, y_pred, from_logits=True, label_smoothing=0.1)


def smoothed_probabilities(y_true, y_pred):
    labels = keras.ops.one_hot(keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32"), 10)
    return keras.losses.categorical_crossentropy(labels, y_pred, label_smoothing=0.1)
'''


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("team")
    (root / "team_one_path.py").write_text(TEAM)
    return root


@pytest.fixture(scope="module")
def splits() -> dict[str, dict[str, np.ndarray]]:
    source = load_source("sklearn:digits")
    x, y = source.x[:400], source.y[:400]
    return {
        "train": {"x": x[:240], "y": y[:240]},
        "val": {"x": x[240:300], "y": y[240:300]},
        "test": {"x": x[300:], "y": y[300:]},
    }


def params_for(builder: str, loss: str | None = None, **seeds: int) -> Params:
    return Params.model_validate(
        {
            "model": {"builder": f"team_one_path:{builder}", "kwargs": {}},
            "train": {"epochs": 2, "batch_size": 32, "loss": loss},
            "seeds": {"base": 5, **seeds},
        }
    )


def prepared(params: Params, root: Path, splits: dict):
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    return prepare_model(params, seeds, BuildInputs(splits["train"], 10, None, root)), seeds


@pytest.mark.parametrize(("builder", "loss"), [("jitter", None), ("logits", "team_one_path:logits_loss")])
def test_the_candidate_scored_by_evaluate_is_a_control_repeat_bit_for_bit(team, splits, builder, loss, tmp_path):
    """The train stage's path (fit with validation, save; evaluate reloads and scores) and a repeat's (fit with
    validation, score in memory): the same weights, every test metric and every prediction."""
    params = params_for(builder, loss)
    built, seeds = prepared(params, team, splits)
    fit_model(built.model, params, seeds, splits["train"], splits["val"])
    built.model.save(tmp_path / "model.keras")
    seed_frameworks(params, seeds)
    reloaded = load_trained_model(tmp_path / "model.keras", params, team)
    candidate = score_model(reloaded, seeds, splits["test"], "classification", 10)

    repeat_built, repeat_seeds = prepared(params, team, splits)
    repeat = train_and_score(repeat_built, params, repeat_seeds, splits, 10, None)
    assert repeat_built.initial_weights_sha256 == built.initial_weights_sha256
    assert flat_metrics(summary_metrics(candidate)) == repeat.metrics
    assert np.array_equal(candidate["predicted"].astype(np.int16), repeat.predicted)
    assert repeat.weights_sha256 == _digest(reloaded)


def _digest(model) -> str:
    from tracking.data.hashing import weights_sha256

    return weights_sha256(model.get_weights())


def test_a_layer_that_draws_at_inference_scores_from_its_seeded_stream(team, splits):
    """Scoring twice draws the same numbers (the generators are set to their inference state first), and another
    `seeds.dropout` draws others."""
    params = params_for("jitter")
    built, seeds = prepared(params, team, splits)
    first = score_model(built.model, seeds, splits["test"], "classification", 10)["outputs"]
    again = score_model(built.model, seeds, splits["test"], "classification", 10)["outputs"]
    other = resolve_seeds(params_for("jitter", dropout=99).seeds)
    moved = score_model(built.model, other, splits["test"], "classification", 10)["outputs"]
    assert np.array_equal(first, again) and not np.array_equal(first, moved)


@pytest.mark.parametrize("loss", ["logits_loss", "smoothed_logits"])
def test_logits_are_scored_as_probabilities_and_recorded(team, splits, loss):
    """A logits head with a loss of logits (a Loss object that says so, or a team's function that calls one): the
    task's cross-entropy is that of the softmax, the test loss is the compiled loss of the outputs, the
    probabilities are probabilities, and provenance says the outputs were logits."""
    params = params_for("logits", f"team_one_path:{loss}")
    built, seeds = prepared(params, team, splits)
    assert built.builder["outputs"] == "logits"
    result = score_model(built.model, seeds, splits["test"], "classification", 10)
    raw = result["outputs"].astype(np.float64)
    softmax = np.exp(raw - raw.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    y = splits["test"]["y"]
    expected = -np.log(np.clip(softmax[np.arange(len(y)), y], 1e-7, 1)).mean()
    assert result["test_crossentropy"] == pytest.approx(expected, rel=1e-6)
    compiled = built.model.loss(y, result["outputs"])  # the compiled loss, recomputed on the scored outputs
    assert result["test_loss"] == pytest.approx(float(np.mean(np.asarray(compiled))), rel=1e-5)
    assert (result["probabilities"] >= 0).all() and np.allclose(result["probabilities"].sum(axis=1), 1, atol=1e-5)
    assert (raw < 0).any()  # the raw outputs were not probabilities


def test_a_softmax_with_a_loss_function_of_probabilities_is_not_taken_for_logits(team, splits):
    built, _ = prepared(params_for("jitter", "team_one_path:smoothed_probabilities"), team, splits)
    assert built.builder["outputs"] == "probabilities"


@pytest.mark.parametrize(
    ("loss", "declared"),
    [
        ("logits-object", "logits"),
        ("probabilities-object", "probabilities"),
        ("named", "probabilities"),
        ("function", None),
    ],
)
def test_what_a_loss_declares_of_the_outputs_without_looking_at_them(loss, declared):
    """What a team's script records as `prov.model.outputs` (it runs no prediction): a loss object's `from_logits`,
    a named loss's probabilities, and nothing for a plain function, which only the outputs can tell."""
    import keras

    losses = {
        "logits-object": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "probabilities-object": keras.losses.SparseCategoricalCrossentropy(),
        "named": "sparse_categorical_crossentropy",
        "function": keras.losses.sparse_categorical_crossentropy,
    }
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(4)])
    model.compile(loss=losses[loss])
    assert declared_output_kind(model) == declared


@pytest.mark.parametrize("loss", [None, "team_one_path:smoothed_probabilities"])
def test_logits_without_a_logits_loss_stop_before_training(team, splits, loss):
    with pytest.raises(UserCodeError) as raised:
        prepared(params_for("logits", loss), team, splits)
    message = str(raised.value)
    assert "\n" not in message and "not probabilities" in message and "from_logits=True" in message


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        ("forgetful", ("cannot be re-created from its config", "TypeError", "get_config")),
        ("projected", ("cannot be saved", "layer 'projected' (Projected)", "get_config")),
        ("approximate_gelu", ("other outputs once saved and reloaded", "first in layer 'dense", "activation")),
        ("x_only", ("training step", "train_step", "x, y = data")),
    ],
)
def test_a_model_that_would_fail_after_training_fails_before_it(team, splits, builder, expected):
    with pytest.raises(UserCodeError) as raised:
        prepared(params_for(builder), team, splits)
    message = str(raised.value)
    assert "\n" not in message and all(text in message for text in expected), message


def test_metrics_left_at_zero_without_a_test_step_are_named(team, splits, caplog):
    with caplog.at_level(logging.WARNING):
        prepared(params_for("tracked"), team, splits)
    (warning,) = [record.getMessage() for record in caplog.records if "test_step" in record.getMessage()]
    assert "own_loss" in warning and "read exactly 0.0" in warning


def test_a_builder_that_declares_train_adapts_to_it_read_only(team, splits):
    """The basic-regression pattern: `Normalization.adapt` on the training split; the adapted state is in the
    initial weights' hash, and the split cannot be written through."""
    params = params_for("adapted")
    built, _ = prepared(params, team, splits)
    norm = next(layer for layer in built.model.layers if type(layer).__name__ == "Normalization")
    assert float(np.asarray(norm.mean).ravel()[0]) == pytest.approx(float(splits["train"]["x"].mean()), rel=1e-4)
    shifted = {**splits, "train": {"x": splits["train"]["x"] + 1.0, "y": splits["train"]["y"]}}
    other, _ = prepared(params, team, shifted)
    assert other.initial_weights_sha256 != built.initial_weights_sha256
    view = BuildInputs(splits["train"], 10, None, team).read_only_train()
    with pytest.raises(ValueError):
        view["x"][0] = 0
