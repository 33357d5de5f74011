"""`tracking rerun`: a real logged run re-created in a temporary worktree gives bit-identical weights."""

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, add_deps, assert_user_error, client_for, project_env, recorded, run, runs_of, write_params
from dvc.utils.serialize import parse_yaml as dvc_parse_yaml

from tracking.errors import RerunError
from tracking.inspect.restore import params_step, write_logged_params
from tracking.inspect.worktree import apply_diff
from tracking.layout import MODEL_STAGES

_NOT_THE_TREE = ("mlflow.db", "mlartifacts", ".git", ".dvc/tmp")


def rerun(root: Path, ref: str):
    return run([sys.executable, "-m", "tracking", "rerun", ref], root, env=project_env(), check=False)


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the user's tree (DVC cache and outputs included) with its content hash; not the store."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.relative_to(root).as_posix().startswith(_NOT_THE_TREE)
    }


CODE_SECRET = "ghp_rerunPlantedCodeToken0123456789"
ENV_FILE_SECRET = "ghp_rerunPlantedEnvFileToken0123456"


def leaks(root: Path, secret: str) -> list[str]:
    """The files under `root` but git's own that hold `secret` (the MLflow store and its artifacts included)."""
    done = run(["grep", "-rlaF", "--exclude-dir=.git", secret, str(root)], root, check=False)
    return [name for name in done.stdout.splitlines() if not name.endswith(".py")]


def assert_untouched(root: Path, files: dict[str, str], status: str) -> None:
    assert snapshot(root) == files
    assert run(["git", "status", "--porcelain"], root).stdout == status
    assert len(run(["git", "worktree", "list"], root).stdout.splitlines()) == 1
    assert not list((root / ".git" / "worktrees").glob("*"))


