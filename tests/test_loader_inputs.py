"""What a loader reads is a dependency: a `dvc add`-ed folder of shards read by a team's loader, on the user's path
(`dvc repro`, `dvc add`, `dvc status`, `tracking rerun`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_project, project_env, recorded, run, runs_of, write_params
from test_user_model_pipeline import add_deps

pytestmark = pytest.mark.slow

LOADER = '''\
from pathlib import Path

import numpy as np
import tensorflow as tf  # as a loader of tf.data or tf.io often does: imported under the stage's settings


def load(folder):
    """Every shard of `folder`, in name order, as one data set (digits-like: 8x8 images, 10 classes)."""
    shards = [np.load(path) for path in sorted(Path(folder).glob("*.npz"))]
    return {"x": np.concatenate([s["x"] for s in shards]), "y": np.concatenate([s["y"] for s in shards])}
'''


def write_shard(root: Path, name: str, start: int) -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    rows = slice(start, start + 300)
    np.savez(root / "shards" / name, x=(digits.images[rows] / 16).astype("float32")[..., None], y=digits.target[rows])


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose loader reads `shards/` (one shard, `dvc add`-ed), trained once with `dvc repro evaluate`."""
    root = make_project(tmp_path_factory.mktemp("sharded") / "project")
    (root / "shards").mkdir()
    write_shard(root, "a.npz", 0)
    (root / "team_data.py").write_text(LOADER)
    run(["dvc", "add", "-q", "shards"], root)
    write_params(root, data={"source": None, "loader": "team_data:load", "kwargs": {"folder": "shards"}})
    add_deps(root, "team_data.py", "prepare")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "our loader and its shards"], root)
    return root


def stage_error(done) -> str:
    """The one `error:` line a stage printed under `dvc repro` (DVC adds its own line after it), with no traceback."""
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    return line


def test_a_folder_the_loader_reads_must_be_a_dep_of_prepare(sharded: Path):
    line = stage_error(run(["dvc", "repro", "prepare"], sharded, check=False))
    assert "data.kwargs.folder: shards is not a dependency of stage prepare" in line and "add `- shards`" in line
    assert not (sharded / "data/prepared").exists()


def test_a_new_shard_re_runs_prepare_and_a_rerun_is_judged_on_the_same_data(sharded: Path):
    add_deps(sharded, "shards", "prepare")
    run(["git", "commit", "-qam", "the shards are what prepare reads"], sharded)
    shell = {k: v for k, v in project_env().items() if k not in ("TF_ENABLE_ONEDNN_OPTS", "TF_CPP_MIN_LOG_LEVEL")}
    trained = run(["dvc", "repro", "evaluate"], sharded, env=shell)  # as a user's shell, which sets neither
    assert "oneDNN custom operations are on" not in trained.stderr  # the loader's TensorFlow runs as training's
    run(["git", "add", "-A"], sharded)
    run(["git", "commit", "-qm", "trained"], sharded)
    (original,) = runs_of(sharded)

    write_shard(sharded, "b.npz", 300)
    run(["dvc", "add", "-q", "shards"], sharded)
    status = json.loads(run(["dvc", "status", "--json", "prepare"], sharded).stdout)
    assert {"changed deps": {"shards": "modified"}} in status["prepare"], status

    done = run([sys.executable, "-m", "tracking", "rerun", original.info.run_id], sharded, env=project_env())
    assert "shards (what prepare read) checked out at the logged commit" in done.stdout
    assert "could not be recorded" not in done.stdout + done.stderr
    assert "weights: bit-identical" in done.stdout
    new = next(found for found in runs_of(sharded) if found.data.tags.get("rerun_of") == original.info.run_id)
    shards = [recorded(sharded, found.info.run_id)["prov.dvc.deps.prepare.shards"] for found in (original, new)]
    assert shards[0].endswith(".dir") and shards[1] == shards[0]


def test_a_declared_input_must_exist(sharded: Path):
    write_params(sharded, data={"inputs": ["labels/extra.csv"]})
    try:
        done = run(["dvc", "repro", "prepare"], sharded, check=False)
    finally:
        run(["git", "checkout", "--", "params.yaml"], sharded)
    assert "data.inputs: 'labels/extra.csv' does not exist in the project" in stage_error(done)
