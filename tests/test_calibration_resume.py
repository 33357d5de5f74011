"""A calibration stopped with Ctrl-C mid-way resumes with the repeats it lacks (the local executor, as `make run`
calibrates); the same on a Ray cluster is tests/test_cluster_nodes.py's, in `make test-cluster`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import calibration_record, make_project, project_env, run, write_params

from tracking.config.baseline import freeze
from tracking.layout import REPEATS_DIR
from tracking.whole_file import PARTIAL_SUFFIX

pytestmark = pytest.mark.slow


def test_an_interrupted_calibration_resumes_with_the_repeats_it_lacks(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    write_params(project, train={"epochs": 3}, calibration={"variants": ["algo", "control"], "repeats": 3})
    freeze(project / "params.yaml", project / "baseline.yaml")
    run(["git", "commit", "-qam", "a calibration to stop"], project)

    stage = subprocess.Popen(
        ["dvc", "repro", "calibrate"], cwd=project, env=project_env(), start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    kept = project / REPEATS_DIR
    deadline = time.monotonic() + 300
    while len(list(kept.glob("*.npz"))) < 2 and stage.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(stage.pid, signal.SIGINT)  # Ctrl-C, as a user stops it
    output = stage.communicate(timeout=120)[0]
    reused = len(list(kept.glob("*.npz")))
    assert stage.returncode != 0 and reused >= 2, output
    assert not list(kept.glob(f"*{PARTIAL_SUFFIX}"))

    resumed = run(["dvc", "repro", "calibrate"], project)
    printed = resumed.stdout + resumed.stderr
    assert f"{reused} of 6 repeats kept from earlier calibrations are reused" in printed
    assert f"({6 - reused} trained with the local executor, {reused} reused)" in printed
    record = calibration_record(project)
    assert len(record["reused"]) == reused and sum(found["reused"] for found in record["runs"]) == reused
    assert record["variants"]["control"]["bit_identical"]
