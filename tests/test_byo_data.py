"""A team's own data and task: loaders, scikit-learn's other sets, regression, and noise for every task.

Two tiny real pipelines (`dvc repro` through compare, MLflow SQLite read back through MLflow's API), one per
module-scoped fixture: a regression MLP on `sklearn:diabetes`, and a team's one-sigmoid binary model on a
team's loader with groups (a memory-mapped `.npy`).
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import client_for, make_project, run, runs_of, write_params

from tracking.config.baseline import freeze
from tracking.data.dataset import build_manifest, load_from_loader, load_source
from tracking.data.hashing import array_sha256
from tracking.errors import DataError

LOADER = """\
from pathlib import Path

import numpy as np


def load(n=240):
    x = np.load(Path(__file__).parent / "data/raw/features.npy", mmap_mode="r")[:n]
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int64")
    return {"x": x, "y": y, "groups": np.where(x[:, 2] > 0, "a", "b")}
"""

BUILDER = """\
import keras


@keras.saving.register_keras_serializable(package="team")
class Scale(keras.layers.Layer):
    def call(self, inputs):
        return inputs * 0.5


def build(input_shape, n_outputs, seeds, width=8):
    inputs = keras.Input(input_shape)
    hidden = keras.layers.Dense(width, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(seeds.init))(inputs)
    output = keras.layers.Dense(1, activation="sigmoid", kernel_initializer=keras.initializers.GlorotUniform(seeds.init + 1))
    return keras.Model(inputs, output(Scale()(hidden)))
"""


def add_deps(root: Path, deps: dict[str, list[str]]) -> None:
    """List a team's files among the deps of stages in dvc.yaml, as the README asks."""
    from tracking.config.params import parse_yaml, yaml_editor

    path = root / "dvc.yaml"
    spec = parse_yaml(path.read_text())
    for stage, files in deps.items():
        spec["stages"][stage]["deps"] += files
    with open(path, "w", encoding="utf-8") as handle:
        yaml_editor().dump(spec, handle)


def calibrated_project(root: Path, **sections: dict) -> Path:
    """A tiny project with `sections` in params.yaml, frozen as the baseline, after a real `dvc repro` to compare."""
    sections["train"] = {"epochs": 2, "batch_size": 32, "learning_rate": 0.01, **sections.get("train", {})}
    write_params(root, calibration={"variants": ["algo"], "repeats": 3}, **sections)
    freeze(root / "params.yaml", root / "baseline.yaml")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "team setup"], root)
    run(["dvc", "repro"], root)
    return root


@pytest.fixture(scope="module")
def regression(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("regression") / "project")
    return calibrated_project(
        root,
        data={"source": "sklearn:diabetes", "task": "regression"},
        model={"builder": "pipelines.models:mlp", "kwargs": {"hidden_units": [16], "dropout": 0.1}},
        compare={"metrics": {"test_loss": "min", "test_mae": "min", "test_r2": "max"}},
    )


@pytest.fixture(scope="module")
def binary_groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("binary") / "project")
    np.save(root / "data/raw/features.npy", np.random.default_rng(7).normal(size=(240, 6)).astype("float32"))
    (root / "team_data.py").write_text(LOADER)
    (root / "team_model.py").write_text(BUILDER)
    add_deps(
        root,
        {"prepare": ["team_data.py"], **{stage: ["team_model.py"] for stage in ("train", "evaluate", "calibrate")}},
    )
    return calibrated_project(
        root,
        data={"source": None, "loader": "team_data:load", "kwargs": {"n": 240}},
        model={"builder": "team_model:build", "kwargs": {"width": 8}},
        train={"loss": "binary_crossentropy", "metrics": ["accuracy", "precision"]},
        compare={"metrics": {"test_accuracy": "max", "test_auc": "max", "test_loss": "min"}},
    )


