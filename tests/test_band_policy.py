"""One noise policy on one real store: `tracking diff` and the compare stage judge the same pair of runs alike,
and the commands that only read MLflow work from any folder (issue 9 items 3 and 4)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RESEEDED_RAN, assert_user_error, client_for, project_env, readme_runs, run, runs_of

from tracking.config.params import DEFAULT_SPLIT_SEED

pytestmark = pytest.mark.slow

ALGO_RUNS = "tags.\"noise.variant\" = 'algo'"


@pytest.fixture(scope="module")
def store(readme_typed: Path) -> dict:
    """The `readme_typed` project: its first run (the calibrated baseline's configuration), the experiment the
    README's `dvc exp run -S train.learning_rate=1e-5` made ("faster") and `reseeded`, which differs only in seeds;
    and the stages `reseeded` ran."""
    root = readme_typed / "project"
    baseline, faster = readme_runs(readme_typed)
    return {
        "root": root,
        "baseline": baseline,
        "uri": f"sqlite:///{root / 'mlflow.db'}",
        "experiments": {"reseeded": "reseeded", "faster": faster},
        "ran": {"reseeded": set(json.loads((readme_typed / RESEEDED_RAN).read_text()))},
    }


def test_varying_seeds_base_keeps_the_split_and_the_calibration(store: dict):
    """`dvc exp run -S seeds.base=7`: the split belongs to the data, so prepare and calibrate stay cached and their
    outputs unchanged; train, evaluate and compare run; the run logs the default `data.split_seed`."""
    assert store["ran"]["reseeded"] == {"train", "evaluate", "compare"}
    trained = [found for found in runs_of(store["root"]) if found.data.params.get("seeds.base") == "7"]
    assert len(trained) == 1 and trained[0].data.params["data.split_seed"] == json.dumps(DEFAULT_SPLIT_SEED)


def tracking(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "tracking", *args], cwd, env=project_env(**env), check=False)


def compare_result(root: Path, exp_name: str, into: Path) -> dict:
    """What the compare stage logged with the experiment's candidate run, downloaded `into` a folder."""
    client = client_for(root)
    experiment = client.get_experiment_by_name("test").experiment_id
    (candidate,) = client.search_runs([experiment], filter_string=f"tags.`dvc.exp_name` = '{exp_name}'")
    path = client.download_artifacts(candidate.info.run_id, "compare/compare.json", str(into))
    return json.loads(Path(path).read_text())


@pytest.mark.parametrize(
    "exp_name, reason", [("reseeded", "the runs differ in seeds"), ("faster", "train.learning_rate changed")]
)
def test_diff_and_compare_give_the_same_band_z_and_verdict(store: dict, exp_name: str, reason: str, tmp_path: Path):
    root, exp_name = store["root"], store["experiments"][exp_name]
    compared = compare_result(root, exp_name, tmp_path)
    done = tracking(["diff", store["baseline"], exp_name, "--format", "json"], root)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["band"]["variant"] == compared["band_variant"] == "algo"
    assert compared["reason"].startswith(reason) and found["band"]["reason"].startswith(reason)
    assert found["band"]["reference"].startswith("the calibrated baseline's mean")
    primary = {row["metric"]: row for row in compared["checks"] if row["family"] == "primary"}
    assert set(primary) == {delta["metric"] for delta in found["metrics"]} == {"test_accuracy", "test_loss"}
    for delta in found["metrics"]:
        row = primary[delta["metric"]]
        assert delta["b"] == pytest.approx(row["value"]) and delta["reference"] == pytest.approx(row["band"]["mean"])
        assert (delta["z"] is None) == (row["z"] is None)
        if delta["z"] is not None:
            assert delta["z"] == pytest.approx(row["z"]) and delta["p_value"] == pytest.approx(row["p_value"])
        assert delta["verdict"] == row["verdict"]
    assert found["verdict"] == compared["verdict"]
    text = tracking(["diff", store["baseline"], exp_name], root).stdout
    assert "(B - baseline mean " in text and "Conclusion: " in text and "inf sigma" not in text


def test_read_only_commands_work_outside_any_project_with_the_uri(store: dict, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    uri = store["uri"]
    bands = tracking(
        ["bands", "--experiment", "test", "--filter", ALGO_RUNS, "--metric", "test_loss"],
        elsewhere,
        MLFLOW_TRACKING_URI=uri,
    )
    assert bands.returncode == 0, bands.stderr
    assert json.loads(bands.stdout)["test_loss"]["n"] == 3
    groups = tracking(
        [
            "compare-groups",
            "--experiment",
            "test",
            "--a",
            ALGO_RUNS,
            "--b",
            "tags.\"noise.variant\" = 'control'",
            "--metric",
            "test_loss",
            "--json",
        ],
        elsewhere,
        MLFLOW_TRACKING_URI=uri,
    )
    assert groups.returncode == 0, groups.stderr
    assert (json.loads(groups.stdout)["test_loss"]["n_a"], json.loads(groups.stdout)["test_loss"]["n_b"]) == (3, 3)
    outside = tracking(["diff", store["baseline"], "reseeded", "--format", "json"], elsewhere, MLFLOW_TRACKING_URI=uri)
    inside = tracking(["diff", store["baseline"], "reseeded", "--format", "json"], store["root"])
    assert outside.returncode == 0, outside.stderr
    assert json.loads(outside.stdout)["metrics"] == json.loads(inside.stdout)["metrics"]
    assert json.loads(outside.stdout)["band"]["variant"] == "algo"
    # An experiment DVC ran without training (`-S compute.*` only) has no tagged run; only its project resolves it.
    assert_user_error(
        tracking(["diff", store["baseline"], "no-such-exp"], elsewhere, MLFLOW_TRACKING_URI=uri),
        "run 'no-such-exp' not found",
        "an experiment that trained no run of its own is found from inside its project",
    )

    for args in (
        ["bands", "--experiment", "test"],
        ["compare-groups", "--experiment", "test", "--a", "", "--b", ""],
        ["diff", store["baseline"], "reseeded"],
    ):
        assert_user_error(
            tracking(args, elsewhere),
            "is not inside a DVC project",
            "MLFLOW_TRACKING_URI is not set",
            "set MLFLOW_TRACKING_URI to the store",
        )
