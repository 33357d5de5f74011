"""`tracking.start` in a Jupyter notebook, run by a real kernel through nbclient: on the kernel `tracking kernel
install` makes, a notebook that imports Keras first trains twice to bit-identical weights, each run FINISHED with
the hash seed it asked for; on a plain kernel it is refused with one line naming that kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import assert_user_error, client_for, project_env, run

from tracking.names import NOTEBOOK_COMMAND

pytestmark = pytest.mark.slow

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

# The notebook's cells: Keras imported first, as notebooks do; then the run, in a `with` block.
CELLS = [
    "import keras\nimport numpy as np\nimport tracking",
    """with tracking.start(seeds={"base": "train.seed"}) as run:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype("float32"), rng.integers(0, 2, size=64)
    model = run.seeded(keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                         keras.layers.Dropout(0.3), keras.layers.Dense(2, activation="softmax")]))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    run.log_data(x, y)
    history = model.fit(x, y, epochs=2, batch_size=16, callbacks=[run.callback()], verbose=0)
    run.log_metrics({"final_loss": history.history["loss"][-1]})
    run.log_model(model)""",
]


def _project(folder: Path) -> Path:
    folder.mkdir()
    (folder / "params.yaml").write_text("train:\n  seed: 7\n")
    (folder / ".gitignore").write_text("mlflow.db*\nmlartifacts/\n.tracking/\n*.ipynb\n")
    for cmd in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "team's project"],
    ):
        run(cmd, folder)
    return folder


def _execute(folder: Path, kernel: str) -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = nbclient.NotebookClient(
        notebook, kernel_name=kernel, timeout=300, resources={"metadata": {"path": str(folder)}}
    )
    client.execute(env=project_env())


def test_a_notebook_on_the_projects_kernel_runs_reproducibly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    team = _project(tmp_path / "team")
    prefix = tmp_path / "jupyter"
    installed = run(
        [sys.executable, "-m", "tracking", "kernel", "install", "--seeds", "base=train.seed", "--prefix", str(prefix)],
        team,
    )
    assert "installed kernel 'tracking'" in installed.stdout
    spec = json.loads((prefix / "share/jupyter/kernels/tracking/kernel.json").read_text())
    assert spec["argv"][:3] == [sys.executable, "-m", "tracking.script.kernel"]
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share/jupyter"))
    _execute(team, "tracking")
    _execute(team, "tracking")
    client = client_for(team)
    found = client.search_runs([client.get_experiment_by_name("team").experiment_id])
    assert [one.info.status for one in found] == ["FINISHED", "FINISHED"]
    first, second = (one.data.tags for one in found)
    assert first["prov.weights_sha256"] == second["prov.weights_sha256"]
    assert first["prov.seeds.base"] == "7" and first["prov.seeds.hash"] == second["prov.seeds.hash"]
    assert first["prov.model.seeded_weights"] == "2"
    # A kernel's arguments name its connection file: re-run as a command, it waited for a client for ever.
    assert first["prov.script.command"] == NOTEBOOK_COMMAND
    rerun = run(["tracking", "rerun", found[0].info.run_id], team, check=False, timeout=120)
    assert_user_error(rerun, "was made in a Jupyter notebook", "jupyter execute --kernel_name=tracking")


def test_a_notebook_on_a_plain_kernel_is_told_which_kernel_to_use(tmp_path: Path):
    team = _project(tmp_path / "team")
    with pytest.raises(nbclient.exceptions.CellExecutionError) as raised:
        _execute(team, "python3")
    assert "tracking kernel install --seeds base=" in str(raised.value)
