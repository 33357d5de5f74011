"""Runs watched by heartbeat: a run whose process died on another machine is ended FAILED once its heartbeat
has been silent past the timeout; fresh heartbeats, clocks running ahead and live processes are left alone.

Other hosts are faked by tags (this machine cannot run a process elsewhere); the live run is a real process.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import client_for, project_env, run

from tracking.names import HEARTBEAT_TAG, HOST_TAG, PID_TAG, REPAIRED_TAG
from tracking.run.tracker import Tracker
from tracking.store.stale import HEARTBEAT_TIMEOUT_S


def test_a_run_beats_on_its_background_writer_while_it_is_open(root: Path, monkeypatch: pytest.MonkeyPatch):
    """The beat keeps its pace with the writer busy: epoch metrics queued faster than the interval."""
    monkeypatch.setattr("tracking.run.tracker.HEARTBEAT_INTERVAL_S", 0.2)
    with Tracker("t", root) as tracker:
        first = int(client_for(root).get_run(tracker.run_id).data.tags[HEARTBEAT_TAG])
        for step in range(25):
            tracker.log_metrics({"epoch_loss": 1.0 / (step + 1)}, step=step, wait=False)
            time.sleep(0.06)
        time.sleep(0.5)
        latest = int(client_for(root).get_run(tracker.run_id).data.tags[HEARTBEAT_TAG])
    assert latest - first >= 1 and abs(latest - time.time()) < 5


def other_hosts_runs(root: Path) -> dict[str, str]:
    """RUNNING runs of processes on hosts this one cannot see, by how their heartbeat reads from here."""
    client = client_for(root)
    experiment = client.create_experiment("cluster")
    now = time.time()
    beats = {
        "silent": now - 2 * HEARTBEAT_TIMEOUT_S,  # its machine died an hour ago
        "fresh": now - 60,
        "clock ahead": now + 300,  # a host whose clock runs five minutes ahead of this one's
        "before heartbeats": None,  # a run from a version that wrote none: it may be alive
    }
    found = {}
    for number, (name, beat) in enumerate(beats.items()):
        tags = {HOST_TAG: f"node-{number}", PID_TAG: str(4000 + number)}
        if beat is not None:
            tags[HEARTBEAT_TAG] = str(int(beat))
        found[name] = client.create_run(experiment, run_name=name, tags=tags).info.run_id
    return found


def test_doctor_ends_the_runs_whose_heartbeat_went_silent_and_only_those(root: Path):
    live = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tracking.run.tracker import Tracker\nwith Tracker('t') as t:\n"
            "    print(t.run_id, flush=True); input()",
        ],
        cwd=root,
        env=project_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        here = live.stdout.readline().strip()
        runs = {**other_hosts_runs(root), "live process here": here}  # made after the live run opened and repaired
        client = client_for(root)
        dry = run([sys.executable, "-m", "tracking", "doctor", "--dry-run"], root)
        assert "5 run(s) RUNNING, 1 of them" in dry.stdout and dry.stdout.count("would mark FAILED") == 1
        done = run([sys.executable, "-m", "tracking", "doctor"], root)
        statuses = {name: client.get_run(run_id).info.status for name, run_id in runs.items()}
        assert statuses == {name: "FAILED" if name == "silent" else "RUNNING" for name in runs}, done.stdout
        (line,) = [line for line in done.stdout.splitlines() if runs["silent"] in line]
        assert "process 4000 on node-0: stale: no heartbeat for 20 min (timeout 10 min) -> marked FAILED" in line
        note = client.get_run(runs["silent"]).data.tags[REPAIRED_TAG]
        assert note.startswith("marked FAILED by tracking doctor") and "sent no heartbeat for 20 min" in note
        assert "other host, heartbeat fresh -> left alone" in done.stdout
        assert "other host, no heartbeat recorded -> left alone" in done.stdout
    finally:
        live.communicate("\n", timeout=60)
    assert live.returncode == 0 and client.get_run(here).info.status == "FINISHED"


def test_a_pipeline_start_ends_a_silent_run_of_another_host(root: Path, caplog: pytest.LogCaptureFixture):
    runs = other_hosts_runs(root)
    with Tracker("t", root):
        pass
    client = client_for(root)
    assert client.get_run(runs["silent"]).info.status == "FAILED"
    assert {client.get_run(runs[name]).info.status for name in runs if name != "silent"} == {"RUNNING"}
    assert any(runs["silent"] in record.getMessage() for record in caplog.records)


def test_a_run_resumed_after_its_stage_was_killed_finishes_without_the_old_error(root: Path):
    """A train run that a SIGKILLed compare left RUNNING is marked FAILED (`error` = ProcessGone); the stage
    that resumes it and finishes leaves it FINISHED with no `error` tag, its repair note kept as history."""
    from tracking.names import ERROR_TAG
    from tracking.store.stale import end_failed

    with Tracker("t", root) as tracker:
        run_id = tracker.run_id
    client = client_for(root)
    end_failed(client, run_id, "the compare stage", "its process 1 is gone without ending the run")
    assert client.get_run(run_id).data.tags[ERROR_TAG].startswith("ProcessGone")
    with Tracker("t", root, run_id=run_id):
        pass
    resumed = client_for(root).get_run(run_id)
    assert resumed.info.status == "FINISHED" and ERROR_TAG not in resumed.data.tags
    assert "marked FAILED by the compare stage" in resumed.data.tags[REPAIRED_TAG]


def test_a_stage_killed_after_its_training_finished_leaves_the_training_finished_and_is_named(root: Path, caplog):
    """kill -9 of the evaluate stage while it holds the finished training's run: `tracking doctor` (and likewise
    the next stage's repair) ends the run FINISHED again at the training's own end time, never FAILED, and its
    `error` tag and doctor's line name the evaluate stage as the one that died."""
    from tracking.names import ERROR_TAG, FINISHED_END_TAG

    with Tracker("t", root) as tracker:
        tracker.log_metrics({"epoch_loss": 0.5}, step=0)
    client = client_for(root)
    trained = client.get_run(tracker.run_id).info
    code = (
        "from tracking.run.tracker import Tracker\n"
        f"with Tracker('t', run_id={tracker.run_id!r}, stage='evaluate') as tracker:\n"
        "    print('open', flush=True)\n"
        "    import time; time.sleep(600)\n"
    )
    for repair in ("doctor", "next stage"):
        stage = subprocess.Popen(
            [sys.executable, "-c", code], cwd=root, env=project_env(), stdout=subprocess.PIPE, text=True
        )
        assert stage.stdout.readline().strip() == "open"
        stage.kill()
        stage.wait(timeout=60)
        resumed = client.get_run(tracker.run_id)
        assert resumed.info.status == "RUNNING" and resumed.data.tags[FINISHED_END_TAG] == str(trained.end_time)
        if repair == "doctor":
            done = run([sys.executable, "-m", "tracking", "doctor"], root)
            assert "ended FINISHED again at its own end time: the evaluate stage died" in done.stdout, done.stdout
            assert "marked FAILED" not in done.stdout
        else:
            with caplog.at_level("WARNING", logger="tracking"), Tracker("t", root) as other:
                pass
            assert other.run_id != tracker.run_id
            err = caplog.text
            assert f"run {tracker.run_id}: ended FINISHED again" in err and "re-run the evaluate stage" in err, err
        ended = client.get_run(tracker.run_id)
        assert ended.info.status == "FINISHED" and ended.info.end_time == trained.end_time, repair
        assert ended.data.tags[ERROR_TAG].startswith("ProcessGone: the evaluate stage died after the run had finished")
        assert f"process {resumed.data.tags[PID_TAG]} is gone" in ended.data.tags[REPAIRED_TAG]
    with Tracker("t", root, run_id=tracker.run_id, stage="evaluate"):  # re-run, it finishes without the error
        pass
    assert ERROR_TAG not in client.get_run(tracker.run_id).data.tags