@pytest.mark.slow
def test_rerun_recreates_the_logged_state_with_bit_identical_weights(project: Path, tmp_path: Path):
    """The user's path: a fresh clone of a repo whose pipeline results are committed (as after `make run`), a run
    made there with uncommitted code and params changes, the tree moved on, then the run re-created. The results
    `dvc repro` rewrote (dvc.lock, metrics, plots with CRLF lines) are no part of the logged diff."""
    run(["dvc", "repro", "train"], project)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "results of the pipeline"], project)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    train = clone / "tracking/stages/train.py"
    train.write_text(
        train.read_text().replace('print(f"trained ', 'print(f"trained (uncommitted edit) ')
        + f"\nAPI_TOKEN = {CODE_SECRET!r}  # a secret in uncommitted code, exact in git, nowhere else\n"
    )
    (clone / "team_notes.py").write_text("NOTE = 1\n")
    run(["git", "add", "-N", "team_notes.py"], clone)  # tracked, not committed: in the snapshot too
    (clone / ".env").write_text(f"API_TOKEN={ENV_FILE_SECRET}\n")  # untracked: only counted, in no snapshot
    write_params(clone, train={"learning_rate": 0.002})
    run(["dvc", "repro", "evaluate"], clone)
    changed = {line[3:] for line in run(["git", "status", "--porcelain"], clone).stdout.splitlines()}
    assert {"dvc.lock", "metrics/train.json", "plots/train/history.csv"} <= changed
    assert b"\r\n" in (clone / "plots/train/history.csv").read_bytes()
    (original,) = runs_of(clone)
    record = json.loads(
        Path(
            client_for(clone).download_artifacts(original.info.run_id, "provenance/provenance.json", str(tmp_path))
        ).read_text()
    )
    assert {"dvc.lock", "metrics/train.json", "plots/train/history.csv", "outputs/model.keras"} <= set(
        record["git"]["diff_excludes"]
    )
    assert record["git"]["untracked_files"] == 1
    assert [changed["path"] for changed in record["git"]["changed_files"]] == [
        "params.yaml",
        "team_notes.py",
        "tracking/stages/train.py",
    ]
    snapshot_sha = original.data.tags["prov.git.snapshot"]
    assert run(["git", "show", f"{snapshot_sha}:tracking/stages/train.py"], clone).stdout.count(CODE_SECRET) == 1
    assert run(["git", "for-each-ref", "refs/tracking/"], clone).stdout.split()[-1].endswith(snapshot_sha)
    assert "snapshot" not in run(["git", "status", "--porcelain"], clone).stdout
    assert leaks(clone, CODE_SECRET) == [], "the store, its artifacts and the outputs hold none of the code's text"
    assert leaks(clone, ENV_FILE_SECRET) == [str(clone / ".env")]
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=clone, capture_output=True)
    assert ENV_FILE_SECRET.encode() not in objects.stdout, "no git object holds the untracked file"
    run(["git", "add", "-A"], clone)
    run(["git", "commit", "-qm", "after the run"], clone)
    train.write_text(train.read_text().replace("(uncommitted edit)", "(edited after the run)"))
    write_params(clone, train={"epochs": 3, "learning_rate": 0.003})
    status = run(["git", "status", "--porcelain"], clone).stdout

    # Data missing from the DVC cache: one line naming the hash and the fix; nothing trained, nothing left.
    data_hash = original.data.tags["prov.dvc.deps.train.data/prepared"]
    cached = clone / ".dvc/cache/files/md5" / data_hash[:2] / data_hash[2:]
    aside = cached.rename(cached.with_suffix(".aside"))
    files = snapshot(clone)
    done = rerun(clone, original.info.run_id)
    assert_user_error(done, data_hash, "DVC cache", "dvc pull")
    assert_untouched(clone, files, status)
    assert len(runs_of(clone)) == 1
    aside.rename(cached)

    files = snapshot(clone)
    done = rerun(clone, original.info.run_id)
    assert done.returncode == 0, done.stderr
    assert (
        "the run's uncommitted changes restored (3 file(s): params.yaml, team_notes.py, tracking/stages/train.py)"
        in done.stdout
    )
    assert "trained (uncommitted edit)" in done.stdout and "edited after the run" not in done.stdout
    assert "weights: bit-identical" in done.stdout
    assert_untouched(clone, files, status)

    new = next(found for found in runs_of(clone) if found.info.run_id != original.info.run_id)
    assert new.info.status == "FINISHED" and new.info.experiment_id == original.info.experiment_id
    assert new.data.tags["rerun_of"] == original.info.run_id
    assert new.info.run_name == f"rerun of {original.info.run_name}"  # marked in MLflow's run list (issue 67)
    assert new.data.tags["prov.weights_sha256"] == original.data.tags["prov.weights_sha256"]
    assert new.data.tags["mlflow.source.git.commit"] == original.data.tags["mlflow.source.git.commit"]
    assert new.data.params == original.data.params and new.data.params["train.epochs"] == "2"
    assert new.data.metrics["test_accuracy"] == original.data.metrics["test_accuracy"]
    assert not Path(recorded(clone, new.info.run_id)["prov.environment.DVC_ROOT"]).exists()
    assert leaks(clone, CODE_SECRET) == []

    # SIGTERM mid-rerun (as a scheduler stops it): the worktree and its folder are removed, the stage it ran too.
    temp = tmp_path / "temp"
    temp.mkdir()
    rerunning = subprocess.Popen(
        [sys.executable, "-m", "tracking", "rerun", original.info.run_id], cwd=clone,
        env=project_env(TMPDIR=str(temp)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(temp.glob("tracking-rerun-*/*/dvc.yaml")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(temp.glob("tracking-rerun-*/*/dvc.yaml")), "the worktree was made"
    rerunning.send_signal(signal.SIGTERM)
    output = rerunning.communicate(timeout=120)[0]
    assert rerunning.returncode == 143 and "Traceback" not in output, output
    assert list(temp.glob("tracking-rerun-*")) == []
    assert len(run(["git", "worktree", "list"], clone).stdout.splitlines()) == 1
    assert_untouched(clone, files, status)


BUILDER = """
import keras


def build(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(keras.layers.Flatten()(inputs)))
"""


@pytest.mark.slow
def test_a_run_trained_beside_its_uncommitted_module_is_re_created(project: Path):
    """A team trains before committing its new models/net.py, added with `git add -N`: the run's snapshot holds
    it, so the rerun restores it and trains the same weights (an untracked one would be named in a warning)."""
    (project / "models").mkdir()
    (project / "models/net.py").write_text(BUILDER)
    run(["git", "add", "-N", "models/net.py"], project)
    write_params(project, model={"builder": "models.net:build", "kwargs": {}})
    add_deps(project, "models/net.py", *MODEL_STAGES)
    run(["dvc", "repro", "evaluate"], project)
    (original,) = runs_of(project)
    done = rerun(project, original.info.run_id)
    assert done.returncode == 0, done.stderr
    assert "models/net.py" in done.stdout.split("rerun [2/6] code: ")[1].splitlines()[0]
    assert "weights: bit-identical" in done.stdout


def test_unknown_run_is_one_line_and_exit_2(project: Path):
    unknown = "0123456789abcdef0123456789abcdef"
    done = rerun(project, unknown)
    assert_user_error(done, "no MLflow store", "run the pipeline first")
    assert len(done.stderr.strip().splitlines()) == 1 and not (project / "mlflow.db").exists()
    client_for(project).search_experiments()
    done = rerun(project, unknown)
    assert_user_error(done, unknown, "not found")
    assert len(done.stderr.strip().splitlines()) == 1


def test_params_logged_redacted_are_refused(tmp_path: Path):
    from tracking.inspect.restore import write_logged_params

    logged = {"data.loader": "team_data:load", "data.kwargs.api_token": "<redacted>"}
    with pytest.raises(RerunError, match=r"param\(s\) data\.kwargs\.api_token were logged redacted"):
        write_logged_params(tmp_path / "params.yaml", logged)
    assert not (tmp_path / "params.yaml").exists()


def test_a_diff_with_redacted_secrets_is_refused(tmp_path: Path):
    diff = (
        "diff --git a/settings.py b/settings.py\n--- a/settings.py\n+++ b/settings.py\n@@ -1 +1 @@\n"
        "-api_key = <redacted>\n+api_key = <redacted>\n"
    )
    with pytest.raises(RerunError, match=r"secret values redacted in settings\.py"):
        apply_diff(tmp_path, diff, "run1")


def test_a_file_the_run_read_as_logged_is_not_said_to_differ(tmp_path: Path):
    """A clean run's rerun said "4 differed from the file at the commit": the file leaves optional keys at their
    defaults (train.class_weight) and writes 1 where the run logged 1.0 (compute.cpus_per_run), which the stages read
    alike. Compared as the stages read params.yaml, nothing differs and the file is left as committed; a changed
    value is still named."""
    from tracking.config.params_file import load_params
    from tracking.yaml_text import param_text

    path = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", path)
    logged = {key: param_text(value) for key, value in load_params(path).flat().items()}
    assert logged["compute.cpus_per_run"] == "1.0" and "class_weight" not in path.read_text()
    committed = path.read_text()
    assert write_logged_params(path, logged) == [] and path.read_text() == committed
    assert write_logged_params(path, {**logged, "train.learning_rate": "1e-05"}) == ["train.learning_rate"]


def test_params_are_rewritten_to_exactly_the_logged_values(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text("# kept\nmlflow:\n  experiment: digits   # kept too\ntrain:\n  epochs: 20\n")
    logged = {
        "mlflow.experiment": "123",
        "train.epochs": "2",
        "train.learning_rate": "1e-05",
        "data.sha256": "null",
        "model.kwargs.filters": "[4, 4, 4]",
        "compare.known_bands.test_accuracy.mean": "0.95",
    }
    differed = write_logged_params(path, logged)
    assert differed == [
        "compare.known_bands.test_accuracy.mean",
        "data.sha256",
        "mlflow.experiment",
        "model.kwargs.filters",
        "train.epochs",
        "train.learning_rate",
    ]
    assert params_step("params.yaml", 6, differed) == (
        "params.yaml rewritten to hold the 6 logged params: 6 differed from the file at the commit "
        "(compare.known_bands.test_accuracy.mean, data.sha256, mlflow.experiment, model.kwargs.filters, train.epochs, "
        "train.learning_rate)"
    )
    text = path.read_text()
    assert "# kept" in text and "# kept too" in text
    assert dvc_parse_yaml(text, "params.yaml") == {
        "mlflow": {"experiment": "123"},
        "train": {"epochs": 2, "learning_rate": 1e-05},
        "data": {"sha256": None},
        "model": {"kwargs": {"filters": [4, 4, 4]}},
        "compare": {"known_bands": {"test_accuracy": {"mean": 0.95}}},
    }
    assert write_logged_params(path, logged) == []  # issue 50: a rerun said "rewritten" whatever differed
    assert params_step("params.yaml", 6, []) == "params.yaml at the commit already holds the 6 logged params"
    assert json.dumps(dvc_parse_yaml(text, "params.yaml")["train"]["learning_rate"]) == "1e-05"
