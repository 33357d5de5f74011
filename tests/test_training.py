"""Real Keras training on a tiny slice of the digits: seeds vary one source each, runs are bit-identical."""

import functools
import operator
from pathlib import Path

import numpy as np
import pytest
from conftest import TEMPLATE_BUILDER

from tracking.config.params import Params
from tracking.data.dataset import load_source
from tracking.data.hashing import weights_sha256
from tracking.determinism.process import seed_frameworks
from tracking.determinism.seeds import resolve_seeds
from tracking.training.batches import epoch_batches
from tracking.training.fitting import train_model
from tracking.training.model import BuildInputs, build_model

TINY = {
    "model": {
        "builder": TEMPLATE_BUILDER,
        "kwargs": {"filters": [4, 4, 4], "dense_units": 8, "dropout": 0.3, "augment": True},
    },
    "train": {"epochs": 2, "batch_size": 64},
}


# Eight digits, for the tests that only build: builders see their shapes (and the data, if they ask for it).
DIGITS8 = {"x": np.zeros((8, 8, 8, 1), "float32"), "y": np.arange(8) % 10}


def inputs(data, root: Path = Path(".")) -> BuildInputs:
    """What a ten-class model of `data` is built for."""
    return BuildInputs(data, 10, None, root)


def params_with(**seeds) -> Params:
    return Params.model_validate({**TINY, "seeds": {"base": 3, **seeds}})


@pytest.fixture(scope="module")
def digits():
    source = load_source("sklearn:digits")
    return {"x": source.x[:300], "y": source.y[:300]}


def initial_weights(params: Params) -> str:
    seeds = resolve_seeds(params.seeds)
    return build_model(params, seeds, inputs(DIGITS8)).initial_weights_sha256


def trained_weights(params: Params, data) -> str:
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    model, _ = train_model(params, seeds, inputs(data), None)
    return weights_sha256(model.get_weights())


def test_dropout_seed_leaves_initial_weights_identical():
    assert initial_weights(params_with(dropout=1)) == initial_weights(params_with(dropout=2))
    assert initial_weights(params_with(augment=1)) == initial_weights(params_with(augment=2))
    assert initial_weights(params_with(init=1)) != initial_weights(params_with(init=2))


def test_shuffle_order_depends_on_its_seed_alone():
    x, y = np.arange(10, dtype="float32")[:, None], np.arange(10)

    def order(seed):
        return [batch.numpy().ravel().tolist() for batch, _ in epoch_batches(x, y, 4, 2, seed)]

    assert order(5) == order(5)
    assert order(5) != order(6)
    assert sorted(functools.reduce(operator.iadd, order(5)[:3], [])) == list(range(10))


def test_op_determinism_is_read_back_from_tensorflow():
    effective = seed_frameworks(params_with(), resolve_seeds(params_with().seeds))
    assert effective.op_determinism is True
    assert effective.onednn is False


def test_training_twice_is_bit_identical_and_each_seed_matters(digits):
    baseline = trained_weights(params_with(), digits)
    assert trained_weights(params_with(), digits) == baseline
    assert trained_weights(params_with(dropout=777), digits) != baseline
    assert trained_weights(params_with(shuffle=777), digits) != baseline


TEAM = """\
import keras


class Scale(keras.layers.Layer):
    def call(self, x):
        return 0.5 * x


def build(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    hidden = Scale()(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(hidden))


def smooth_loss(y_true, y_pred):
    return keras.losses.sparse_categorical_crossentropy(y_true, y_pred) + 0.1 * keras.ops.mean(y_pred ** 2, axis=-1)
"""