@pytest.mark.slow
def test_regression_pipeline_judges_regression_churn(regression: Path):
    manifest = json.loads((regression / "data/prepared/manifest.json").read_text())
    assert (manifest["task"], manifest["n_outputs"], manifest["target_shape"]) == ("regression", 1, [])
    assert "class_counts" not in manifest and "n_classes" not in manifest
    evaluation = json.loads((regression / "metrics/eval.json").read_text())
    assert set(evaluation) == {"test_loss", "test_mae", "test_rmse", "test_r2"}
    assert evaluation["test_rmse"] == pytest.approx(evaluation["test_loss"] ** 0.5)
    predictions = np.load(regression / "outputs/predictions.npy")
    assert predictions.dtype == np.float32 and predictions.shape == (manifest["n_samples"]["test"],)

    noise = json.loads((regression / "calibration/noise.json").read_text())
    assert noise["task"] == "regression" and "std of the test targets" in noise["churn_measure"]
    churn = noise["variants"]["algo"]["churn"]
    assert 0 < churn["mean"] <= churn["max"] and churn["pairs"] == 3  # reseeded runs predict differently
    assert {"test_loss", "test_mae", "test_rmse", "test_r2"} <= set(noise["variants"]["algo"]["bands"])

    report = (regression / "reports/compare.md").read_text()
    assert "mean absolute difference of two runs' test predictions / std of the test targets" in report
    assert "| churn | churn |" in report and "| primary | test_r2 |" in report and "(max)" in report
    compare = json.loads((regression / "metrics/compare.json").read_text())
    assert {"delta_test_loss", "delta_test_mae", "delta_test_r2"} <= set(compare)

    candidate = [r for r in runs_of(regression) if r.data.tags.get("noise.verdict")]
    assert len(candidate) == 1 and candidate[0].info.status == "FINISHED"
    logged = candidate[0].data.metrics
    assert logged["test_r2"] == pytest.approx(evaluation["test_r2"]) and logged["test_mae"] == pytest.approx(
        evaluation["test_mae"]
    )
    repeats = [r for r in runs_of(regression) if r.data.tags.get("noise.variant") == "algo"]
    assert len(repeats) == 3 and all("test_rmse" in r.data.metrics for r in repeats)


@pytest.mark.slow
def test_diff_of_regression_runs_judges_the_runs_own_compare_metrics(regression: Path):
    candidate = json.loads((regression / "outputs/run.json").read_text())["run_id"]
    repeat = json.loads((regression / "calibration/noise.json").read_text())["runs"][0]
    done = run([sys.executable, "-m", "tracking", "diff", candidate, repeat["run_id"], "--format", "json"], regression)
    rows = {row["metric"]: row for row in json.loads(done.stdout)["metrics"]}
    assert list(rows) == ["test_loss", "test_mae", "test_r2"]  # compare.metrics of run B, not test_accuracy
    for metric, mode in (("test_loss", "min"), ("test_mae", "min"), ("test_r2", "max")):
        gap = rows[metric]["delta"]
        assert rows[metric]["direction"] == (
            "same" if gap == 0 else "better" if (gap > 0) == (mode == "max") else "worse"
        )
        assert rows[metric]["verdict"] is not None


@pytest.mark.slow
def test_loader_groups_fpr_fnr_are_banded_for_a_one_sigmoid_model(binary_groups: Path):
    manifest = json.loads((binary_groups / "data/prepared/manifest.json").read_text())
    assert manifest["source"] == "loader:team_data:load" and manifest["has_groups"] and manifest["n_outputs"] == 2
    evaluation = json.loads((binary_groups / "metrics/eval.json").read_text())
    assert {"test_auc", "test_precision"} <= set(evaluation)  # ours and a compiled metric
    assert set(evaluation["per_group"]) == {"a", "b"} and set(evaluation["per_group"]["a"]) == {
        "accuracy",
        "fpr",
        "fnr",
    }
    outputs = np.load(binary_groups / "outputs/probabilities.npy")
    assert outputs.shape[1] == 1
    assert np.array_equal(np.load(binary_groups / "outputs/predictions.npy"), (outputs[:, 0] >= 0.5).astype("int64"))

    bands = json.loads((binary_groups / "calibration/noise.json").read_text())["variants"]["algo"]["bands"]
    for name in (
        "test_group_a_fpr",
        "test_group_a_fnr",
        "test_group_b_fpr",
        "test_group_b_fnr",
        "test_auc",
        "test_precision",
    ):
        assert bands[name]["n"] == 3, name
    report = (binary_groups / "reports/compare.md").read_text()
    assert "| group | test_group_a_fpr |" in report and "| group | test_group_b_fnr |" in report
    assert "| primary | test_auc |" in report

    run_id = json.loads((binary_groups / "outputs/run.json").read_text())["run_id"]
    logged = client_for(binary_groups).get_run(run_id).data.metrics
    assert logged["test_group_a_fpr"] == pytest.approx(evaluation["per_group"]["a"]["fpr"])
    assert logged["test_auc"] == pytest.approx(evaluation["test_auc"])


def test_builtin_sets_and_task_mismatch():
    cancer, diabetes = load_source("sklearn:breast_cancer"), load_source("sklearn:diabetes", task="regression")
    assert cancer.x.shape == (569, 30) and set(np.unique(cancer.y)) == {0, 1}
    assert diabetes.y.dtype == np.float32 and diabetes.x.shape == (442, 10)
    with pytest.raises(DataError, match=r"set data\.task: regression"):
        load_source("sklearn:diabetes")


