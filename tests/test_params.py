from pathlib import Path

import pytest

from tracking.errors import ParamsError
from tracking.params import Params, flatten, load_params

REPO_PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


def load_text(tmp_dir: Path, text: str) -> Params:
    path = tmp_dir / "params.yaml"
    path.write_text(text)
    return load_params(path)


def test_repository_params_are_valid_and_flatten_to_dvc_names():
    params = load_params(REPO_PARAMS)
    flat = params.flat()
    assert flat["train.learning_rate"] == params.train.learning_rate
    assert flat["seeds.base"] == params.seeds.base
    assert flat["model.filters"] == list(params.model.filters)
    assert all("." in key for key in flat)


def test_flatten_nested_mappings():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None}) == {"a.b": 1, "a.c.d": [1, 2], "e": None}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("train:\n  lerning_rate: 0.1\n", "unknown key 'train.lerning_rate'; did you mean 'train.learning_rate'?"),
        ("bogus: 1\n", "valid keys in the top level: mlflow, data, seeds, determinism, model, train, calibration, compare"),
        ("train:\n  epochs: 0\n", "train.epochs: expected greater than or equal to 1, got 0"),
        ("train:\n  batch_size: -4\n", "train.batch_size"),
        ("train:\n  epochs: '10'\n", "train.epochs: expected a valid integer, got '10'"),
        ("model:\n  name: resnet\n", "model.name: expected 'small_cnn' or 'mlp', got 'resnet'"),
        ("train:\n  optimizer: adamw\n", "train.optimizer"),
        ("data:\n  sha256: abc\n", "data.sha256: expected 64 lowercase hex digits"),
        ("seeds:\n  dropout: -1\n", "seeds.dropout"),
        ("train: [1\n", "YAML syntax error at line"),
        ("- 1\n- 2\n", "expected a mapping of sections"),
    ],
)
def test_bad_params_name_key_and_fix(tmp_dir, text, expected):
    with pytest.raises(ParamsError) as caught:
        load_text(tmp_dir, text)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_missing_file(tmp_dir):
    with pytest.raises(ParamsError, match="params.yaml: file not found"):
        load_params(tmp_dir / "params.yaml")


def test_empty_file_gives_defaults(tmp_dir):
    assert load_text(tmp_dir, "") == Params()


def test_int_accepted_for_float(tmp_dir):
    assert load_text(tmp_dir, "train:\n  learning_rate: 1\n").train.learning_rate == 1.0
