"""Class weights and augmentation in the training input pipeline: every path that trains (the train stage's fit,
a calibration or candidate repeat; the audit's traced steps are checked against fit in tests/test_audit.py) takes
them, the same seeds give the same batches and weights, and `seeds.augment` moves the augmentation alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TEMPLATE_BUILDER

from tracking.config.model_checks import check_class_weight
from tracking.config.params import Params
from tracking.config.params_file import load_params
from tracking.data.dataset import load_source
from tracking.data.hashing import weights_sha256
from tracking.determinism.process import seed_frameworks
from tracking.determinism.seeds import resolve_seeds
from tracking.errors import ParamsError, UserCodeError
from tracking.training.augment import step_seed
from tracking.training.batches import epoch_batches
from tracking.training.fitting import train_model
from tracking.training.model import BuildInputs, prepare_model
from tracking.training.repeat import train_and_score
from tracking.training.weighting import training_weights

# keras-io's `dataset.map(augment)` written with TensorFlow's stateless random ops (tensorflow.org's data
# augmentation tutorial, "tf.image.stateless_random*"), and a function that forgets to return the labels.
AUGMENTS = """
import tensorflow as tf


def flip_and_jitter(x, y, seed):
    x = tf.image.stateless_random_flip_left_right(x, seed)
    return x + tf.random.stateless_normal(tf.shape(x), seed, stddev=0.1, dtype=x.dtype), y


def images_only(x, y, seed):
    return tf.image.stateless_random_flip_left_right(x, seed)
"""
TINY = {
    "model": {"builder": TEMPLATE_BUILDER, "kwargs": {"filters": [4, 4, 4], "dense_units": 8}},
    "train": {"epochs": 1, "batch_size": 64},
}


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("team")
    (root / "team_augments.py").write_text(AUGMENTS)
    return root


@pytest.fixture(scope="module")
def splits() -> dict[str, dict[str, np.ndarray]]:
    source = load_source("sklearn:digits")
    return {
        "train": {"x": source.x[:128], "y": source.y[:128]},
        "test": {"x": source.x[128:192], "y": source.y[128:192]},
    }


def params_with(train: dict | None = None, **seeds: int) -> Params:
    return Params.model_validate({**TINY, "train": {**TINY["train"], **(train or {})}, "seeds": {"base": 3, **seeds}})


def trained(params: Params, data: dict, root: Path) -> str:
    """The weights' hash of the train stage's fit (`train_model` runs its `fit_model`) of `params` on `data`."""
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    model, _ = train_model(params, seeds, BuildInputs(data, 10, None, root), None)
    return weights_sha256(model.get_weights())


def repeat(params: Params, splits: dict, root: Path) -> str:
    """The weights' hash of a calibration or candidate repeat (local and on Ray: `train_and_score`)."""
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    built = prepare_model(params, seeds, BuildInputs(splits["train"], 10, None, root))
    return train_and_score(built, params, seeds, splits, 10, None, root=root).weights_sha256


def test_class_weights_multiply_sample_weights_and_balanced_is_sklearns_rule():
    y = np.array([0, 0, 0, 1, 2, 2])
    given = params_with({"class_weight": {1: 4.0, 2: 0.5}})
    assert training_weights(given.train, {"y": y}).tolist() == [1, 1, 1, 4, 0.5, 0.5]
    both = training_weights(given.train, {"y": y, "sample_weight": np.full(6, 2.0)})
    assert both.dtype == np.float32 and both.tolist() == [2, 2, 2, 8, 1, 1]
    balanced = training_weights(params_with({"class_weight": "balanced"}).train, {"y": y})
    assert np.allclose(balanced, 6 / (3 * np.bincount(y)[y]))  # sklearn's compute_class_weight("balanced")
    assert training_weights(params_with().train, {"y": y}) is None


def test_class_weight_is_validated_and_logged_as_a_param_that_rerun_writes_back(tmp_path: Path):
    from tracking.inspect.restore import write_logged_params
    from tracking.yaml_text import param_text

    params = params_with({"class_weight": {1: 5}, "augment": "team_augments:flip_and_jitter"})
    assert params.train.class_weight == {1: 5.0}
    logged = {key: param_text(value) for key, value in params.flat().items()}
    assert logged["train.class_weight.1"] == "5.0"
    write_logged_params(tmp_path / "params.yaml", logged)  # as `tracking rerun` writes params.yaml: labels as text
    assert load_params(tmp_path / "params.yaml") == params
    with pytest.raises(
        ParamsError, match=r"train.class_weight: class 12 is not a class of the data, whose labels are 0..9"
    ):
        check_class_weight(params_with({"class_weight": {12: 2.0}}).train, 10)
    cases = {
        "train:\n  class_weight: {0: -1}\n": "train.class_weight: class 0's weight -1 is not a finite number >= 0",
        "train:\n  class_weight: evenly\n": "train.class_weight: expected 'balanced' or a mapping",
        "train:\n  class_weight: {a: 1}\n": "train.class_weight: class label 'a' is not an integer >= 0",
        "data:\n  task: regression\n  source: sklearn:diabetes\ntrain:\n  class_weight: balanced\n": (
            "train.class_weight weights classes, and data.task is regression"
        ),
        "determinism:\n  backend: jax\ntrain:\n  augment: team_augments:flip_and_jitter\n": (
            "train.augment runs inside the tf.data pipeline of the training batches, which only the tensorflow backend"
        ),
    }
    for text, expected in cases.items():
        (tmp_path / "params.yaml").write_text(text)
        with pytest.raises(ParamsError, match=expected):
            load_params(tmp_path / "params.yaml")


