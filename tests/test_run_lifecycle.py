"""Real training processes that crash, get signals, get killed, or share the store with others.

Crashes and signals, sent to trainings started directly and by `dvc repro`: each run ends FAILED or KILLED
(never FINISHED, never RUNNING) with its provenance and the epoch metrics logged so far, the stage exits
non-zero, and no stage output is left for DVC to take as valid. SIGKILL leaves a run RUNNING that `tracking
doctor` or the next run marks FAILED. Parallel trainings and DVC's queue share one SQLite store.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import client_for, log_the_same_data_at_once, make_project, project_env, run, runs_of, write_params

pytestmark = pytest.mark.slow

STAGE_OUTPUTS = ("outputs/model.keras", "outputs/run.json", "metrics/train.json", "plots/train/history.csv")
COMMANDS = {"stage": [sys.executable, "-m", "pipelines.train"], "dvc repro": ["dvc", "repro", "--single-item", "train"]}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project with its data prepared and that stage's lock committed, built once per module."""
    root = make_project(tmp_path_factory.mktemp("template") / "project")
    run(["dvc", "repro", "prepare"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "prepared"], root)
    return root


@pytest.fixture
def prepared(template: Path, tmp_path: Path) -> Path:
    """A copy of the prepared project, with no store yet."""
    return Path(shutil.copytree(template, tmp_path / "project", symlinks=True))