def test_a_model_with_a_team_s_layer_and_loss_reloads_with_custom_objects(tmp_path, digits):
    """What the evaluate stage does with `custom_objects(params, root)`: the saved model reloads and predicts the same."""
    import keras

    from tracking.training.compiling import custom_objects
    from tracking.training.model import prepare_model

    (tmp_path / "team_code.py").write_text(TEAM)
    params = Params.model_validate(
        {
            "model": {"builder": "team_code:build", "kwargs": {}},
            "train": {"epochs": 1, "batch_size": 64, "loss": "team_code:smooth_loss"},
        }
    )
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    model = prepare_model(params, seeds, inputs(digits, tmp_path)).model
    model.fit(digits["x"][:128], digits["y"][:128], epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    found = custom_objects(params, tmp_path)
    assert set(found) == {"Scale", "smooth_loss"}
    reloaded = keras.models.load_model(tmp_path / "model.keras", custom_objects=found)
    np.testing.assert_array_equal(
        reloaded.predict(digits["x"][:8], verbose=0), model.predict(digits["x"][:8], verbose=0)
    )
    assert reloaded.loss.__name__ == "smooth_loss"


def test_a_repeated_model_trains_as_a_fresh_build_does(digits):
    """What calibrate does per repeat: the model reused, reset and re-seeded, gives the weights, initial and
    trained, that a fresh build gives for each seed; op determinism off builds a new model (kernels change)."""
    from tracking.training.fitting import fit_model
    from tracking.training.model import RepeatedModel, prepare_model

    params = Params.model_validate(
        {
            **TINY,
            "model": {**TINY["model"], "kwargs": {**TINY["model"]["kwargs"], "batch_norm": True}},
            "seeds": {"base": 3},
        }
    )
    models = RepeatedModel(inputs(digits))

    def train(built, seeds) -> tuple[str, str]:
        fit_model(built.model, params, seeds, digits, None)
        return built.initial_weights_sha256, weights_sha256(built.model.get_weights())

    reused, fresh = [], []
    for base in (3, 4, 3):
        seeds = resolve_seeds(params.seeds.model_copy(update={"base": base}))
        seed_frameworks(params, seeds)
        reused.append(train(models.prepare(params, seeds), seeds))
        seed_frameworks(params, seeds)
        fresh.append(train(prepare_model(params, seeds, inputs(digits)), seeds))
    assert reused == fresh
    assert reused[0] == reused[2] != reused[1]
    first = models.prepare(params, seeds).model
    assert models.prepare(params, seeds).model is first
    changed = params.model_copy(update={"determinism": params.determinism.model_copy(update={"op_determinism": False})})
    assert models.prepare(changed, seeds).model is not first


@pytest.mark.parametrize("samples", [256, 300, 220])
def test_steps_per_call_trains_what_one_step_per_call_trains(digits, samples, monkeypatch):
    """Keras running several steps per call gives the weights one step per call gives, whatever the epoch's
    step count: 8 (a multiple of the most per call), 10 (a divisor, 5, is used) and 11 (a prime: one per call)."""
    from tracking.training import fitting

    data = {"x": digits["x"][:samples], "y": digits["y"][:samples]}
    params = Params.model_validate({**TINY, "train": {"epochs": 3, "batch_size": 32 if samples != 300 else 30}})
    assert fitting.steps_per_call(8) == 8 and fitting.steps_per_call(10) == 5 and fitting.steps_per_call(11) == 1
    several = trained_weights(params, data)
    monkeypatch.setattr(fitting, "STEPS_PER_CALL", 1)
    assert trained_weights(params, data) == several


SHAPED = """
import keras


def gru(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(keras.layers.GRU(4)(inputs)))


def text(input_shape, n_outputs, train):
    vectorize = keras.layers.TextVectorization(max_tokens=20, output_sequence_length=4)
    vectorize.adapt(train["x"])
    inputs = keras.Input(input_shape, dtype="string")
    hidden = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(20, 4)(vectorize(inputs)))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(hidden))


class Hits(keras.metrics.Metric):  # correct predictions counted: a metric class of the team's own, not registered
    def __init__(self, name="hits", **kwargs):
        super().__init__(name=name, **kwargs)
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        right = keras.ops.equal(keras.ops.argmax(y_pred, axis=-1), keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int64"))
        self.count.assign_add(keras.ops.sum(keras.ops.cast(right, "float32")))

    def result(self):
        return self.count


def top_probability(y_true, y_pred):
    return keras.ops.max(y_pred, axis=-1)


@keras.saving.register_keras_serializable(package="team")
class Sharpness(keras.metrics.MeanMetricWrapper):
    def __init__(self, name="sharpness", **kwargs):
        super().__init__(top_probability, name=name, **kwargs)


class Smoothed(keras.losses.Loss):
    def call(self, y_true, y_pred):
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred) + 0.1 * keras.ops.mean(y_pred**2, axis=-1)


class Margin(keras.losses.Loss):
    def __init__(self, margin):
        super().__init__()


def halved(x):
    return x / 2


def with_lambda(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    hidden = keras.layers.Lambda(halved)(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(hidden))


def named(input_shape, n_outputs):
    title = keras.Input(input_shape["title"], name="title")
    tags = keras.Input(input_shape["tags"], name="tags")
    words = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(10, 4)(title))
    hidden = keras.layers.Dropout(0.5)(keras.layers.concatenate([words, tags]))
    output = keras.layers.Dense(n_outputs, activation="softmax")(hidden)
    return keras.Model({"title": title, "tags": tags}, output)
"""


@pytest.mark.parametrize(
    ("builder", "x"),
    [
        ("gru", np.linspace(0, 1, 32 * 12 * 2, dtype="float32").reshape(32, 12, 2)),
        ("text", np.array(["a cat sat", "the dog ran", "a bird sang", "one fish"] * 8)),
        (
            "named",
            {"title": np.arange(32 * 3).reshape(32, 3) % 10, "tags": np.eye(4, dtype="float32")[np.arange(32) % 4]},
        ),
    ],
)
def test_a_model_takes_the_features_as_the_loader_gave_them(tmp_path, builder, x):
    """Sequences of rank 3 reach a GRU as (steps, features), raw text reaches TextVectorization and a dict reaches
    the inputs it names: the model is built for the shapes the loader returned, checked (every random draw
    attributed to a seed), trained and scored with nothing reshaped or re-typed."""
    from tracking.training.fitting import fit_model
    from tracking.training.model import prepare_model
    from tracking.training.scoring import score_model

    (tmp_path / "shaped.py").write_text(SHAPED)
    data = {"x": x, "y": np.arange(32) % 2}
    params = Params.model_validate({"model": {"builder": f"shaped:{builder}"}, "train": {"epochs": 1}})
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    built = prepare_model(params, seeds, BuildInputs(data, 2, None, tmp_path))
    model = built.model
    assert not built.seeding.unattributed
    expected = {key: value.shape[1:] for key, value in x.items()} if isinstance(x, dict) else {"": x.shape[1:]}
    assert sorted(tuple(tensor.shape[1:]) for tensor in model.inputs) == sorted(expected.values())
    fit_model(model, params, seeds, data, None)
    result = score_model(model, seeds, data, "classification", 2)
    assert result["outputs"].shape == (32, 2) and 0 <= result["test_accuracy"] <= 1


TWO_OUTPUTS = """
import keras


def build(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    return keras.Model(inputs, {
        "priority": keras.layers.Dense(1, name="priority")(inputs),
        "department": keras.layers.Dense(3, name="department")(inputs),
    })
"""


@pytest.mark.parametrize(
    ("y", "train", "expected"),
    [
        (
            {"priority": np.zeros((8, 1)), "dept": np.zeros((8, 3))},
            {"loss": "mse"},
            "returned a model with outputs department, priority but the data's y has targets dept, priority",
        ),
        (np.zeros((8, 3)), {"loss": "mse"}, "returned a model with 2 outputs (department, priority) but the data's y"),
        (
            {"priority": np.zeros((8, 1)), "department": np.zeros((8, 3))},
            {},
            "train.loss: null, but the model has 2 outputs (department, priority)",
        ),
        (
            {"priority": np.zeros((8, 1)), "department": np.zeros((8, 3))},
            {"loss": {"priorty": "mse"}},
            "train.loss: a mapping keyed by the model's output names (department, priority), got 'priorty'",
        ),
    ],
)
def test_a_model_of_several_outputs_names_its_targets_and_losses(tmp_path, y, train, expected):
    """Targets keyed by the model's output names, a loss per output: a mismatch is one line naming both sides."""
    from tracking.errors import TrackingError
    from tracking.training.model import prepare_model

    (tmp_path / "two_outputs.py").write_text(TWO_OUTPUTS)
    data = {"x": np.zeros((8, 5), "float32"), "y": y}
    params = Params.model_validate({"model": {"builder": "two_outputs:build"}, "train": {"epochs": 1, **train}})
    seeds = resolve_seeds(params.seeds)
    several = isinstance(y, dict)
    shapes = {name: array.shape[1:] for name, array in y.items()} if several else None
    outputs = {name: int(np.prod(shape)) for name, shape in shapes.items()} if several else 2
    with pytest.raises(TrackingError) as raised:
        prepare_model(params, seeds, BuildInputs(data, outputs, shapes, tmp_path))
    assert expected in str(raised.value)


def test_small_cnn_gives_two_dimensional_images_their_channel_axis_itself():
    """The built-in CNN takes (height, width) images through a Reshape layer of its own: the data stays as given."""
    from pipelines.models import small_cnn

    model = small_cnn((8, 8), 4, filters=(2, 2, 2), dense_units=4)
    assert type(model.layers[0]).__name__ == "Reshape" and tuple(model.inputs[0].shape[1:]) == (8, 8)
    assert type(small_cnn((8, 8, 1), 4).layers[0]).__name__ == "Conv2D"
    with pytest.raises(ValueError, match=r"small_cnn takes images of shape \(height, width\)"):
        small_cnn((4, 4, 4, 1), 4)


def test_a_table_with_the_default_model_is_told_to_use_mlp():
    """Issue 67: 13 features with the template's small_cnn said `fix model.kwargs`; the fix is the `mlp` builder."""
    from tracking import TrackingError

    table = {"x": np.zeros((8, 13), "float32"), "y": np.arange(8) % 2}
    with pytest.raises(TrackingError) as raised:
        build_model(params_with(), resolve_seeds(params_with().seeds), inputs(table))
    said = str(raised.value)
    assert "13 features" in said and "set `model.builder: pipelines.models:mlp` in params.yaml" in said
    assert "model.kwargs" not in said


@pytest.mark.parametrize("loss", [None, "team_code:smooth_loss"])
def test_test_loss_is_the_loss_the_model_was_compiled_with(tmp_path, digits, loss):
    """`test_loss` is what `model.evaluate` reports for the compiled loss: computed from the probabilities where
    that is the task's cross-entropy (equal to float32 rounding), evaluate's own value for a team's loss, with the
    cross-entropy beside it as `test_crossentropy`."""
    from tracking.training.model import prepare_model
    from tracking.training.scoring import score_model

    (tmp_path / "team_code.py").write_text(TEAM)
    params = Params.model_validate({**TINY, "train": {"epochs": 1, "loss": loss}})
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    model = prepare_model(params, seeds, inputs(digits, tmp_path)).model
    test = {"x": digits["x"][:100], "y": digits["y"][:100]}
    result = score_model(model, seeds, test, "classification", 10)
    evaluated = model.evaluate(test["x"], test["y"], batch_size=100, verbose=0, return_dict=True)["loss"]
    picked = np.clip(model.predict(test["x"], verbose=0)[np.arange(100), test["y"]], 1e-7, 1)
    crossentropy = float(-np.log(picked.astype(np.float64)).mean())
    assert result["test_loss"] == pytest.approx(evaluated, rel=1e-5)
    if loss is None:
        assert "test_crossentropy" not in result and result["test_loss"] == pytest.approx(crossentropy, rel=1e-5)
    else:
        assert result["test_crossentropy"] == pytest.approx(crossentropy, rel=1e-5)
        assert abs(result["test_loss"] - crossentropy) > 1e-3


@pytest.mark.parametrize(
    ("evaluated", "test_loss"),
    [(0.5 * (1 + 1e-6), "ours"), (0.5 + 2e-4, "evaluated"), (43.7, "evaluated"), (float("nan"), "evaluated")],
)
def test_a_task_loss_evaluate_reports_otherwise_is_test_loss_with_the_crossentropy_beside_it(evaluated, test_loss):
    """Compiled with the task's own loss, `test_loss` is the cross-entropy computed here where `evaluate` reports the
    same loss (float32 rounding apart); where it reports more (a VAE's `test_step` adding its reconstruction and KL
    terms, a regularized layer) or NaN, `test_loss` is evaluate's and the cross-entropy is `test_crossentropy`."""
    from tracking.training.scoring import scores

    y = np.array([0, 1])
    outputs = np.array([[np.exp(-0.5), 1 - np.exp(-0.5)], [1 - np.exp(-0.5), np.exp(-0.5)]])  # CE: 0.5 exactly
    result = scores(y, outputs, "classification", 2, compiled={"loss": evaluated}, task_loss_compiled=True)
    if test_loss == "ours":
        assert result["test_loss"] == pytest.approx(0.5, rel=1e-12) and "test_crossentropy" not in result
    else:
        assert result["test_crossentropy"] == pytest.approx(0.5, rel=1e-12)
        assert result["test_loss"] == evaluated or (np.isnan(evaluated) and np.isnan(result["test_loss"]))


def test_loss_and_metric_classes_of_the_team_s_own_compile_as_keras_takes_them(tmp_path):
    """`train.loss` and `train.metrics` name a team's Loss or Metric subclass ("module:Class", registered or
    not, or by its registered name): compiled as fresh instances, trained, and scored under their names."""
    from tracking.training.fitting import fit_model
    from tracking.training.model import prepare_model
    from tracking.training.scoring import score_model

    (tmp_path / "shaped.py").write_text(SHAPED)
    data = {"x": np.linspace(0, 1, 32 * 12 * 2, dtype="float32").reshape(32, 12, 2), "y": np.arange(32) % 2}
    train = {"epochs": 1, "loss": "shaped:Smoothed", "metrics": ["accuracy", "shaped:Hits", "team>Sharpness"]}
    params = Params.model_validate({"model": {"builder": "shaped:gru"}, "train": train})
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    model = prepare_model(params, seeds, BuildInputs(data, 2, None, tmp_path)).model
    history = fit_model(model, params, seeds, data, None)
    assert {"loss", "accuracy", "hits", "sharpness"} <= set(history)
    result = score_model(model, seeds, data, "classification", 2)
    evaluated = model.evaluate(data["x"], data["y"], batch_size=32, verbose=0, return_dict=True)
    assert result["compiled"]["test_hits"] == evaluated["hits"] == result["test_accuracy"] * 32
    assert result["test_loss"] == pytest.approx(evaluated["loss"], rel=1e-6) and "test_crossentropy" in result


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ({"loss": "shaped:Margin"}, "train.loss: 'shaped:Margin' cannot be made without arguments"),
        (
            {"metrics": ["shaped:Smoothed"]},
            "train.metrics: 'shaped:Smoothed' is a class but not a keras.metrics.Metric",
        ),
        ({"metrics": ["team>Unknown"]}, "train.metrics: no Keras object is registered as 'team>Unknown'"),
    ],
)
def test_a_team_s_loss_or_metric_that_compile_cannot_take_is_one_line(tmp_path, train, message):
    from tracking.errors import UserCodeError
    from tracking.training.compiling import compile_model
    from tracking.training.model import build_model

    (tmp_path / "shaped.py").write_text(SHAPED)
    params = Params.model_validate({"model": {"builder": "shaped:gru"}, "train": train})
    data = {"x": np.zeros((4, 12, 2), "float32"), "y": np.arange(4) % 2}
    built = build_model(params, resolve_seeds(params.seeds), BuildInputs(data, 2, None, tmp_path))
    with pytest.raises(UserCodeError, match=message):
        compile_model(built.model, params, tmp_path)


