"""Bands and group comparisons over real MLflow runs in a SQLite store, checked against scipy."""

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from tracking.errors import NoiseError, RunSelectionError, TrackingError
from tracking.noise.groups import bands, compare_groups

SAME_SEED = [0.951, 0.952, 0.950, 0.951, 0.953]
NEW_SEEDS = [0.940, 0.962, 0.948, 0.958, 0.935, 0.955]


@pytest.fixture
def store(tmp_dir, monkeypatch):
    """A project folder whose MLflow store holds two groups of runs and one run without metrics."""
    import mlflow
    from mlflow.tracking import MlflowClient

    (tmp_dir / ".dvc").mkdir()
    uri = f"sqlite:///{tmp_dir / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    client = MlflowClient()
    experiment = client.create_experiment("groups")
    for group, values in (("same", SAME_SEED), ("new", NEW_SEEDS)):
        for value in values:
            run = client.create_run(experiment, tags={"group": group})
            client.log_metric(run.info.run_id, "test_accuracy", value)
            client.set_terminated(run.info.run_id)
    client.create_run(experiment, tags={"group": "same"})
    return tmp_dir


def test_bands_over_runs_match_numpy_and_count_skipped(store):
    result = bands("groups", "tags.group = 'same'", ["test_accuracy"], alpha=0.05)["test_accuracy"]
    assert result["n"] == 5 and result["skipped_runs"] == 1 and result["ddof"] == 1
    assert result["mean"] == pytest.approx(np.mean(SAME_SEED)) and result["std"] == pytest.approx(
        np.std(SAME_SEED, ddof=1)
    )


def test_compare_groups_matches_scipy():
    result = compare_groups(SAME_SEED, NEW_SEEDS, alpha=0.05)
    welch = stats.ttest_ind(SAME_SEED, NEW_SEEDS, equal_var=False)
    levene = stats.levene(SAME_SEED, NEW_SEEDS, center="median")
    assert result["welch_p"] == pytest.approx(welch.pvalue) and result["brown_forsythe_p"] == pytest.approx(
        levene.pvalue
    )
    assert result["std_ratio_a_over_b"] == pytest.approx(np.std(SAME_SEED, ddof=1) / np.std(NEW_SEEDS, ddof=1))
    assert result["spreads_differ"] is True and result["means_differ"] is False
    assert "spreads differ" in result["verdict"]


def test_errors(store):
    with pytest.raises(NoiseError, match="at least 2"):
        compare_groups([0.9], [0.9, 0.8], alpha=0.05)
    with pytest.raises(RunSelectionError, match="no runs in MLflow experiment 'groups' match filter"):
        bands("groups", "tags.group = 'none'", ["test_accuracy"], alpha=0.05)
    with pytest.raises(TrackingError, match="experiment 'nope' not found"):
        bands("nope", "", ["test_accuracy"], alpha=0.05)
    with pytest.raises(TrackingError, match="rejected by MLflow"):
        bands("groups", "tags.group === 'x'", ["test_accuracy"], alpha=0.05)


def test_command_line(store):
    tracking = [sys.executable, "-m", "tracking"]
    done = subprocess.run(
        [*tracking, "bands", "--experiment", "groups", "--metric", "test_accuracy"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["test_accuracy"]["n"] == 11
    done = subprocess.run(
        [
            *tracking,
            "compare-groups",
            "--experiment",
            "groups",
            "--a",
            "tags.group = 'same'",
            "--b",
            "tags.group = 'new'",
            "--metric",
            "test_accuracy",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["test_accuracy"]["skipped_a"] == 1
    done = subprocess.run(
        [*tracking, "bands", "--experiment", "groups", "--filter", "nonsense ==="], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.startswith("error: filter")