def start(root: Path, via: str) -> subprocess.Popen:
    """Start training in its own process group, as a shell starts a foreground job."""
    assert runs_of(root) == []  # creates the store, so polling it never races its creation
    return subprocess.Popen(
        COMMANDS[via],
        cwd=root,
        env=project_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_epoch(root: Path, process: subprocess.Popen, timeout: float = 240) -> None:
    """Return once the run has logged an epoch metric: training is under way."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        found = runs_of(root)
        if found and "epoch_loss" in found[0].data.metrics:
            return
        time.sleep(0.5)
    raise AssertionError(f"training never logged an epoch (exit {process.poll()})")


def assert_honest_failure(root: Path, status: str) -> None:
    """One run, ended `status`, with provenance and epoch metrics; no stage output; DVC sees train as not done."""
    (found,) = runs_of(root)
    assert found.info.status == status
    tags = found.data.tags
    assert tags["error"] and tags["prov.seeds.base"] == "42" and len(tags["prov.git.commit"]) == 40
    assert tags["tracking.host"] and tags["tracking.pid"].isdigit()
    artifacts = {a.path for a in client_for(root).list_artifacts(found.info.run_id, "provenance")}
    assert "provenance/provenance.json" in artifacts
    assert found.data.params["train.batch_size"] == "64"
    assert "system/cpu_utilization_percentage" in found.data.metrics  # the sampler's last sample, as the run ended
    left = [name for name in STAGE_OUTPUTS if (root / name).exists()]
    assert left == []
    status_json = json.loads(run(["dvc", "status", "--json", "train"], root).stdout)
    assert "train" in status_json, status_json


# Ctrl-C at a terminal reaches the whole process group, under DVC or not; SIGTERM is what DVC and schedulers send.
@pytest.mark.parametrize(
    ("via", "sig", "stage_code"),
    [("stage", signal.SIGINT, 130), ("dvc repro", signal.SIGINT, None), ("dvc repro", signal.SIGTERM, None)],
    ids=["stage-SIGINT", "dvc-SIGINT", "dvc-SIGTERM"],
)
def test_signal_during_training_ends_the_run_killed(prepared, via, sig, stage_code):
    write_params(prepared, train={"epochs": 2000})
    process = start(prepared, via)
    wait_for_epoch(prepared, process)
    os.killpg(process.pid, sig)
    _, stderr = process.communicate(timeout=120)  # returns once the training process too has exited
    if via == "stage":
        assert process.returncode == stage_code, stderr
        assert "Traceback" not in stderr
        assert "the MLflow run was ended as KILLED" in stderr
    else:
        assert process.returncode != 0, stderr  # DVC ignores SIGINT and reports the stage failed; SIGTERM ends it
    assert_honest_failure(prepared, "KILLED")
    history = client_for(prepared).get_metric_history(runs_of(prepared)[0].info.run_id, "epoch_loss")
    assert [m.step for m in history] == list(range(len(history))) and history


def test_crash_after_training_removes_the_partial_outputs(prepared):
    """The model is saved, then writing metrics/train.json fails: the run is FAILED and the model removed."""
    (prepared / "metrics/train.json").mkdir(parents=True)
    done = run(COMMANDS["stage"], prepared, check=False)
    assert done.returncode == 1 and "IsADirectoryError" in done.stderr
    (found,) = runs_of(prepared)
    assert found.info.status == "FAILED" and found.data.tags["error"].startswith("IsADirectoryError")
    history = client_for(prepared).get_metric_history(found.info.run_id, "epoch_loss")
    assert [m.step for m in history] == [0, 1]
    (prepared / "metrics/train.json").rmdir()
    assert_honest_failure(prepared, "FAILED")


def test_a_direct_training_that_fails_before_writing_keeps_the_previous_outputs(prepared):
    """`python -m pipelines.train` run by hand (`dvc repro` removes a stage's outputs itself before running it) that
    fails before writing its own outputs leaves the previous training's as they were: with the tracking server
    unreachable at start (one error line), and with training crashing inside `fit` after its run opened."""
    previous = {"outputs/model.keras": b"the previous model", "outputs/run.json": b'{"previous": true}\n'}
    for relative, content in previous.items():
        (prepared / relative).parent.mkdir(parents=True, exist_ok=True)
        (prepared / relative).write_bytes(content)
    unreachable = project_env(MLFLOW_TRACKING_URI="http://127.0.0.1:9", MLFLOW_HTTP_REQUEST_MAX_RETRIES="0")
    done = run(COMMANDS["stage"], prepared, env=unreachable, check=False)
    assert done.returncode == 2 and "cannot be reached" in done.stderr.strip().splitlines()[-1], done.stderr
    assert {relative: (prepared / relative).read_bytes() for relative in previous} == previous
    val_y = prepared / "data/prepared/val_y.npy"
    np.save(val_y, np.full_like(np.load(val_y), 99))
    done = run(COMMANDS["stage"], prepared, check=False)
    assert done.returncode == 1, done.stderr
    (failed,) = runs_of(prepared)
    assert failed.info.status == "FAILED"
    assert {relative: (prepared / relative).read_bytes() for relative in previous} == previous


def test_crash_during_training_under_dvc_repro(prepared):
    """Validation labels outside the classes make TensorFlow raise inside `fit`."""
    val_y = prepared / "data/prepared/val_y.npy"
    np.save(val_y, np.full_like(np.load(val_y), 99))
    done = run(COMMANDS["dvc repro"], prepared, check=False)
    assert done.returncode != 0 and "failed to reproduce 'train'" in done.stderr
    assert_honest_failure(prepared, "FAILED")


def tracker_process(root: Path, body: str) -> subprocess.Popen:
    """A real process that opens a `Tracker` run in the project and runs `body` inside it (`tracker` in scope)."""
    code = f"from tracking.run.tracker import Tracker\nwith Tracker('test') as tracker:\n    {body}\n"
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=root,
        env=project_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_leaves_a_run_that_doctor_and_the_next_run_mark_failed(prepared):
    from tracking.store.stale import owner_tags

    write_params(prepared, train={"epochs": 2000})
    process = start(prepared, "dvc repro")
    wait_for_epoch(prepared, process)
    (killed,) = runs_of(prepared)
    os.kill(int(killed.data.tags["tracking.pid"]), signal.SIGKILL)  # the training process, not DVC
    process.communicate(timeout=120)
    assert process.returncode != 0
    assert not (prepared / "outputs/run.json").exists()
    client = client_for(prepared)
    experiment = killed.info.experiment_id
    assert client.get_run(killed.info.run_id).info.status == "RUNNING"
    mine = owner_tags()
    others = {
        "other host": client.create_run(experiment, tags={**mine, "tracking.host": "elsewhere"}),
        "alive": client.create_run(experiment, tags=mine),  # this test process
        "no owner": client.create_run(experiment),
    }
    recycled = client.create_run(experiment, tags={**mine, "tracking.pid_start": "another-boot:1"})
    stale = {killed.info.run_id, recycled.info.run_id}

    def statuses() -> dict[str, str]:
        return {r.info.run_id: r.info.status for r in runs_of(prepared)}

    dry = run([sys.executable, "-m", "tracking", "doctor", "--dry-run"], prepared)
    assert set(statuses().values()) == {"RUNNING"}
    assert dry.stdout.count("would mark FAILED") == 2 and "5 run(s) RUNNING, 2 of them" in dry.stdout
    done = run([sys.executable, "-m", "tracking", "doctor"], prepared)
    assert done.stdout.count("-> marked FAILED") == 2 and done.stdout.count("-> left alone") == 3
    after = statuses()
    assert {run_id for run_id, status in after.items() if status == "FAILED"} == stale
    assert all(after[r.info.run_id] == "RUNNING" for r in others.values())
    note = client.get_run(killed.info.run_id).data.tags["tracking.repaired"]
    assert note.startswith("marked FAILED by tracking doctor") and killed.data.tags["tracking.pid"] in note

    second = tracker_process(prepared, "print(tracker.run_id, flush=True); import time; time.sleep(600)")
    second_id = second.stdout.readline().strip()
    second.kill()
    second.communicate(timeout=60)
    assert client.get_run(second_id).info.status == "RUNNING"
    nxt = tracker_process(prepared, "pass")
    _, stderr = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, stderr
    assert f"warning: marked 1 run(s) that a killed process left RUNNING as FAILED ({second_id})" in stderr
    assert client.get_run(second_id).info.status == "FAILED"
    assert all(client.get_run(r.info.run_id).info.status == "RUNNING" for r in others.values())


WRITER = (
    "tracker.log_params({f'p{k}': k for k in range(20)})\n"
    "    for step in range(50):\n        tracker.log_metrics({'epoch_loss': 1 / (step + 1)}, step=step, wait=False)"
)


def test_parallel_trainings_and_dvc_queue_share_the_project_store(prepared):
    """Four writers started at once on a store that does not exist yet, with two queued experiments run by two
    DVC workers in temporary copies of the project: every run lands FINISHED and complete in the project's store."""
    rates = {"lr-a": "0.002", "lr-b": "0.003"}
    for name, rate in rates.items():
        run(["dvc", "exp", "run", "--queue", "train", "-S", f"train.learning_rate={rate}", "-n", name], prepared)
    assert not (prepared / "mlflow.db").exists()
    writers = [tracker_process(prepared, WRITER) for _ in range(4)]
    run(["dvc", "queue", "start", "-j", "2"], prepared)
    outputs = [writer.communicate(timeout=300) for writer in writers]
    assert [writer.returncode for writer in writers] == [0] * 4, outputs
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        queue = run(["dvc", "queue", "status"], prepared).stdout
        if "Queued" not in queue and "Running" not in queue:
            break
        time.sleep(3)
    assert queue.count("Success") == 2, queue + run(["dvc", "queue", "logs", "lr-a"], prepared, check=False).stdout

    found = runs_of(prepared)
    assert len(found) == 6 and {r.info.status for r in found} == {"FINISHED"}
    client = client_for(prepared)
    queued = {r.data.tags["dvc.exp_name"]: r for r in found if "dvc.exp_name" in r.data.tags}
    assert set(queued) == set(rates)
    for name, found_run in queued.items():
        assert found_run.data.params["train.learning_rate"] == rates[name]
        assert {"final_loss", "final_accuracy"} <= set(found_run.data.metrics)
        assert [m.step for m in client.get_metric_history(found_run.info.run_id, "epoch_loss")] == [0, 1]
    for found_run in found:
        if found_run.info.run_id not in {r.info.run_id for r in queued.values()}:
            assert len(client.get_metric_history(found_run.info.run_id, "epoch_loss")) == 50
            assert len(found_run.data.params) == 20
    assert not (prepared / "outputs").exists()  # the queued trainings wrote into their temporary copies
    shown = run(["dvc", "exp", "show", "--json"], prepared).stdout
    assert all(name in shown for name in rates)


def test_trainings_of_the_same_data_log_it_at_once_to_one_sqlite_store(tmp_path):
    """MLflow's SQL store looks a data set up, then inserts it: four processes logging the same data at one instant
    inserted it twice, and one failed (UNIQUE constraint failed: datasets...) in 6 of 8 tries, as a `dvc queue`
    worker did in test_parallel_trainings_and_dvc_queue_share_the_project_store. A refused data set input is tried
    again (`tracking.store.operations.INPUT_TRIES`): none fails."""
    log_the_same_data_at_once(f"sqlite:///{tmp_path / 'mlflow.db'}", "data", tmp_path / "ready")
