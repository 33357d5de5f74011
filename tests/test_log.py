"""The library's messages go through `logging`: shown on stderr as one `warning: ...` line, hidden below
`TRACKING_LOGLEVEL`, and a level that is not one is a one-line error."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import assert_user_error, project_env

WARN = (
    "import logging; from tracking.entry import run_main; "
    "run_main(lambda: logging.getLogger('tracking.store.journal').warning('server %s lost', 'x'))"
)


def python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=project_env(**env), capture_output=True, text=True)


def test_a_library_warning_is_one_line_on_stderr():
    done = python(WARN)
    warning, started = done.stderr.splitlines()
    assert done.returncode == 0 and done.stdout == ""
    assert warning == "warning: server x lost" and re.fullmatch(
        r"stage: started in [0-9.]+ s \(imports [0-9.]+ s\)", started
    )


def test_tracking_loglevel_hides_what_is_below_it():
    assert python(WARN, TRACKING_LOGLEVEL="error").stderr == ""


def test_a_level_that_is_not_one_is_an_error_line():
    done = python(WARN, TRACKING_LOGLEVEL="loud")
    assert_user_error(done, "TRACKING_LOGLEVEL='loud' is not a log level", "DEBUG, INFO, WARNING, ERROR")
