"""User errors that need more than one command to set up (a pin that a grown file breaks, an unreachable server).

The single-command catalogue is tests/test_bad_inputs.py; crashes and signals are tests/test_run_lifecycle.py.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import project_env, run, write_params

pytestmark = pytest.mark.slow


def stage(root: Path, name: str, **env: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", f"pipelines.{name}"], root, env=project_env(**env), check=False)


def assert_user_error(done: subprocess.CompletedProcess, *expected: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[-1].startswith("error: ") and all(text in lines[-1] for text in expected), lines


def test_pinned_data_that_grew_is_caught_by_dvc_repro(project):
    rng = np.random.default_rng(1)
    x, y = rng.random((200, 8, 8), dtype="float32"), np.arange(200) % 10
    np.savez(project / "data/raw/mine.npz", x=x, y=y)
    write_params(project, data={"source": "data/raw/mine.npz"})
    run(["dvc", "repro", "prepare"], project)
    pinned = run([sys.executable, "-m", "tracking", "pin-data"], project)
    assert "pinned data.sha256" in pinned.stdout
    old_hash = json.loads((project / "data/prepared/manifest.json").read_text())["content_sha256"]
    np.savez(project / "data/raw/mine.npz", x=np.concatenate([x, x[:20]]), y=np.concatenate([y, y[:20]]))
    done = run(["dvc", "repro", "prepare"], project, check=False)
    assert done.returncode != 0
    line = next(line for line in done.stderr.splitlines() if line.startswith("error: "))
    assert old_hash in line and "samples 200 -> 220 (+20)" in line and "class 0 20 -> 22 (+2)" in line
    assert "tracking pin-data" in line


def test_unreachable_tracking_server_fails_fast(project):
    run(["dvc", "repro", "prepare"], project)
    started = time.monotonic()
    done = stage(project, "train", MLFLOW_TRACKING_URI="http://127.0.0.1:9")
    assert_user_error(done, "MLflow tracking store http://127.0.0.1:9 cannot be reached", "MLFLOW_TRACKING_URI")
    assert time.monotonic() - started < 60
    assert not (project / "outputs/model.keras").exists()