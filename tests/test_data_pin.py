"""A pinned data set whose DVC-tracked file grows: `dvc repro` stops at prepare and names the changes.

Single-command user errors are catalogued in tests/test_bad_inputs.py; crashes and signals are in
tests/test_run_lifecycle.py.
"""

import json
import sys

import numpy as np
import pytest
from conftest import run, write_params

pytestmark = pytest.mark.slow


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
