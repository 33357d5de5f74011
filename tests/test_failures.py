"""What users can get wrong, and crashes: one line and exit 2, or an honest FAILED/KILLED run, never RUNNING."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import project_env, run, runs_of, write_params

pytestmark = pytest.mark.slow


def stage(root: Path, name: str, **env: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", f"pipelines.{name}"], root, env=project_env(**env), check=False)


def assert_user_error(done: subprocess.CompletedProcess, *expected: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[-1].startswith("error: ") and all(text in lines[-1] for text in expected), lines


def assert_none_running(root: Path) -> None:
    assert [r.info.status for r in runs_of(root) if r.info.status == "RUNNING"] == []


def test_unknown_param_key_stops_before_any_run(project):
    write_params(project, train={"lerning_rate": 0.1})
    done = stage(project, "train")
    assert_user_error(done, "unknown key 'train.lerning_rate'", "did you mean 'train.learning_rate'?")
    assert runs_of(project) == []


def test_bad_value_through_dvc_repro(project):
    write_params(project, train={"epochs": 0})
    done = run(["dvc", "repro"], project, check=False)
    assert done.returncode != 0
    assert "error: params.yaml: train.epochs: expected greater than or equal to 1, got 0" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_missing_data_file(project):
    write_params(project, data={"source": "data/mine.npz"})
    assert_user_error(stage(project, "data"), "data.source: file 'data/mine.npz' not found", "dvc pull")
    assert not (project / "data/prepared").exists()


def test_pinned_data_that_grew_is_caught_by_dvc_repro(project):
    rng = np.random.default_rng(1)
    (project / "data").mkdir()
    x, y = rng.random((200, 8, 8), dtype="float32"), np.arange(200) % 10
    np.savez(project / "data/mine.npz", x=x, y=y)
    write_params(project, data={"source": "data/mine.npz"})
    run(["dvc", "repro", "prepare"], project)
    pinned = run([sys.executable, "-m", "tracking", "pin-data"], project)
    assert "pinned data.sha256" in pinned.stdout
    old_hash = json.loads((project / "data/prepared/manifest.json").read_text())["content_sha256"]
    np.savez(project / "data/mine.npz", x=np.concatenate([x, x[:20]]), y=np.concatenate([y, y[:20]]))
    done = run(["dvc", "repro", "prepare"], project, check=False)
    assert done.returncode != 0
    line = next(line for line in done.stderr.splitlines() if line.startswith("error: "))
    assert old_hash in line and "samples 200 -> 220 (+20)" in line and "class 0 20 -> 22 (+2)" in line
    assert "tracking pin-data" in line


def test_not_a_dvc_project(tmp_path):
    (tmp_path / "params.yaml").write_text("train:\n  epochs: 1\n")
    assert_user_error(stage(tmp_path, "data"), "not inside a DVC project", "dvc init")


def test_dvc_project_without_git_fails_before_training(project):
    run(["dvc", "repro", "prepare"], project)
    subprocess.run(["rm", "-rf", str(project / ".git")], check=True)
    assert_user_error(stage(project, "train"), "is not inside a git repository", "git init")
    assert runs_of(project) == []


def test_unreachable_tracking_server_fails_fast(project):
    run(["dvc", "repro", "prepare"], project)
    started = time.monotonic()
    done = stage(project, "train", MLFLOW_TRACKING_URI="http://127.0.0.1:9")
    assert_user_error(done, "MLflow tracking store http://127.0.0.1:9 cannot be reached", "MLFLOW_TRACKING_URI")
    assert time.monotonic() - started < 60
    assert not (project / "outputs/model.keras").exists()


def test_evaluate_before_train(project):
    run(["dvc", "repro", "prepare"], project)
    assert_user_error(stage(project, "evaluate"), "outputs/run.json not found", "dvc repro train")


def test_evaluate_with_unknown_run_id(project):
    run(["dvc", "repro", "prepare"], project)
    (project / "outputs").mkdir()
    (project / "outputs/run.json").write_text(json.dumps({"run_id": "0" * 32}))
    (project / "outputs/model.keras").write_bytes(b"not reached: the run id is checked first")
    assert_user_error(stage(project, "evaluate"), f"MLflow run {'0' * 32}", "dvc repro -f train")
    assert_none_running(project)
