"""A tracking server lost mid-calibration: a real `mlflow server` on 127.0.0.1 is SIGKILLed once the first repeat
has finished on it. The calibrate stage (the local executor) goes on: the repeat in flight keeps the rest of its
run in the offline journal, the repeats after it open theirs there, the calibration's own run ends there too, and
the stage finishes with every repeat kept. The server restarted on the same store, `tracking sync` sends each run
once. Under a minute alone, so it runs in `make test-cluster`."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import calibration_record, make_project, project_env, run, write_params
from servers import MlflowServer, deployment_test

from tracking.config.baseline import freeze
from tracking.layout import REPEATS_DIR
from tracking.names import MLFLOW_PARENT_RUN_TAG, NOISE_REPEAT_TAG, SOURCE_TAG
from tracking.store.journal import SYNCED, pending_journals, read_journal

pytestmark = pytest.mark.slow

REPEATS = 4
# The baseline's epochs: each repeat trains for seconds, so the server is killed with repeats still to come.
EPOCHS = 6
STAGE_TIMEOUT_S = 1200  # a minute alone; ten on a 2-core machine loaded ten times over


@deployment_test("a calibration whose server is killed")
def test_a_calibration_outliving_its_server_keeps_every_repeat_and_syncs_each_once(tmp_path):
    from mlflow.tracking import MlflowClient

    project = make_project(tmp_path / "project")
    write_params(project, train={"epochs": EPOCHS}, calibration={"variants": ["algo"], "repeats": REPEATS})
    freeze(project / "params.yaml", project / "baseline.yaml")
    run(["git", "commit", "-qam", "calibration of 4 repeats"], project)
    run(["dvc", "repro", "prepare"], project)
    server = MlflowServer(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "artifacts", tmp_path / "server.log")
    server.start()
    env = project_env(MLFLOW_TRACKING_URI=server.uri)
    try:
        started = time.monotonic()
        stage = subprocess.Popen(
            ["dvc", "repro", "calibrate"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        online = _wait_for_finished_repeat(MlflowClient(server.uri), stage)
        server.kill()
        _stdout, stderr = stage.communicate(timeout=STAGE_TIMEOUT_S)
        seconds = time.monotonic() - started

        # The stage finished with every repeat kept; each run the server missed is in a journal.
        assert stage.returncode == 0 and "Traceback" not in stderr and "error:" not in stderr, stderr[-3000:]
        noise = calibration_record(project)
        assert len(noise["runs"]) == REPEATS and len(list((project / REPEATS_DIR).glob("*.npz"))) == REPEATS
        journals = {folder.name: read_journal(folder) for folder in pending_journals(project)}
        parent = noise["parent_run_id"]
        assert parent in journals, "the calibration's own run ends in its journal"
        opened = [run_id for run_id, (header, _) in journals.items() if "opened" in header]
        assert opened, f"no repeat opened offline (the first finished at {online} s; raise EPOCHS)\n{stderr}"
        assert "unreachable as it opens" in stderr and "upload it with `tracking sync`" in stderr
        assert all(ops[-1]["op"] == "end" and ops[-1]["status"] == "FINISHED" for _, ops in journals.values())

        # The server back on the same store: one sync sends every journal, a second has nothing to send.
        server.start()
        synced = run([sys.executable, "-m", "tracking", "sync"], project, env=env)
        assert synced.stdout.count("synced run ") == len(journals), synced.stdout
        assert "nothing to sync" in run([sys.executable, "-m", "tracking", "sync"], project, env=env).stdout
        assert not pending_journals(project) and len(list((project / SYNCED).iterdir())) == len(journals)

        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name("test").experiment_id
        runs = client.search_runs([experiment])
        children = [found for found in runs if found.data.tags.get(MLFLOW_PARENT_RUN_TAG) == parent]
        assert len(runs) == REPEATS + 1 and len(children) == REPEATS, [r.info.run_name for r in runs]
        assert client.get_run(parent).info.status == "FINISHED"
        assert sorted(int(child.data.tags[NOISE_REPEAT_TAG]) for child in children) == list(range(REPEATS))
        by_id = {child.data.tags.get(SOURCE_TAG, child.info.run_id): child for child in children}
        for kept in noise["runs"]:
            child = by_id[kept["run_id"]]  # a repeat opened offline is the run that names its journal's id
            assert child.info.status == "FINISHED" and child.info.run_name == f"algo #{kept['repeat']}"
            for key, value in kept["metrics"].items():
                history = client.get_metric_history(child.info.run_id, key)
                assert [m.value for m in history] == [pytest.approx(value)], f"{key}: logged once, as kept"
        print(
            f"server killed after repeat {online} finished online: the stage ended in {seconds:.0f} s with "
            f"{REPEATS} repeats kept, {len(opened)} opened offline; {len(journals)} journals synced once"
        )
    finally:
        server.kill()


def _wait_for_finished_repeat(client, stage: subprocess.Popen) -> int:
    """Poll the server until a repeat's run is FINISHED there; return its index."""
    deadline = time.monotonic() + STAGE_TIMEOUT_S
    while time.monotonic() < deadline:
        assert stage.poll() is None, stage.communicate()
        found = client.get_experiment_by_name("test")
        runs = client.search_runs([found.experiment_id], "attributes.status = 'FINISHED'") if found else []
        done = [found for found in runs if NOISE_REPEAT_TAG in found.data.tags]
        if done:
            return int(done[0].data.tags[NOISE_REPEAT_TAG])
        time.sleep(0.2)
    raise AssertionError(f"no repeat finished within {STAGE_TIMEOUT_S} s")
