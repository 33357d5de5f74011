"""A saved model's file is a function of its weights and config: equal weights, equal bytes, so a run that
reproduces the committed weights leaves DVC's hash of `outputs/model.keras`, and `git status`, unchanged."""

import json
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest

from tracking.training.saved_model import ZIP_EPOCH, save_model


def test_saving_equal_weights_twice_writes_equal_bytes_that_keras_loads(tmp_path: Path):
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    first, second = tmp_path / "first.keras", tmp_path / "second.keras"
    save_model(model, first)
    save_model(model, second)
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        assert {member.date_time for member in archive.infolist()} == {ZIP_EPOCH}  # Keras stamps the weights' entry
        assert "date_saved" not in json.loads(archive.read("metadata.json"))
        # Keras numbers shared objects by memory address: another process saved other text (a fresh clone's make run)
        assert json.loads(archive.read("config.json"))["config"]["dtype"]["shared_object_id"] == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["first.keras", "second.keras"]  # no staging left
    loaded = keras.models.load_model(first)
    for kept, saved in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(kept, saved)


def test_an_interrupted_rewrite_leaves_neither_the_model_nor_its_partial_file(tmp_path: Path, monkeypatch):
    """A Ctrl-C while the archive is rewritten: the train stage's clean-up removes the outputs it declares, so the
    partial file beside `model.keras` goes here, and no `model.keras` appears."""
    import tracking.training.saved_model as saved_model

    def interrupted(source, target):
        target.write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(saved_model, "_rewrite", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_model(keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]), tmp_path / "model.keras")
    assert list(tmp_path.iterdir()) == []
