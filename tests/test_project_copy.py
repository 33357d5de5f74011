"""A project copied or moved as the examples' READMEs copy one (`cp -r`) logs into its own `mlartifacts/`.

A SQLite store records where each experiment keeps its artifacts as an absolute path; the copy's store still
named the original's folder, so the copy's runs wrote their models and provenance into the original project.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import make_project

from tracking.store.location import connect


def log_a_run(root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real MLflow run of the project's store with one artifact, as a stage of `root` logs it; its artifact URI."""
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # set by the last connect: a stage starts without it
    experiment = connect(root, "test")
    client = MlflowClient()
    run = client.create_run(experiment)
    (root / "note.txt").write_text("x\n")
    client.log_artifact(run.info.run_id, str(root / "note.txt"))
    client.set_terminated(run.info.run_id)
    return client.get_run(run.info.run_id).info.artifact_uri


def test_a_copied_project_logs_into_its_own_mlartifacts_and_its_old_runs_point_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    original = make_project(tmp_path / "cancer")
    first = log_a_run(original, monkeypatch)
    subprocess.run(["cp", "-r", str(original), str(tmp_path / "cancer2")], check=True)
    copy = tmp_path / "cancer2"
    before = sorted(path.relative_to(original) for path in (original / "mlartifacts").rglob("*"))

    second = log_a_run(copy, monkeypatch)
    assert second.startswith((copy / "mlartifacts").as_uri() + "/"), second
    assert sorted(path.relative_to(original) for path in (original / "mlartifacts").rglob("*")) == before
    assert len(list((copy / "mlartifacts").rglob("note.txt"))) == 2, "the copied run's artifacts and the new one's"

    from mlflow.tracking import MlflowClient

    experiment = MlflowClient().get_experiment_by_name("test")
    assert experiment.artifact_location == (copy / "mlartifacts").as_uri()
    old = [run.info.artifact_uri for run in MlflowClient().search_runs([experiment.experiment_id])]
    assert first.replace(original.as_uri(), copy.as_uri()) in old, "the copied run reads its copied artifacts"
    log_a_run(original, monkeypatch)  # the original, used again, is left as it was: nothing to re-home
    assert MlflowClient().get_experiment_by_name("test").artifact_location == (original / "mlartifacts").as_uri()
