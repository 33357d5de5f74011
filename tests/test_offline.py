"""The offline journal's parts: telling a lost server from a rejected write, and the journal's file format."""

import json
import os
import shutil
from pathlib import Path

import pytest
from servers import free_port

from tracking.store.faults import describe, server_unavailable
from tracking.store.journal import OFFLINE, Journal, pending_journals, read_journal
from tracking.store.operations import artifact, batch, end


def test_a_closed_port_is_a_lost_server_and_a_rejected_request_is_not(monkeypatch):
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    client = MlflowClient(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(MlflowException) as lost:
        client.get_experiment_by_name("x")
    assert server_unavailable(lost.value) and describe(lost.value) == "[Errno 111] Connection refused"
    with pytest.raises(MlflowException, match="Invalid value") as rejected:
        client.get_run("not a run id!")
    assert not server_unavailable(rejected.value)


def test_journal_numbers_writes_keeps_files_and_drops_a_torn_last_line(tmp_path):
    folder = tmp_path / ".tracking/offline/r1"
    source = tmp_path / "report.txt"
    source.write_text("hello")
    umask = os.umask(0o022)  # the common default: new files world-readable unless the product says otherwise
    try:
        journal = Journal(
            folder, {"run_id": "r1", "experiment": "e", "tracking_uri": "http://x", "lost_at": "t", "reason": "r"}
        )
    finally:
        os.umask(umask)
    modes = [oct(path.stat().st_mode & 0o777) for path in (tmp_path / ".tracking", folder, folder / "journal.jsonl")]
    assert modes == ["0o700", "0o700", "0o600"], "a journal holds whole runs: its owner's only"
    journal.write(batch(params={"a": "1"}, metrics=[("m", 0.5, 1000, 0)]), online=True)
    journal.write(artifact(source, "notes"))
    source.unlink()  # the journal holds its own copy
    journal.write(end("FINISHED", 2000))
    journal.close()
    with open(folder / "journal.jsonl", "a") as handle:
        handle.write('{"seq": 4, "op": "ba')  # a crash in the middle of a line

    header, ops = read_journal(folder)
    assert header["run_id"] == "r1" and [op["seq"] for op in ops] == [1, 2, 3]
    assert ops[0]["online"] and "online" not in ops[1]
    assert Path(ops[1]["path"]).read_text() == "hello" and ops[1]["artifact_path"] == "notes"
    assert (journal.metric_values, journal.artifacts, journal.operations, journal.after_loss) == (1, 1, 3, 2)
    assert pending_journals(tmp_path) == [folder]

    again = Journal(folder, {"run_id": "r1"})  # a later stage of the same run goes on numbering
    again.write(batch(tags={"t": "v"}))
    again.close()
    assert [op["seq"] for op in read_journal(folder)[1]] == [1, 2, 3, 4]
    assert json.loads((folder / "journal.jsonl").read_text().splitlines()[0])["reason"] == "r"


def _kept_run(root: Path, run_id: str, **header: dict) -> Path:
    """A journal as a train stage would leave it: params, two epochs of a metric, a file, the end; `header` adds
    to its header."""
    folder = root / ".tracking/offline" / run_id
    (root / "curve.txt").write_text("0.9 0.5")
    journal = Journal(
        folder,
        {
            "run_id": run_id,
            "experiment": "kept",
            "tracking_uri": "http://bob:keptPlantedPw@gone:5000",  # as journals of earlier versions kept it
            "lost_at": "2026-01-01T00:00:00+0000",
            "reason": "[Errno 111] Connection refused",
            **header,
        },
    )
    journal.write(batch(params={"train.epochs": "2"}, metrics=[("epoch_loss", 0.9, 1000, 0)]), online=True)
    journal.write(batch(metrics=[("epoch_loss", 0.5, 2000, 1)]))
    journal.write(artifact(root / "curve.txt", "plots"))
    journal.write(end("FINISHED", 3000))
    journal.close()
    return folder


def test_sync_to_a_store_without_the_run_creates_one_linked_run_once(tmp_path):
    from mlflow.tracking import MlflowClient

    from tracking.inspect.diff.runs import load_run
    from tracking.names import SOURCE_TAG, SOURCE_URI_TAG
    from tracking.store.sync import sync_all

    folder = _kept_run(tmp_path, "a" * 32)
    uri = f"sqlite:///{tmp_path / 'other.db'}"
    (first,) = sync_all(tmp_path, uri)
    shutil.copytree(tmp_path / ".tracking/synced" / folder.name, folder)
    (folder / "progress.json").unlink()  # as if the sync had been interrupted before recording its progress
    (second,) = sync_all(tmp_path, uri)

    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("kept").experiment_id])
    assert first.run_id == second.run_id == run.info.run_id != "a" * 32
    assert run.data.tags[SOURCE_TAG] == "a" * 32 and run.info.status == "FINISHED"
    assert run.data.tags[SOURCE_URI_TAG] == "http://gone:5000", "the server's password stays on this machine"
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "epoch_loss")] == [(0, 0.9), (1, 0.5)]
    assert (first.metric_values, second.metric_values, second.skipped_metric_values) == (2, 0, 2)
    assert [a.path for a in client.list_artifacts(run.info.run_id, "plots")] == ["plots/curve.txt"]
    assert f"(linked to {'a' * 32})" in first.line and pending_journals(tmp_path) == []
    assert load_run(client, "a" * 32).run_id == run.info.run_id, "found by the id its journal had"

    # A run opened in the journal (a repeat whose server was gone as it started) is created with its own name and
    # start time.
    opened = _kept_run(tmp_path, "d" * 32, opened={"run_name": "algo #2", "start_time": 500})
    (third,) = sync_all(tmp_path, uri)
    made = client.get_run(third.run_id).info
    assert (made.run_name, made.start_time, made.status) == ("algo #2", 500, "FINISHED") and not opened.exists()