def test_a_class_the_data_lacks_stops_before_any_run(splits, team):
    params = params_with({"class_weight": {10: 2.0}})
    seeds = resolve_seeds(params.seeds)
    with pytest.raises(ParamsError, match="class 10 is not a class of the data"):
        prepare_model(params, seeds, BuildInputs(splits["train"], 10, None, team))


def test_the_fit_and_a_repeat_train_with_class_weights_as_sample_weights_by_class(splits, team):
    """`train.class_weight` is the loss weighting of `sample_weight` by class, on the train stage's fit and on a
    calibration or candidate repeat alike: bit-identical weights (that weights move the weights:
    tests/test_training.py)."""
    weights = {3: 10.0}
    by_class = {**splits["train"], "sample_weight": np.where(splits["train"]["y"] == 3, 10.0, 1.0).astype("float32")}
    class_weighted = params_with({"class_weight": weights})
    expected = trained(params_with(), by_class, team)
    assert trained(class_weighted, splits["train"], team) == expected
    assert repeat(class_weighted, splits, team) == expected


def test_augmented_batches_follow_seeds_augment_alone_and_the_audit_draws_the_same(splits, team):
    from tracking.training.augment import augment_function

    function = augment_function(params_with({"augment": "team_augments:flip_and_jitter"}).train, team)
    x, y = splits["train"]["x"], splits["train"]["y"]

    def batches(seed: int) -> list[np.ndarray]:
        return [b[0].numpy() for b in epoch_batches(x, y, 64, 2, 5, None, None, function, seed)]

    plain = [b[0].numpy() for b in epoch_batches(x, y, 64, 2, 5)]
    once = batches(1)
    assert all(np.array_equal(a, b) for a, b in zip(once, batches(1), strict=True))
    assert not any(np.array_equal(a, b) for a, b in zip(once, batches(2), strict=True))
    assert not np.array_equal(once[2], batches(1)[0])  # each step draws anew, the next epoch's too
    eager = [function(b, None, step_seed(1, step))[0].numpy() for step, b in enumerate(plain)]  # the audit's way
    assert all(np.array_equal(a, b) for a, b in zip(once, eager, strict=True))


def test_training_with_augmentation_is_bit_identical_and_moved_by_seeds_augment_alone(splits, team):
    augment = {"augment": "team_augments:flip_and_jitter"}
    once = trained(params_with(augment, augment=1), splits["train"], team)
    assert trained(params_with(augment, augment=1), splits["train"], team) == once
    assert trained(params_with(augment, augment=2), splits["train"], team) != once
    assert trained(params_with(augment=2), splits["train"], team) == trained(
        params_with(augment=1), splits["train"], team
    )


def test_an_augmentation_that_fails_stops_before_any_run(splits, team):
    params = params_with({"augment": "team_augments:images_only"})
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    with pytest.raises(UserCodeError, match=r"train.augment: 'team_augments:images_only' failed on a training batch"):
        prepare_model(params, seeds, BuildInputs(splits["train"], 10, None, team))


def test_memory_mapped_splits_train_and_score_bit_identically_to_arrays_in_memory(splits, team, tmp_path, monkeypatch):
    """The prepared splits as the stages read them (memory-mapped, read a batch at a time past
    `IN_MEMORY_BYTES`) train the same weights, with sample weights and augmentation, and score the same, bit for
    bit, as the arrays held in memory."""
    from tracking.data.dataset import load_splits, write_splits
    from tracking.data.manifest import Manifest, Origin
    from tracking.training import batches

    data = {
        "train": {**splits["train"], "sample_weight": np.linspace(0.5, 2, 128, dtype="float32")},
        "test": splits["test"],
    }
    manifest = Manifest.build(data, Origin.of(data["train"]), "digits")
    write_splits(tmp_path / "prepared", data, manifest)
    mapped = load_splits(tmp_path / "prepared", manifest)
    assert isinstance(mapped["train"]["x"], np.memmap)
    params = params_with({"augment": "team_augments:flip_and_jitter"}, augment=3)

    def scored(data: dict) -> tuple[str, dict[str, float], bytes]:
        seeds = resolve_seeds(params.seeds)
        seed_frameworks(params, seeds)
        built = prepare_model(params, seeds, BuildInputs(data["train"], 10, None, team))
        found = train_and_score(built, params, seeds, data, 10, None, root=team)
        return found.weights_sha256, found.metrics, found.predicted.tobytes()

    in_memory = trained(params, data["train"], team), scored(data)
    monkeypatch.setattr(batches, "IN_MEMORY_BYTES", 0)
    assert (trained(params, mapped["train"], team), scored(mapped)) == in_memory


def test_the_training_and_validation_pipelines_do_not_autotune():
    """tf.data's tuning thread waits out a period that doubles to 60 s, and the iterators Keras deletes as `fit` ends
    wait for it: with it on, the end of a long fit stalled for up to a minute (`batches.without_autotune`)."""
    from tracking.training.batches import in_batches

    x, y = np.zeros((10, 3), dtype="float32"), np.zeros(10, dtype="float32")
    for dataset in (epoch_batches(x, y, 4, 2, 5), in_batches((x, y), 4)):
        assert dataset.options().autotune.enabled is False
