"""A clone's first `dvc repro`: on another machine it says why its weights differ from the committed ones; where they
do not, it leaves `git status` clean."""

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import calibration_link, run, train_run_id

OTHER_CPU = "GenuineIntel family 6 model 143 stepping 8"


@pytest.fixture(scope="module")
def retrained(calibrated: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The committed results as another machine left them (its CPU id and L2 cache in reports/trained_on.json, its
    weights in metrics/train.json), then `dvc repro train` here: what it printed, and both machines' facts."""
    root = tmp_path_factory.mktemp("fresh_clone") / "project"
    shutil.copytree(calibrated, root, symlinks=True)
    record = json.loads((root / "reports/trained_on.json").read_text())
    here = dict(record["cpu"])
    record["cpu"].update(id=OTHER_CPU, cache={**record["cpu"]["cache"], "l2": "2048K"})
    (root / "reports/trained_on.json").write_text(json.dumps(record))
    metrics = json.loads((root / "metrics/train.json").read_text())
    (root / "metrics/train.json").write_text(json.dumps({**metrics, "weights_sha256": "0" * 64}))
    run(["git", "add", "-f", "reports/trained_on.json", "metrics/train.json"], root)
    run(["git", "commit", "-qm", "results of another machine"], root)
    return {"done": run(["dvc", "repro", "train"], root), "here": here, "weights": metrics["weights_sha256"]}


@pytest.mark.slow
def test_the_first_training_on_another_machine_names_what_differs_from_the_committed_one(retrained: dict):
    """One warning naming both machines' facts and how to make this machine's results the reference."""
    here = retrained["here"]
    (warning,) = [line for line in retrained["done"].stderr.splitlines() if "differ from the committed" in line]
    assert warning.startswith(f"warning: weights sha256 {retrained['weights'][:16]}... differ from the committed")
    assert "trained from the same params, data and code on another machine" in warning, warning
    assert f"cpu id {OTHER_CPU} -> {here['id']}" in warning, warning
    if here["cache"].get("l2") != "2048K":
        assert f"cpu cache l2 2048K -> {here['cache'].get('l2')}" in warning, warning
    assert "commit dvc.lock, metrics/ and reports/trained_on.json" in warning, warning


@pytest.mark.slow
def test_the_train_stage_says_its_start_up_when_training_starts_then_each_epoch(retrained: dict):
    """The start-up line was said after the stage's work, and nothing showed while it trained."""
    lines = retrained["done"].stderr.splitlines()
    epochs = [index for index, line in enumerate(lines) if re.match(r"epoch 1/1: accuracy [-0-9.e]+, loss ", line)]
    (start,) = [
        index
        for index, line in enumerate(lines)
        if re.match(r"train: started in [0-9.]+ s \(.*, first step [0-9.]+ s\)$", line)
    ]
    assert len(epochs) == 1 and start < epochs[0], lines  # the calibrated baseline trains one epoch
    assert re.fullmatch(r"epoch 1/1: accuracy .*, val_loss [-0-9.e]+ \(\d+\.\d s\)", lines[epochs[0]]), lines


@pytest.mark.parametrize("rerun_of", ["", "0123abcd"])
def test_a_rerun_leaves_the_weights_to_its_own_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, rerun_of: str
):
    """`tracking rerun` trains the original run's commit, whose committed weights were this one's: the warning
    showed in the middle of its steps, though the rerun's report ends with the weights against the original's."""
    import git

    from tracking.env import TRACKING_RERUN_OF
    from tracking.provenance.reference import say_why_weights_differ

    repo = git.Repo.init(tmp_path)
    trained = {"inputs_sha256": "1" * 64, "cpu": {"id": "here"}, "software": {}}
    for path, found in (("metrics/train.json", {"weights_sha256": "0" * 64}), ("reports/trained_on.json", trained)):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(json.dumps(found))
    repo.index.add(["metrics/train.json", "reports/trained_on.json"])
    repo.index.commit("results")
    monkeypatch.setenv(TRACKING_RERUN_OF, rerun_of)
    say_why_weights_differ(repo, tmp_path, trained, "f" * 64)
    warned = [record.getMessage() for record in caplog.records if "differ from the committed" in record.getMessage()]
    assert len(warned) == (0 if rerun_of else 1), warned


@pytest.mark.slow
def test_a_clone_that_trains_the_committed_weights_leaves_git_status_clean(calibrated: Path, tmp_path: Path):
    """Issue 50: a fresh clone's `dvc repro` rewrote dvc.lock though it trained the committed weights bit for bit:
    outputs/run.json named the clone's MLflow run and store, calibration/noise.json its runs, their processes and
    which repeats were reused. The whole pipeline committed, then cloned (no DVC cache, its own store): the clone
    trains every stage again and leaves `git status` clean, its own runs linked in its git-ignored `.tracking/`."""
    project = tmp_path / "project"
    shutil.copytree(calibrated, project, symlinks=True)
    run(["dvc", "repro"], project)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "the pipeline's results"], project)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    done = run(["dvc", "repro"], clone)
    for stage in ("prepare", "train", "evaluate", "calibrate", "compare"):
        assert f"Running stage '{stage}'" in done.stdout, done.stdout
    assert "(3 trained with the local executor, 0 reused)" in done.stdout, done.stdout
    assert run(["git", "status", "--porcelain", "--untracked-files=all"], clone).stdout == ""
    assert train_run_id(clone) != train_run_id(project)
    assert calibration_link(clone)["parent_run_id"] != calibration_link(project)["parent_run_id"]


def test_weights_trained_bit_for_bit_on_another_machine_keep_the_committed_machine_record(tmp_path: Path):
    """reports/trained_on.json names the machine that trained the committed weights: another machine training the
    same weights from the same inputs leaves it as committed; other weights, or other inputs, are this machine's."""
    import git

    from tracking.provenance.reference import trained_on

    repo = git.Repo.init(tmp_path)
    committed = {"inputs_sha256": "1" * 64, "cpu": {"id": OTHER_CPU}, "software": {}}
    for path, found in (("metrics/train.json", {"weights_sha256": "f" * 64}), ("reports/trained_on.json", committed)):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(json.dumps(found))
    repo.index.add(["metrics/train.json", "reports/trained_on.json"])
    repo.index.commit("results")
    here = {"inputs_sha256": "1" * 64, "cpu": {"id": "here"}, "software": {}}
    assert trained_on(repo, tmp_path, here, "f" * 64) == committed
    assert trained_on(repo, tmp_path, here, "0" * 64) == here
    assert trained_on(repo, tmp_path, {**here, "inputs_sha256": "2" * 64}, "f" * 64)["inputs_sha256"] == "2" * 64
