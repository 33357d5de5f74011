"""Free space checked before training: a project on a nearly full disk (a real small file system, a tmpfs) is
refused in one line before any run opens, and the user's own git still works there."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_user_error, make_project, run

from tracking.env import TRACKING_FREE_SPACE_MB
from tracking.errors import SettingError
from tracking.training.space import MARGIN_BYTES

DISK_MB = 64
FREE_MB = 8  # left free once the project is prepared: less than one training's margin


@pytest.fixture
def small_disk(tmp_path: Path):
    """A tmpfs of `DISK_MB` MiB at `tmp_path/disk` (mounting needs root: skipped elsewhere, saying so)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def test_a_training_on_a_nearly_full_disk_is_refused_in_one_line_before_it_trains(small_disk: Path):
    """The train stage, then the calibrate stage, on a disk left 8 MiB free."""
    project = make_project(small_disk / "project")
    run([sys.executable, "-m", "pipelines.prepare"], project)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    with open(small_disk / "ballast", "wb") as ballast:  # what else fills the disk
        ballast.truncate(0)
        ballast.write(b"\0" * (free - FREE_MB * 2**20))
    assert FREE_MB * 2**20 < MARGIN_BYTES

    done = run([sys.executable, "-m", "pipelines.train"], project, check=False)
    assert_user_error(
        done,
        "not enough free space for this training on the disk holding",
        f"{project / '.git'} (the working tree's snapshot)",
        f"{project / 'outputs'} (the model)",
        "(the MLflow store's copy of the model)",
        f"about {MARGIN_BYTES / 2**20:.1f} MiB needed",  # before the model is built: the margin and the snapshot
        "free space on that disk",
    )
    assert float(re.search(r"needed, ([\d.]+) MiB free", done.stderr)[1]) <= FREE_MB, done.stderr
    assert done.stderr.count("error:") == 1 and "epoch" not in done.stderr.lower(), done.stderr
    assert not (project / "outputs/model.keras").exists()
    with sqlite3.connect(project / "mlflow.db") as store:  # found usable and made, then no run opened in it
        assert store.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
    assert run(["git", "status", "--short"], project).returncode == 0
    calibrated = run([sys.executable, "-m", "pipelines.calibrate"], project, check=False)
    assert_user_error(calibrated, "not enough free space for this training on the disk holding", "MiB needed")
    assert calibrated.stderr.count("error:") == 1 and not (project / "calibration/repeats").exists()


def test_writes_on_one_disk_are_counted_together_with_one_margin(small_disk: Path, monkeypatch: pytest.MonkeyPatch):
    """The model's bytes (its weights, times the optimizer's share) and every folder on one disk count together."""
    from types import SimpleNamespace

    import numpy as np

    from tracking.errors import DiskSpaceError
    from tracking.training.space import MODEL_FILE_FACTOR, Write, check_free_space, model_bytes

    # What `model_bytes` reads of a Keras model: its variables' shapes and dtypes.
    model = SimpleNamespace(weights=[np.zeros((256, 256), np.float32), np.zeros(256, np.float16)])
    assert model_bytes(model) == MODEL_FILE_FACTOR * (256 * 256 * 4 + 256 * 2)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    half = (free - MARGIN_BYTES) // 2
    check_free_space([Write(small_disk / "outputs", "the model", half), Write(small_disk, "the snapshot", half)])
    with pytest.raises(DiskSpaceError, match=r"outputs \(the model\), .* \(the snapshot\): about 64\.0 MiB needed"):
        check_free_space(
            [Write(small_disk / "outputs", "the model", half + 1), Write(small_disk, "the snapshot", half)]
        )
    monkeypatch.setenv(TRACKING_FREE_SPACE_MB, "0")  # the margin a user on a small disk may lower
    check_free_space([Write(small_disk / "outputs", "the model", half * 2)])
    monkeypatch.setenv(TRACKING_FREE_SPACE_MB, "lots")
    with pytest.raises(SettingError, match="TRACKING_FREE_SPACE_MB='lots' is not a number of MiB"):
        check_free_space([Write(small_disk, "the model", 0)])
