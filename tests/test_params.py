from pathlib import Path

import pytest

from tracking.config.baseline import freeze, load_baseline
from tracking.config.model_checks import check_output_keys
from tracking.config.params import Params, TrainParams
from tracking.config.params_file import load_params
from tracking.errors import ParamsError
from tracking.yaml_text import flatten

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
    assert flat["model.kwargs.filters"] == params.model.kwargs["filters"]
    assert all("." in key for key in flat)


def test_flatten_nested_mappings():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None}) == {"a.b": 1, "a.c.d": [1, 2], "e": None}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("train:\n  lerning_rate: 0.1\n", "unknown key 'train.lerning_rate'; did you mean 'train.learning_rate'?"),
        (
            "bogus: 1\n",
            "valid keys in the top level: mlflow, data, seeds, determinism, model, train, calibration, compare",
        ),
        ("train:\n  epochs: 0\n", "train.epochs: expected greater than or equal to 1, got 0"),
        ("train:\n  batch_size: -4\n", "train.batch_size"),
        ("train:\n  epochs: '10'\n", "train.epochs: expected a valid integer, got '10'"),
        ("model:\n  builder: resnet\n", "model.builder: expected 'package.module:function', got 'resnet'"),
        ("model:\n  name: resnet\n", "unknown key 'model.name'; valid keys in 'model': builder, kwargs"),
        ("data:\n  loader: mine:load\n", "data: exactly one of data.source and data.loader must be set"),
        (
            "compare:\n  metrics: {test_accuracy: best}\n",
            "compare.metrics.test_accuracy: expected 'max' or 'min', got 'best'",
        ),
        ("data:\n  sha256: abc\n", "data.sha256: expected 64 lowercase hex digits"),
        ("seeds:\n  dropout: -1\n", "seeds.dropout"),
        ("train: [1\n", "YAML syntax error at line"),
        ("- 1\n- 2\n", "expected a mapping of sections"),
        (
            "data:\n  task: ranking\n",
            "data.task: expected 'classification', 'regression' or 'multilabel', got 'ranking'",
        ),
        ("train:\n  epochs: 2\n  epochs: 3\n", "YAML syntax error at line 3, column 3: found duplicate key"),
    ],
)
def test_bad_params_name_key_and_fix(tmp_dir, text, expected):
    with pytest.raises(ParamsError) as caught:
        load_text(tmp_dir, text)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_missing_file(tmp_dir):
    with pytest.raises(ParamsError, match=r"params\.yaml: file not found"):
        load_params(tmp_dir / "params.yaml")


def test_empty_file_is_refused_and_an_empty_mapping_gives_defaults(tmp_dir):
    """An empty params.yaml is more often a truncated file than a wish for defaults; `{}` says it on purpose."""
    with pytest.raises(ParamsError, match=r"params\.yaml is empty: no section set.*write `\{\}`"):
        load_text(tmp_dir, "")
    assert load_text(tmp_dir, "{}\n") == Params()


def test_int_accepted_for_float(tmp_dir):
    assert load_text(tmp_dir, "train:\n  learning_rate: 1\n").train.learning_rate == 1.0


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("train:\n  learning_rate: 1e-5\n", "train.learning_rate", 1e-05),
        ("train:\n  learning_rate: 1E+0\n", "train.learning_rate", 1.0),
        ("seeds:\n  init: 1_000\n", "seeds.init", 1000),
        ("mlflow:\n  experiment: 1:20\n", "mlflow.experiment", "1:20"),
    ],
)
def test_yaml_is_read_as_dvc_reads_it(tmp_dir, text, key, value):
    """YAML 1.2 as DVC's ruamel.yaml reads it, where YAML 1.1 (PyYAML) gives '1e-5', '1E+0' and 80."""
    from dvc.utils.serialize import parse_yaml

    assert load_text(tmp_dir, text).flat()[key] == flatten(parse_yaml(text, "params.yaml"))[key] == value


def test_baseline_reads_back_as_written(tmp_dir):
    """Values that YAML 1.1 and 1.2 spell differently survive `tracking baseline`."""
    params = tmp_dir / "params.yaml"
    params.write_text("data:\n  source: '0o17'\ntrain:\n  learning_rate: 1e-05\n  optimizer: sgd\n")
    freeze(params, tmp_dir / "baseline.yaml")
    assert load_baseline(tmp_dir / "baseline.yaml") == load_params(params)


def test_a_mapping_per_output_names_outputs_the_model_has():
    """`train.loss`, `train.metrics` and `train.loss_weights` keyed by output name: an unknown name is one line
    naming it and the model's outputs; a list of weights needs one per output."""
    outputs = ["department", "priority"]
    per_output = TrainParams(
        loss={"priority": "binary_crossentropy", "department": "mse"},
        metrics={"department": ["mae"]},
        loss_weights={"priority": 1.0, "department": 0.2},
    )
    check_output_keys(per_output, outputs)
    check_output_keys(TrainParams(loss="mse", loss_weights=[1.0, 0.2]), outputs)
    with pytest.raises(
        ParamsError,
        match=r"train\.metrics: a mapping keyed by the model's output names "
        r"\(department, priority\), got 'priorty'",
    ):
        check_output_keys(TrainParams(metrics={"priorty": ["mae"]}), outputs)
    with pytest.raises(
        ParamsError, match=r"train\.loss_weights: one weight per model output \(2: department, priority\)"
    ):
        check_output_keys(TrainParams(loss_weights=[1.0]), outputs)


def test_a_value_per_output_of_another_form_is_one_line_showing_both_forms(tmp_dir):
    with pytest.raises(
        ParamsError,
        match=r"train\.loss_weights: expected a list of weights >= 0, one per output, or "
        r"a mapping from each output's name to its value \(e\.g\. \{priority: 0\.2\}\), got \{'priority': -1\.0\}",
    ):
        load_text(tmp_dir, "train:\n  loss_weights: {priority: -1.0}\n")


def test_the_template_s_builders_load_from_the_module_its_params_yaml_names():
    """The builder params.yaml names, and the built-ins a run logged before builders named (`model.name`, read in
    that module by `tracking diff`): renaming the models module fails here, not in a team's first diff."""
    from tracking.config.user_code import load_callable
    from tracking.inspect.diff.legacy import LEGACY_MODEL_KWARGS, project_builders

    spec = load_params(REPO_PARAMS).model.builder
    module = project_builders(REPO_PARAMS.parent)
    assert spec is not None and spec.startswith(f"{module}:")
    for builder in (spec, *(f"{module}:{name}" for name in LEGACY_MODEL_KWARGS)):
        assert callable(load_callable(builder, "model.builder", REPO_PARAMS.parent)), builder


def test_training_without_a_builder_is_one_line_naming_the_key_and_the_fix():
    """The library has no default model: `Params()` constructs, and what trains it asks params.yaml for one."""
    from tracking.config.params import model_builder

    assert Params().model.builder is None
    with pytest.raises(ParamsError) as raised:
        model_builder(Params())
    assert str(raised.value) == (
        "model.builder: not set, and training builds the model it names (the library has no default model); "
        "name the builder in params.yaml, `model.builder: package.module:function` (docs/configuration.md)"
    )
