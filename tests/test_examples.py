"""The examples/ projects as a team runs them: copied out as their README says, `dvc repro`, rerun, diff.

Each test types the README's first shell block (copy, `git init`, `dvc init`, commit, `dvc repro`) in a folder
that holds this repository's `examples/`, then re-runs the train stage's run with `tracking rerun` and reads
both runs' logged models back through MLflow's API to check their weights are bit-identical.

They are also the suite's pipelines on a team's own data and task (a regression model with its own layer on
`sklearn:diabetes`; a one-sigmoid classifier on a loader with groups): what each task's stages write, the
noise they measure and the metrics `tracking diff` judges are checked on the projects these tests build.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, calibration_link, client_for, run, runs_of, train_run_id

from tracking.config.baseline import freeze
from tracking.yaml_text import parse_yaml

EXAMPLES = REPO / "examples"
REGRESSION = "diabetes-regression"
BINARY = "breast-cancer-groups"


def readme_blocks(example: str) -> list[str]:
    """The fenced ```bash blocks of the example's README, in order."""
    return re.findall(r"```bash\n(.*?)```", (EXAMPLES / example / "README.md").read_text(), re.S)


def start_as_the_readme_says(example: str, where: Path) -> Path:
    """Type the README's first block in `where / "checkout"`, whose `examples/` is this repository's; the project
    it made, which must lie outside that checkout (a repository nested in it would dirty the main project)."""
    block = readme_blocks(example)[0]
    checkout = where / "checkout"
    checkout.mkdir()
    (checkout / "examples").symlink_to(EXAMPLES)
    run(["bash", "-ec", block], checkout)
    (name,) = re.findall(rf"^cp -r examples/{example} (\S+) && cd \1$", block, re.M)
    project = (checkout / name).resolve()
    assert not project.is_relative_to(checkout), f"the README copies the example inside the checkout: {name}"
    return project


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
        assert re.search(rf"^  {metric} .* (within noise|exceeds noise|inconclusive)", done.stdout, re.M), done.stdout


def diff_judges_the_runs_own_compare_metrics(root: Path, original: str) -> None:
    """`tracking diff --format json` of the train run and a calibration repeat judges the repeat's compare.metrics
    (the project's own, not the digits' test_accuracy), in order, each in its direction."""
    modes = parse_yaml((root / "params.yaml").read_text())["compare"]["metrics"]
    repeat = calibration_link(root)["runs"][0]["run_id"]
    done = run(["tracking", "diff", original, repeat, "--format", "json"], root)
    rows = {row["metric"]: row for row in json.loads(done.stdout)["metrics"]}
    assert list(rows) == list(modes)
    for metric, mode in modes.items():
        row = rows[metric]  # better/worse is read from the gap its t is from: B - the reference (A or a band mean)
        gap = row["delta"] if row["reference"] is None else row["b"] - row["reference"]
        assert rows[metric]["direction"] == (
            "same" if gap == 0 else "better" if (gap > 0) == (mode == "max") else "worse"
        )
        assert rows[metric]["verdict"] is not None


def regression_outputs_and_noise(root: Path) -> None:
    """What a regression project's stages write: no classes, float predictions, r2 and rmse, churn in target stds."""
    manifest = json.loads((root / "data/prepared/manifest.json").read_text())
    assert (manifest["task"], manifest["n_outputs"], manifest["target_shape"]) == ("regression", 1, [])
    assert "class_counts" not in manifest and "n_classes" not in manifest
    evaluation = json.loads((root / "metrics/eval.json").read_text())
    assert set(evaluation) == {"test_loss", "test_mae", "test_rmse", "test_r2"}
    assert evaluation["test_rmse"] == pytest.approx(evaluation["test_loss"] ** 0.5)
    predictions = np.load(root / "outputs/predictions.npy")
    assert predictions.dtype == np.float32 and predictions.shape == (manifest["n_samples"]["test"],)

    noise = json.loads((root / "calibration/noise.json").read_text())
    assert noise["task"] == "regression" and "std of the test targets" in noise["churn_measure"]
    churn = noise["variants"]["algo"]["churn"]
    assert 0 < churn["mean"] <= churn["max"] and churn["pairs"] == 3  # reseeded runs predict differently
    assert {"test_loss", "test_mae", "test_rmse", "test_r2"} <= set(noise["variants"]["algo"]["bands"])

    report = (root / "reports/compare.md").read_text()
    assert "mean absolute difference of two runs' test predictions / std of the test targets" in report
    assert "| churn | churn |" in report and "| primary | test_mae |" in report and "(min)" in report
    compare = json.loads((root / "metrics/compare.json").read_text())
    assert {"candidates_mean_gap_test_loss", "candidates_mean_gap_test_mae"} <= set(compare)

    runs = runs_of(root, parse_yaml((root / "params.yaml").read_text())["mlflow"]["experiment"])
    candidate = [r for r in runs if r.data.tags.get("noise.verdict")]
    assert len(candidate) == 1 and candidate[0].info.status == "FINISHED"
    logged = candidate[0].data.metrics
    assert logged["test_r2"] == pytest.approx(evaluation["test_r2"])
    assert logged["test_mae"] == pytest.approx(evaluation["test_mae"])
    repeats = [r for r in runs if r.data.tags.get("noise.variant") == "algo"]
    assert len(repeats) == 3 and all("test_rmse" in r.data.metrics for r in repeats)


def groups_of_a_one_sigmoid_model(root: Path, groups: tuple[str, ...]) -> None:
    """A loader's groups get accuracy, FPR and FNR per group, banded and reported, from one sigmoid output."""
    manifest = json.loads((root / "data/prepared/manifest.json").read_text())
    assert manifest["source"].startswith("loader:") and manifest["has_groups"] and manifest["n_outputs"] == 2
    evaluation = json.loads((root / "metrics/eval.json").read_text())
    assert set(evaluation["per_group"]) == set(groups)
    assert all(set(evaluation["per_group"][group]) == {"accuracy", "fpr", "fnr"} for group in groups)
    outputs = np.load(root / "outputs/probabilities.npy")
    assert outputs.shape[1] == 1
    assert np.array_equal(np.load(root / "outputs/predictions.npy"), (outputs[:, 0] >= 0.5).astype("int64"))

    bands = json.loads((root / "calibration/noise.json").read_text())["variants"]["algo"]["bands"]
    for name in ("test_auc", *(f"test_group_{group}_{rate}" for group in groups for rate in ("fpr", "fnr"))):
        assert bands[name]["n"] == 3, name
    report = (root / "reports/compare.md").read_text()
    assert "| primary | test_auc |" in report
    for group in groups:
        assert f"| group | test_group_{group}_fpr |" in report and f"| group | test_group_{group}_fnr |" in report

    logged = client_for(root).get_run(train_run_id(root)).data.metrics
    assert logged[f"test_group_{groups[0]}_fpr"] == pytest.approx(evaluation["per_group"][groups[0]]["fpr"])
    assert logged["test_auc"] == pytest.approx(evaluation["test_auc"])


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


def test_tracking_baseline_in_an_example_not_yet_copied_out_writes_nothing(tmp_path: Path):
    """Typed in an example's folder still inside a project, `tracking baseline` read the example's params.yaml
    and wrote its baseline over the project's own: it now refuses in one line, naming the folder, and writes
    nothing."""
    import subprocess
    import sys

    (tmp_path / ".dvc").mkdir()
    (tmp_path / "params.yaml").write_text("{}\n")
    shutil.copytree(EXAMPLES / REGRESSION, tmp_path / REGRESSION)
    tracking = Path(sys.executable).with_name("tracking")
    done = subprocess.run([tracking, "baseline"], cwd=tmp_path / REGRESSION, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: params.yaml belongs to the pipeline in {tmp_path / REGRESSION}"), line
    assert not (tmp_path / "baseline.yaml").exists()


@pytest.mark.parametrize("example", [REGRESSION, BINARY])
def test_every_seed_is_listed_so_dvc_exp_run_can_set_one_alone(example: str, tmp_path: Path):
    """`dvc exp run -S seeds.dropout=7`, as the docs phrase it, is refused by DVC for a key params.yaml lacks;
    queued (DVC checks the key then) it is accepted once every seed is listed."""
    from tracking.config.params import SeedParams

    params = parse_yaml((EXAMPLES / example / "params.yaml").read_text())
    assert list(params["seeds"]) == list(SeedParams.model_fields)
    root = tmp_path / example
    shutil.copytree(EXAMPLES / example, root)
    for command in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "x"]):
        run(command, root)
    run(["dvc", "exp", "run", "-S", "seeds.dropout=7", "--queue"], root)
    run(["dvc", "queue", "remove", "--all"], root)


def cached_outputs(dvc_yaml: Path) -> list[Path]:
    """The outputs DVC caches (and so would list in a `.gitignore`) of every stage `dvc_yaml` declares."""
    paths = []
    for stage in parse_yaml(dvc_yaml.read_text())["stages"].values():
        for entry in [*stage.get("outs", []), *stage.get("metrics", []), *stage.get("plots", [])]:
            path, options = (entry, {}) if isinstance(entry, str) else next(iter(entry.items()))
            if (options or {}).get("cache", True):
                paths.append(dvc_yaml.parent / path)
    return paths


@pytest.mark.parametrize(
    "dvc_yaml",
    ["dvc.yaml", "audit/dvc.yaml", *(f"examples/{name}/dvc.yaml" for name in (REGRESSION, BINARY, "own-train-script"))],
)
def test_every_cached_output_is_ignored_by_a_committed_gitignore_of_the_project(dvc_yaml: str):
    """DVC writes a stage output's `.gitignore` entry only when the whole `dvc repro` succeeds: a copied example
    whose first repro failed at train left data/prepared untracked, and `git add -A` committed the data. Each
    entry is committed inside the project's own folder, which is what a copy takes with it."""
    project = (REPO / dvc_yaml).parent
    for output in cached_outputs(REPO / dvc_yaml):
        relative = output.relative_to(REPO).as_posix()
        found = run(["git", "check-ignore", "--verbose", "--no-index", relative], REPO, check=False).stdout
        source = found.split(":", 1)[0]
        assert source and (REPO / source).is_relative_to(project), f"{relative} is not ignored inside {project}"
        run(["git", "ls-files", "--error-unmatch", source], REPO)


@pytest.mark.slow
def test_regression_example_end_to_end(tmp_path: Path):
    """The diabetes project with its own model module: repro, a verdict on test_loss/test_mae, rerun, diff."""
    root = start_as_the_readme_says(REGRESSION, tmp_path)
    regression_outputs_and_noise(root)
    assert (
        json.loads((root / "metrics/eval.json").read_text())["test_mae"] < 0.7
    )  # in target stds; the mean scores ~0.8
    original = rerun_bit_identical(root, tmp_path)
    diff_against_a_reseeded_repeat(root, original, ("test_loss", "test_mae"))
    diff_judges_the_runs_own_compare_metrics(root, original)
    assert stages_changed_by_editing(root, "models/net.py") == {"train", "evaluate", "calibrate", "compare"}


@pytest.mark.slow
def test_binary_example_end_to_end(tmp_path: Path):
    """The breast cancer project with its own loader and groups: repro, per-group FPR/FNR bands, diff. (`tracking
    rerun` of an example project is the regression example's: the suite's budget takes it once.)"""
    root = start_as_the_readme_says(BINARY, tmp_path)
    groups_of_a_one_sigmoid_model(root, ("q1", "q2", "q3"))
    assert (
        json.loads((root / "metrics/eval.json").read_text())["test_accuracy"] > 0.9
    )  # the majority class scores ~0.63
    original = train_run_id(root)
    diff_against_a_reseeded_repeat(root, original, ("test_auc",))
    diff_judges_the_runs_own_compare_metrics(root, original)
    assert stages_changed_by_editing(root, "cancer/model.py") == {"train", "evaluate", "calibrate", "compare"}
    assert stages_changed_by_editing(root, "cancer/data.py") == {"prepare"}
