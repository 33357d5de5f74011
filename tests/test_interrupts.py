"""Ctrl-C says what happened: "the MLflow run was ended as KILLED" only from a process that owned a run and
ended it so; `tracking diff` opens none, so it says "interrupted" and nothing more."""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import project_env

from tracking.entry import run_main
from tracking.run.lifecycle import record_killed


def test_tracking_diff_interrupted_while_waiting_for_its_server_owns_no_run(tmp_path: Path):
    with socket.socket() as server:  # accepts the connection and never answers: the diff waits inside its command
        server.bind(("127.0.0.1", 0))
        server.listen()
        env = project_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{server.getsockname()[1]}")
        process = subprocess.Popen(
            [sys.executable, "-m", "tracking", "diff", "a" * 32, "b" * 32],
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # As at a terminal: a shell's background job (CI run with `&`) would hand down SIGINT ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            assert select.select([server], [], [], 60)[0], "tracking diff never reached its tracking server"
            connection, _ = server.accept()
            os.killpg(process.pid, signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
            connection.close()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted", stderr
    assert "KILLED" not in stderr and "Traceback" not in stderr


def interrupt() -> None:
    raise KeyboardInterrupt


@pytest.fixture
def logging_as_it_was():
    """`run_main` sets up the `tracking` logger for its process; put it back for the tests that follow here."""
    logger = logging.getLogger("tracking")
    handlers, propagate, level = list(logger.handlers), logger.propagate, logger.level
    yield
    logger.handlers[:], logger.propagate = handlers, propagate
    logger.setLevel(level)


@pytest.mark.usefixtures("logging_as_it_was")
def test_the_message_names_a_killed_run_only_once_one_was_ended(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    import tracking.run.lifecycle

    monkeypatch.setattr(tracking.run.lifecycle, "_killed", [])  # none yet, whatever tests ran before in this process
    with pytest.raises(SystemExit) as exited:
        run_main(interrupt)
    assert exited.value.code == 130 and capsys.readouterr().err == "interrupted\n"
    record_killed("0" * 32)
    with pytest.raises(SystemExit):
        run_main(interrupt)
    assert capsys.readouterr().err == "interrupted: the MLflow run was ended as KILLED\n"


def test_ctrl_c_during_a_stages_start_up_is_one_line_and_exit_130(tmp_path: Path):
    """SIGINT while `pipelines.prepare` is still importing (pydantic's extension loaded, the stage's imports under
    way): `interrupted`, exit status 130, no KeyboardInterrupt traceback through the module being imported."""
    import time

    from conftest import make_project

    root = make_project(tmp_path / "project")
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines.prepare"],
        cwd=root,
        env=project_env(),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        maps = Path(f"/proc/{process.pid}/maps")
        deadline = time.monotonic() + 120
        while "pydantic_core" not in maps.read_text() and time.monotonic() < deadline:
            time.sleep(0.005)
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert (process.returncode, stderr) == (130, "interrupted\n"), stderr