def test_sync_to_an_unreachable_server_keeps_the_journal(tmp_path, monkeypatch):
    from tracking.errors import TrackingServerError
    from tracking.store.sync import sync_all

    for name in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        monkeypatch.setenv(name, "")  # recorded, so the limits sync sets are undone after the test
        monkeypatch.delenv(name)  # sync sets its own short limits, as the stages do
    folder = _kept_run(tmp_path, "b" * 32)
    with pytest.raises(
        TrackingServerError, match=r"cannot be reached \(\[Errno 111\] Connection refused\); .* is kept"
    ):
        sync_all(tmp_path, f"http://127.0.0.1:{free_port()}")
    assert pending_journals(tmp_path) == [folder] and not (folder / "progress.json").exists()


def test_a_run_kept_offline_is_not_taken_for_a_stale_one(tmp_path):
    import subprocess

    from mlflow.tracking import MlflowClient

    from tracking.names import PID_TAG
    from tracking.store.journal import kept_offline
    from tracking.store.stale import KEPT_OFFLINE, STALE, owner_tags, repair_stale_runs

    gone = subprocess.Popen(["true"])
    gone.wait()
    client = MlflowClient(f"sqlite:///{tmp_path / 'm.db'}")
    experiment = client.create_experiment("kept")
    lost, killed = (
        client.create_run(experiment, tags={**owner_tags(), PID_TAG: str(gone.pid)}).info.run_id for _ in "ab"
    )
    _kept_run(tmp_path, lost)  # the train stage of `lost` lost its server and kept the rest of the run

    stale, running = repair_stale_runs(client, by="test", kept_offline=kept_offline(tmp_path))
    assert [run.run_id for run in stale] == [killed]
    assert {run.run_id: run.verdict for run in running} == {lost: KEPT_OFFLINE, killed: STALE}
    assert client.get_run(lost).info.status == "RUNNING" and client.get_run(killed).info.status == "FAILED"


