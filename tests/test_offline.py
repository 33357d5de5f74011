"""The offline journal's parts: telling a lost server from a rejected write, and the journal's file format."""

import json
from pathlib import Path

import pytest

from servers import free_port
from tracking.offline import Journal, describe, pending_journals, read_journal, server_unavailable
from tracking.operations import artifact, batch, end


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
    journal = Journal(folder, {"run_id": "r1", "experiment": "e", "tracking_uri": "http://x", "lost_at": "t", "reason": "r"})
    journal.append(batch(params={"a": "1"}, metrics=[("m", 0.5, 1000, 0)]), online=True)
    journal.append(artifact(source, "notes"))
    source.unlink()  # the journal holds its own copy
    journal.append(end("FINISHED", 2000))
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
    again.append(batch(tags={"t": "v"}))
    again.close()
    assert [op["seq"] for op in read_journal(folder)[1]] == [1, 2, 3, 4]
    assert json.loads((folder / "journal.jsonl").read_text().splitlines()[0])["reason"] == "r"