def test_a_rank_the_builder_did_not_expect_names_the_shape_it_was_given(tmp_path):
    """A GRU built on a 4-D image array fails in the builder: the line names the input_shape the data gave."""
    from tracking.errors import UserCodeError

    (tmp_path / "shaped.py").write_text(SHAPED)
    params = Params.model_validate({"model": {"builder": "shaped:gru"}})
    data = {"x": np.zeros((4, 8, 8, 1), "float32"), "y": np.arange(4) % 2}
    with pytest.raises(UserCodeError, match=r"expected ndim=3, found ndim=4.*it was given input_shape \(8, 8, 1\)"):
        build_model(params, resolve_seeds(params.seeds), BuildInputs(data, 2, None, tmp_path))


def test_a_lambda_over_an_unregistered_function_is_told_to_register_it(tmp_path):
    """keras-io's Siamese network wraps a named function in a Lambda: the saved model finds it by name only once it
    is registered, and the line says so rather than asking for a get_config."""
    from tracking.errors import UserCodeError
    from tracking.training.model import prepare_model

    (tmp_path / "shaped.py").write_text(SHAPED)
    params = Params.model_validate({"model": {"builder": "shaped:with_lambda"}})
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    data = {"x": np.zeros((8, 3), "float32"), "y": np.arange(8) % 2}
    with pytest.raises(UserCodeError, match=r"decorate 'halved' in its module with @keras.saving.register_keras_se"):
        prepare_model(params, seeds, BuildInputs(data, 2, None, tmp_path))


def test_sample_weights_reach_the_fit(digits):
    """The data's sample_weight is what fit weights each sample's loss by: class weights train other weights than
    none, and the same weights train the same weights twice."""
    params = Params.model_validate({**TINY, "train": {"epochs": 1, "batch_size": 64}})
    data = {"x": digits["x"][:128], "y": digits["y"][:128]}
    weighted = {**data, "sample_weight": np.where(data["y"] == 3, 10.0, 1.0).astype("float32")}
    once = trained_weights(params, weighted)
    assert trained_weights(params, weighted) == once != trained_weights(params, data)