def test_the_spool_of_an_ended_run_its_stage_could_not_remove_goes_at_the_next_run(tmp_path):
    """A SIGKILLed stage, or one whose project was made read-only, leaves its run's spool: the next stage's run
    removes it, and keeps a running run's and one naming no run of its store."""
    from mlflow.tracking import MlflowClient

    from tracking.store.journal import SPOOL, remove_ended_spools

    client = MlflowClient(f"sqlite:///{tmp_path / 'm.db'}")
    experiment = client.create_experiment("spools")
    ended, running = (client.create_run(experiment).info.run_id for _ in "ab")
    client.set_terminated(ended, "FAILED")
    elsewhere = "0123456789abcdef0123456789abcdef"
    for run_id in (ended, running, elsewhere):
        (tmp_path / SPOOL / run_id / "000000").mkdir(parents=True)
        (tmp_path / SPOOL / run_id / "000000/provenance.json").write_text("{}")
    assert remove_ended_spools(client, tmp_path) == [ended]
    assert sorted(path.name for path in (tmp_path / SPOOL).iterdir()) == sorted([running, elsewhere])


@pytest.mark.slow
def test_a_large_artifact_logged_before_the_server_is_lost_is_kept_and_synced_intact(
    tmp_path, monkeypatch, capfd, caplog
):
    """An artifact over 16 MiB, written through a temporary file the tracker deletes, then a real server killed.

    A second run, open around the first, has its server back before it ends: it is FINISHED only with the writes
    its journal kept replayed. The server's URI carries a user:password@ (which a server without authentication
    ignores): neither the journal, nor anything printed by the run (MLflow's "View run ... at:" lines included) or
    by `tracking sync`, nor the run's tags hold the password.
    """
    import hashlib
    import secrets
    import subprocess
    import sys

    from conftest import project_env
    from mlflow.tracking import MlflowClient
    from servers import MlflowServer

    from tracking.names import SYNCED_TAG
    from tracking.run.tracker import Tracker
    from tracking.store.journal import SPOOL

    names = ("MLFLOW_TRACKING_URI", "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")
    for name in (*names, "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"):
        monkeypatch.setenv(name, "")  # recorded, so what the tracker sets is undone after the test
        monkeypatch.delenv(name)
    root = tmp_path / "project"
    (root / ".dvc").mkdir(parents=True)
    text = secrets.token_hex(9 * 2**20)  # 18 MiB that do not compress
    digest = hashlib.sha256(text.encode()).hexdigest()
    server = MlflowServer(
        f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "artifacts", tmp_path / "server.log"
    ).start()
    try:
        password = "uriPlantedPw4242"
        uri = server.uri.replace("://", f"://planted:{password}@")
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        with Tracker("large", root=root) as outer:  # its server is back before it ends (one restart for both)
            with Tracker("large", root=root, nested=True) as tracker:
                tracker.log_text(text, "data/large.txt")
                for epoch in range(3):
                    outer.log_metrics({"epoch_loss": 1.0 / (epoch + 1)}, step=epoch)
                server.kill()
                tracker.set_tags({"written": "after the loss"})
                for epoch in range(3, 6):
                    outer.log_metrics({"epoch_loss": 1.0 / (epoch + 1)}, step=epoch)
            server.start()
        # The outer run's end reached the server only through its journal's replay: never FINISHED with 3 of 6 epochs.
        back = MlflowClient(server.uri).get_run(outer.run_id)
        history = MlflowClient(server.uri).get_metric_history(outer.run_id, "epoch_loss")
        assert (back.info.status, sorted(m.step for m in history)) == ("FINISHED", [0, 1, 2, 3, 4, 5])
        assert SYNCED_TAG in back.data.tags and "and back: synced run" in caplog.text
        run_id = tracker.run_id
        folder = root / OFFLINE / run_id
        _header, ops = read_journal(folder)
        (kept,) = [op for op in ops if op["op"] == "artifact" and op["artifact_path"] == "data"]
        assert kept["online"] and hashlib.sha256(Path(kept["path"]).read_bytes()).hexdigest() == digest
        assert ops[-1]["op"] == "end" and not (root / SPOOL / run_id).exists()
        printed = capfd.readouterr()
        assert f"MLflow server {server.uri} lost" in caplog.text, caplog.text
        assert password not in printed.out + printed.err + caplog.text
        assert password not in (folder / "journal.jsonl").read_text()
        assert MlflowClient(server.uri).get_run(run_id).info.status == "RUNNING", (
            "not ended until its journal is synced"
        )

        done = subprocess.run(
            [sys.executable, "-m", "tracking", "sync"],
            cwd=root,
            capture_output=True,
            text=True,
            env=project_env(MLFLOW_TRACKING_URI=uri),
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert password not in done.stdout + done.stderr
        client = MlflowClient(server.uri)
        synced = client.get_run(run_id)
        assert synced.info.status == "FINISHED" and synced.data.tags["written"] == "after the loss"
        assert password not in json.dumps(synced.data.tags)
        with Tracker("large", root=root):  # a run that ends while the server answers: MLflow would print its URL
            pass
        printed = capfd.readouterr()
        assert password not in printed.out + printed.err + caplog.text, printed.out
        uploaded = Path(client.download_artifacts(run_id, "data/large.txt", str(tmp_path)))
        assert hashlib.sha256(uploaded.read_bytes()).hexdigest() == digest
        assert pending_journals(root) == []
    finally:
        server.kill()


def test_sync_names_and_skips_bad_journal_lines_and_replays_the_rest(tmp_path):
    """A line that is not JSON and a batch whose metric name the store refuses: `tracking sync` names both, skips
    them, replays every other write, keeps the journal, and ends with one `error:` line and exit status 2."""
    import subprocess
    import sys

    from conftest import project_env
    from mlflow.tracking import MlflowClient

    (tmp_path / ".dvc").mkdir()
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("kept")).info.run_id
    folder = _kept_run(tmp_path, run_id)
    lines = (folder / "journal.jsonl").read_text().splitlines(keepends=True)
    mangled = json.dumps({"seq": 2, "op": "batch", "params": {}, "metrics": [["epoch#loss", 0.7, 1500, 1]], "tags": {}})
    (folder / "journal.jsonl").write_text("".join([*lines[:2], '{"seq": 2, "op": "ba\n', mangled + "\n", *lines[2:]]))

    done = subprocess.run(
        [sys.executable, "-m", "tracking", "sync"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=project_env(MLFLOW_TRACKING_URI=uri),
        timeout=300,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "2 journal line(s) could not be replayed" in errors[0], done.stderr
    assert "journal.jsonl line 3: not JSON" in done.stderr and "line 4 (batch): refused" in done.stderr
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"train.epochs": "2"}
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "epoch_loss")] == [(0, 0.9), (1, 0.5)]
    assert [a.path for a in client.list_artifacts(run_id, "plots")] == ["plots/curve.txt"]
    kept = tmp_path / ".tracking/synced" / run_id / "journal.jsonl"
    assert kept.read_text().count("\n") == 7 and pending_journals(tmp_path) == []


