"""The examples/ projects as a team runs them: copied out as their README says, `dvc repro`, rerun, diff.

Each test types the README's first shell block (copy, `git init`, `dvc init`, commit, `dvc repro`) in a folder
that holds this repository's `examples/`, then re-runs the train stage's run with `tracking rerun` and reads
both runs' logged models back through MLflow's API to check their weights are bit-identical.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, client_for, run

from tracking.config.baseline import freeze

EXAMPLES = REPO / "examples"
REGRESSION = "diabetes-regression"
BINARY = "breast-cancer-groups"


def readme_blocks(example: str) -> list[str]:
    """The fenced ```bash blocks of the example's README, in order."""
    return re.findall(r"```bash\n(.*?)```", (EXAMPLES / example / "README.md").read_text(), re.S)


def start_as_the_readme_says(example: str, where: Path) -> Path:
    """Type the README's first block where `examples/` is this repository's; the project it made."""
    block = readme_blocks(example)[0]
    (where / "examples").symlink_to(EXAMPLES)
    run(["bash", "-ec", block], where)
    (name,) = re.findall(rf"^cp -r examples/{example} (\S+) && cd \1$", block, re.M)
    return where / name


def train_run_id(root: Path) -> str:
    return json.loads((root / "outputs/run.json").read_text())["run_id"]


def logged_weights(root: Path, run_id: str, into: Path) -> list[np.ndarray]:
    """The weights of the model run `run_id` logged, downloaded through MLflow and read from its `.keras` file."""
    import h5py
    import mlflow

    client = client_for(root)
    experiment = client.get_run(run_id).info.experiment_id
    (model,) = client.search_logged_models([experiment], filter_string=f"source_run_id = '{run_id}'")
    folder = Path(
        mlflow.artifacts.download_artifacts(artifact_uri=model.artifact_location, dst_path=str(into / run_id))
    )
    (keras_file,) = folder.rglob("*.keras")
    with zipfile.ZipFile(keras_file) as archive, h5py.File(archive.open("model.weights.h5")) as weights:
        found: list[np.ndarray] = []
        weights.visititems(lambda name, item: found.append(item[()]) if isinstance(item, h5py.Dataset) else None)
    return found


def rerun_bit_identical(root: Path, tmp_path: Path) -> str:
    """`tracking rerun` of the train stage's run: a new run, tagged rerun_of, with bit-identical logged weights.

    Returns the train stage's run id (outputs/run.json holds it only until the next training)."""
    original = train_run_id(root)
    done = run(["tracking", "rerun", original], root)
    assert "weights: bit-identical" in done.stdout, done.stdout
    client = client_for(root)
    experiment = client.get_run(original).info.experiment_id
    (new,) = client.search_runs([experiment], filter_string=f"tags.rerun_of = '{original}'")
    assert new.info.status == "FINISHED"
    assert new.data.tags["prov.weights_sha256"] == client.get_run(original).data.tags["prov.weights_sha256"]
    before, after = logged_weights(root, original, tmp_path), logged_weights(root, new.info.run_id, tmp_path)
    assert len(before) == len(after) > 0
    assert all(a.dtype == b.dtype and a.tobytes() == b.tobytes() for a, b in zip(before, after, strict=False))
    return original


def diff_against_a_reseeded_repeat(root: Path, original: str, metrics: tuple[str, ...]) -> None:
    """`tracking diff` of the train run and an ALGO calibration repeat (other seeds): seeds differ, metrics judged.

    A repeat stands in for `dvc exp run -S seeds.base=...` at no extra training."""
    client = client_for(root)
    experiment = client.get_run(original).info.experiment_id
    repeat = client.search_runs([experiment], filter_string="tags.`noise.variant` = 'algo'")[0]
    done = run(["tracking", "diff", original, repeat.info.run_id], root)
    assert re.search(r"^  seeds \(", done.stdout, re.M), done.stdout
    for metric in metrics:
        assert re.search(rf"^  {metric} .* (within noise|exceeds noise)", done.stdout, re.M), done.stdout


def stages_changed_by_editing(root: Path, module: str) -> set[str]:
    """The stages whose deps `dvc status` finds changed after a comment is appended to the team's `module` (the
    stages after them re-run too, once these change their outputs); the edit is undone."""
    path = root / module
    original = path.read_text()
    path.write_text(original + "# edited\n")
    try:
        return set(json.loads(run(["dvc", "status", "--json"], root).stdout))
    finally:
        path.write_text(original)


@pytest.mark.parametrize("example", [REGRESSION, BINARY])
def test_baseline_is_what_tracking_baseline_writes(example: str, tmp_path: Path):
    """Each example's committed baseline.yaml is `tracking baseline` of its params.yaml (so calibration trains it)."""
    freeze(EXAMPLES / example / "params.yaml", tmp_path / "baseline.yaml")
    assert (tmp_path / "baseline.yaml").read_text() == (EXAMPLES / example / "baseline.yaml").read_text()


@pytest.mark.slow
def test_regression_example_end_to_end(tmp_path: Path):
    """The diabetes project with its own model module: repro, a verdict on test_loss/test_mae, rerun, diff."""
    root = start_as_the_readme_says(REGRESSION, tmp_path)
    report = (root / "reports/compare.md").read_text()
    assert "test_loss" in report and "test_mae" in report
    assert (
        json.loads((root / "metrics/eval.json").read_text())["test_mae"] < 0.7
    )  # in target stds; the mean scores ~0.8
    diff_against_a_reseeded_repeat(root, rerun_bit_identical(root, tmp_path), ("test_loss", "test_mae"))
    assert stages_changed_by_editing(root, "models/net.py") == {"train", "evaluate", "calibrate"}


@pytest.mark.slow
def test_binary_example_end_to_end(tmp_path: Path):
    """The breast cancer project with its own loader and groups: repro, per-group FPR/FNR bands, rerun."""
    root = start_as_the_readme_says(BINARY, tmp_path)
    report = (root / "reports/compare.md").read_text()
    assert "test_auc" in report
    assert (
        json.loads((root / "metrics/eval.json").read_text())["test_accuracy"] > 0.9
    )  # the majority class scores ~0.63
    for group in ("q1", "q2", "q3"):
        assert f"| group | test_group_{group}_fpr |" in report and f"| group | test_group_{group}_fnr |" in report, (
            report
        )
    diff_against_a_reseeded_repeat(root, rerun_bit_identical(root, tmp_path), ("test_auc",))
    assert stages_changed_by_editing(root, "cancer/model.py") == {"train", "evaluate", "calibrate"}
    assert stages_changed_by_editing(root, "cancer/data.py") == {"prepare"}