def write_loader(root: Path, body: str) -> str:
    module = f"loader_{abs(hash(body))}"
    (root / f"{module}.py").write_text(f"import numpy as np\n\n\ndef load(n=20):\n    {body}\n")
    return f"{module}:load"


@pytest.mark.parametrize(
    ("body", "task", "message"),
    [
        (
            "return {'x': np.zeros((n, 2)), 'y': np.arange(n) % 2, 'weights': np.ones(n)}",
            "classification",
            "unknown key(s) weights",
        ),
        ("return {'x': np.zeros((n, 2)), 'y': np.arange(n) % 2 + 0.5}", "classification", "set data.task: regression"),
        (
            "return {'x': np.zeros((n, 2)), 'y': np.arange(n)[:, None] % 2 - 1}",
            "classification",
            "1-D integer class labels",
        ),
        ("return {'x': np.zeros((n, 2)), 'y': np.full(n, np.nan)}", "regression", "NaN or infinite targets"),
        ("return {'x': np.zeros((n, 2), dtype=complex), 'y': np.zeros(n)}", "regression", "array x must be numeric"),
        (
            "return {'x': np.zeros((n, 2)), 'y': np.zeros(n), 'groups': np.array([{}] * n)}",
            "regression",
            "groups must be 1-D",
        ),
    ],
)
def test_loader_returns_are_checked(tmp_path: Path, body: str, task: str, message: str):
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_from_loader(write_loader(tmp_path, body), {}, tmp_path, task)


def test_loader_targets_of_any_shape(tmp_path: Path):
    spec = write_loader(tmp_path, "return {'x': np.ones((n, 4)), 'y': np.arange(n * 6).reshape(n, 2, 3)}")
    source = load_from_loader(spec, {"n": 12}, tmp_path, "regression")
    manifest = build_manifest({"train": {"x": source.x, "y": source.y}}, source, "regression")
    assert source.y.dtype == np.float32 and (manifest["n_outputs"], manifest["target_shape"]) == (6, [2, 3])


def test_memory_mapped_array_is_hashed_in_chunks(tmp_path: Path):
    """A strided view of a memory map (every other column, 8 MB) is copied a block of rows at a time, not whole."""
    array = np.random.default_rng(0).random((4000, 1000), dtype="float32")
    np.save(tmp_path / "big.npy", array)
    mapped = np.load(tmp_path / "big.npy", mmap_mode="r")[:, ::2]
    expected = array_sha256(np.ascontiguousarray(array[:, ::2]))
    del array
    tracemalloc.start()
    digest = array_sha256(mapped)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert digest == expected and peak < 4 * 2**20


def test_scores_for_one_sigmoid_output_and_regression():
    from pipelines.scoring import flat_metrics, scores, summary_metrics

    y = np.array([0, 1, 1, 0])
    sigmoid = np.array([[0.2], [0.7], [0.4], [0.6]])
    result = scores(
        y,
        sigmoid,
        "classification",
        2,
        np.array(["a", "a", "b", "b"]),
        {"loss": 9.0, "accuracy": 0.1, "auc": 0.3, "precision": 0.5},
    )
    assert result["predicted"].tolist() == [0, 1, 0, 1] and result["test_auc"] == pytest.approx(0.75)
    assert result["test_loss"] == pytest.approx(-np.mean(np.log([0.8, 0.7, 0.4, 0.4])))
    flat = flat_metrics(summary_metrics(result))
    assert flat["test_accuracy"] == 0.5 and flat["test_precision"] == 0.5 and flat["test_loss"] < 1  # ours win
    assert flat["test_group_b_fnr"] == 1.0 and flat["test_group_b_fpr"] == 1.0 and flat["test_group_a_fpr"] == 0.0

    targets = np.array([1.0, 2.0, 3.0, 4.0], dtype="float32")
    result = scores(targets, np.array([[1.0], [2.0], [3.0], [6.0]]), "regression", 1, np.array([0, 0, 1, 1]))
    assert (
        result["test_mae"] == 0.5 and result["test_loss"] == 1.0 and result["test_r2"] == pytest.approx(1 - 1.0 / 1.25)
    )
    assert result["per_group"] == {"0": {"mae": 0.0}, "1": {"mae": 1.0}}


def test_regression_churn_by_hand():
    from tracking.noise.statistics import pairwise_disagreement, regression_churn

    predictions = np.array([[0.0, 0.0], [1.0, 3.0], [2.0, 0.0]])
    matrix = pairwise_disagreement(predictions, "regression", target_std=2.0)
    assert matrix[0, 1] == regression_churn(predictions[0], predictions[1], 2.0) == pytest.approx(1.0)
    assert (
        matrix[1, 2] == pytest.approx((1 + 3) / 2 / 2) and np.allclose(matrix, matrix.T) and not matrix.diagonal().any()
    )
