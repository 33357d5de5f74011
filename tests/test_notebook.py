"""`tracking.start` in a Jupyter notebook, run by a real kernel through nbclient: on the kernel `tracking kernel
install` makes, a notebook that imports Keras first trains twice to bit-identical weights, each run FINISHED with
the hash seed it asked for; on a plain kernel it is refused with one line naming that kernel. A notebook's DVC stage
(`jupyter execute`) is calibrated and its candidate judged as a script's: each repeat's kernel starts with that
repeat's hash seed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import assert_user_error, client_for, project_env, run, write_params

from tracking.names import NOTEBOOK_COMMAND
from tracking.noise.run_name import LABELS, judged_name

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
    optimizer = keras.optimizers.Adam(run.params.flat["train.learning_rate"])
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    run.log_data(x, y)
    history = model.fit(x, y, epochs=2, batch_size=16, callbacks=[run.callback()], verbose=0)
    run.log_metrics({"final_loss": history.history["loss"][-1]})
    run.log_model(model)""",
]


def _project(folder: Path, notebook: str = "") -> Path:
    """A team's git + DVC project; with `notebook`, that notebook of CELLS committed and run by a `jupyter execute`
    stage named train."""
    folder.mkdir()
    (folder / "params.yaml").write_text("train:\n  seed: 7\n  learning_rate: 0.01\n")
    (folder / ".gitignore").write_text("mlflow.db*\nmlartifacts/\n.tracking/\n" + ("" if notebook else "*.ipynb\n"))
    if notebook:
        nbformat.write(_notebook(), folder / notebook)
        (folder / "dvc.yaml").write_text(
            f"stages:\n  train:\n    cmd: jupyter execute {notebook} --kernel_name=tracking\n"
            f"    deps: [{notebook}]\n    params: [train]\n"
        )
    for cmd in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "team's project"],
    ):
        run(cmd, folder)
    return folder


def _notebook(cells: list[str] = CELLS):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])


def _execute(folder: Path, kernel: str, cells: list[str] = CELLS) -> None:
    client = nbclient.NotebookClient(
        _notebook(cells), kernel_name=kernel, timeout=300, resources={"metadata": {"path": str(folder)}}
    )
    client.execute(env=project_env())


def _install_kernel(team: Path, prefix: Path) -> str:
    """Install the project's kernel under `prefix`; return the JUPYTER_PATH that finds it."""
    installed = run(
        [sys.executable, "-m", "tracking", "kernel", "install", "--seeds", "base=train.seed", "--prefix", str(prefix)],
        team,
    )
    assert "installed kernel 'tracking'" in installed.stdout
    return str(prefix / "share/jupyter")


def test_a_notebook_on_the_projects_kernel_runs_reproducibly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    team = _project(tmp_path / "team")
    prefix = tmp_path / "jupyter"
    monkeypatch.setenv("JUPYTER_PATH", _install_kernel(team, prefix))
    spec = json.loads((prefix / "share/jupyter/kernels/tracking/kernel.json").read_text())
    assert spec["argv"][:3] == [sys.executable, "-m", "tracking.script.kernel"]
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


def test_the_projects_kernel_after_a_change_of_the_seeds_is_told_to_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Issue 67: on the project's own kernel, the advice was to install that kernel."""
    team = _project(tmp_path / "team")
    monkeypatch.setenv("JUPYTER_PATH", _install_kernel(team, tmp_path / "jupyter"))
    changed = "from pathlib import Path\nPath('params.yaml').write_text('train:\\n  seed: 8\\n')"
    with pytest.raises(nbclient.exceptions.CellExecutionError) as raised:
        _execute(team, "tracking", [CELLS[0], changed, CELLS[1]])
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(raised.value))  # IPython colours its traceback
    (said,) = [line for line in plain.splitlines() if line.startswith("UsageError: ")]
    assert "restart the kernel" in said and "tracking kernel install" not in said, said


def test_a_notebook_stage_is_calibrated_and_its_candidate_judged(tmp_path: Path):
    """Issue 67: the first ALGO repeat failed (its kernel started with params.yaml's hash seed, the repeat asked for
    another) and advised installing the kernel it ran on, so a notebook's lr/100 run got no verdict."""
    team = _project(tmp_path / "team", notebook="train.ipynb")
    env = project_env(JUPYTER_PATH=_install_kernel(team, tmp_path / "jupyter"))
    out = run(["tracking", "calibrate", "--repeats", "3", "--variants", "algo"], team, env=env).stdout
    assert "algo: 3 runs, 3 distinct weights; final_loss" in out, out
    client = client_for(team)
    experiment = client.get_experiment_by_name("team").experiment_id
    repeats = client.search_runs([experiment], "tags.`noise.variant` = 'algo'")
    hashes = {found.data.tags["prov.seeds.hash"] for found in repeats}
    (parent,) = client.search_runs([experiment], "tags.`noise.role` = 'calibration'")
    assert "calibration/band.png" in [item.path for item in client.list_artifacts(parent.info.run_id, "calibration")]
    assert len(hashes) == 3 and all(found.info.status == "FINISHED" for found in repeats)
    write_params(team, train={"learning_rate": 0.0001})  # the candidate: lr/100
    run(["jupyter", "execute", "train.ipynb", "--kernel_name=tracking"], team, env=env)
    (candidate,) = [
        found
        for found in client.search_runs([experiment])
        if not found.data.tags.get("noise.variant") and found.data.tags.get("noise.role") != "calibration"
    ]
    judged = run(["tracking", "judge", candidate.info.run_id, "--metric", "final_loss"], team, env=env).stdout
    verdict = judged.splitlines()[-1].removeprefix("verdict: ")
    assert verdict in ("exceeds_noise", "within_noise", "within_tolerance", "inconclusive"), judged
    named = client.get_run(candidate.info.run_id)
    assert named.data.tags["noise.verdict"] == verdict  # and in front of its name, which MLflow's run list shows
    assert named.info.run_name == judged_name(candidate.info.run_name, verdict, {"train.learning_rate": "0.0001"})
    assert named.info.run_name.startswith(f"{LABELS[verdict]} lr=0.0")  # in view in the run list's name cell
