"""Installable into a team's environment (issue 36): a fresh virtual environment outside the repository, `tracking`
installed from this checkout's path as docs/library.md says, then the own-script example run end to end in a
project that follows docs/library.md alone (no `.gitignore` of ours): its first run is not dirty.

The install takes the versions of uv.lock (`uv export`), which uv's cache holds after `make venv`: a few seconds,
and no download but PyPI's index pages."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import BIN, REPO, run

EXAMPLE = REPO / "examples" / "own-train-script"


@pytest.mark.slow
def test_install_into_a_fresh_venv_then_the_own_script_example_runs_clean(tmp_path: Path):
    venv, team = tmp_path / "team-venv", tmp_path / "team"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "MLFLOW_TRACKING_URI", "DVC_ROOT")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH'].replace(str(BIN) + os.pathsep, '')}"
    env.update(
        {"GIT_AUTHOR_NAME": "t", "GIT_COMMITTER_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_EMAIL": "t@t"}
    )
    uv = str(BIN / "uv")
    locked = tmp_path / "locked.txt"
    run([uv, "venv", "-q", "--python", str(BIN / "python"), str(venv)], tmp_path, env)
    run(
        [uv, "export", "-q", "--frozen", "--no-dev", "--extra", "cpu", "--no-emit-project", "-o", str(locked)],
        REPO,
        env,
    )
    run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin/python"), "-c", str(locked), f"{REPO}[cpu]"],
        tmp_path,
        env,
    )
    where = run([str(venv / "bin/python"), "-c", "import tracking; print(tracking.__file__)"], tmp_path, env).stdout
    assert where.startswith(str(venv)), where  # the installed copy, not this checkout

    shutil.copytree(EXAMPLE, team, ignore=shutil.ignore_patterns(".gitignore"))
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "config", "core.analytics", "false"]):
        run(cmd, team, env)
    run(["git", "add", "-A"], team, env)
    run(["git", "commit", "-qm", "the team's project"], team, env)
    done = run(["dvc", "repro"], team, env)
    assert "so that the MLflow store does not make runs dirty" in done.stderr
    assert json.loads((team / "metrics.json").read_text())["test_accuracy"] > 0
    with sqlite3.connect(team / "mlflow.db") as db:
        ((status, dirty),) = db.execute(
            "SELECT status, value FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid WHERE key = 'prov.git.dirty'"
        ).fetchall()
    assert (status, dirty) == ("FINISHED", "false")
    status = run(["git", "status", "--porcelain", "--untracked-files=all"], team, env).stdout
    assert not [line for line in status.splitlines() if "mlflow" in line or "mlartifacts" in line], status