def test_a_repeat_whose_server_is_gone_as_it_opens_is_kept_offline_with_its_name_and_parent(root, monkeypatch):
    """A calibration's repeat (`offline_start`) opens its run in the journal when the server does not answer, its
    name and start time in the header for the sync to create it with (`test_sync_to_a_store_without_the_run...`).
    A run without `offline_start` is refused before any work, as before."""
    from tracking.errors import TrackingServerError
    from tracking.names import MLFLOW_PARENT_RUN_TAG
    from tracking.run.tracker import Tracker

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    parent = "c" * 32
    with pytest.raises(TrackingServerError, match="cannot be reached"):
        Tracker("kept", root, nested=True, parent_run_id=parent).__enter__()
    assert not (root / OFFLINE).exists()
    with Tracker("kept", root, run_name="algo #2", nested=True, parent_run_id=parent, offline_start=True) as repeat:
        assert repeat.offline
        repeat.log_metrics({"test_accuracy": 0.75})
    (folder,) = pending_journals(root)
    header, ops = read_journal(folder)
    assert folder.name == repeat.run_id == header["run_id"] and header["opened"]["run_name"] == "algo #2"
    tags = {key: value for op in ops if op["op"] == "batch" for key, value in op["tags"].items()}
    metrics = [m[:2] for op in ops if op["op"] == "batch" for m in op["metrics"]]
    assert tags[MLFLOW_PARENT_RUN_TAG] == parent and metrics == [["test_accuracy", 0.75]]
    assert ops[-1]["op"] == "end" and ops[-1]["status"] == "FINISHED"
