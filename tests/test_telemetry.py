"""Nothing leaves the machine unasked: DVC's analytics and MLflow's usage telemetry are off by default.

Both tools also stay quiet when they see a CI or a test run (pytest's PYTEST_CURRENT_TEST, CI, ...), which
would hide the project's own switches; the processes here run without those markers. A user who turns the
switch back on is respected; then the only place telemetry could go is a dead proxy on 127.0.0.1.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_project, project_env, run

# Variables by which DVC or MLflow recognise a test or CI run (mlflow/telemetry/utils.py, dvc/analytics.py).
_QUIET_MARKERS = (
    "PYTEST_CURRENT_TEST",
    "CI",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "JENKINS_URL",
    "TRAVIS",
    "CIRCLECI",
    "BUILDKITE",
    "TEAMCITY_VERSION",
    "TF_BUILD",
    "BITBUCKET_BUILD_NUMBER",
    "CODEBUILD_BUILD_ARN",
    "DVC_TEST",
    "DVC_NO_ANALYTICS",
    "DO_NOT_TRACK",
    "MLFLOW_DISABLE_TELEMETRY",
)
_DEAD_PROXY = "http://127.0.0.1:9"


def user_env(config_home: Path, **extra: str) -> dict[str, str]:
    """A user's shell: no test or CI markers, MLflow's installation id under `config_home`, any network to a dead proxy."""
    env = {
        key: value
        for key, value in project_env().items()
        if key not in _QUIET_MARKERS and key.lower() not in ("no_proxy", "http_proxy", "https_proxy")
    }
    env.update(XDG_CONFIG_HOME=str(config_home), HTTP_PROXY=_DEAD_PROXY, HTTPS_PROXY=_DEAD_PROXY, **extra)
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("telemetry") / "project")


def analytics(root: Path, env: dict[str, str]) -> str:
    """What a real `dvc` command decides about its analytics report, from its debug log."""
    done = run(["dvc", "status", "-v"], root, env=env)
    [line] = [line for line in (done.stdout + done.stderr).splitlines() if "Analytics is" in line]
    return line.split("Analytics is ")[1]


def test_dvc_analytics_off_in_a_clone_and_in_a_new_project(project: Path, tmp_path: Path):
    clone = tmp_path / "clone"
    clone.mkdir()
    run(["git", "init", "-q"], clone)
    shutil.copytree(REPO / ".dvc", clone / ".dvc", ignore=shutil.ignore_patterns("tmp", "cache", "config.local"))
    env = user_env(tmp_path / "config")
    assert analytics(clone, env) == "disabled."
    assert analytics(project, env) == "disabled."
    run(["dvc", "config", "--local", "core.analytics", "true"], project, env=env)
    try:
        assert analytics(project, env) == "enabled."
    finally:
        run(["dvc", "config", "--local", "--unset", "core.analytics"], project, env=env)


def mlflow_installation_id(project: Path, config_home: Path, **extra: str) -> bool:
    """Run a real `tracking` command that imports MLflow; whether MLflow's telemetry client started.

    The client writes its installation id to $XDG_CONFIG_HOME/mlflow/telemetry.json when it starts,
    before it sends anything.
    """
    done = run(
        [sys.executable, "-m", "tracking", "doctor", "--dry-run"],
        project,
        env=user_env(config_home, **extra),
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return (config_home / "mlflow" / "telemetry.json").is_file()


def test_mlflow_telemetry_off_in_our_commands_unless_the_user_turns_it_on(project: Path, tmp_path: Path):
    assert not mlflow_installation_id(project, tmp_path / "ours")
    assert mlflow_installation_id(project, tmp_path / "user", MLFLOW_DISABLE_TELEMETRY="false")


def test_makefile_passes_the_switch_to_its_commands_and_the_ui_hint(tmp_path: Path):
    show = ["make", "-s", "-f", str(REPO / "Makefile"), "--eval", "show: ; @echo $$MLFLOW_DISABLE_TELEMETRY", "show"]
    env = user_env(tmp_path)
    assert (
        subprocess.run(show, cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip() == "true"
    )
    env["MLFLOW_DISABLE_TELEMETRY"] = "false"
    assert (
        subprocess.run(show, cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
        == "false"
    )
    assert (
        "MLFLOW_DISABLE_TELEMETRY=$(MLFLOW_DISABLE_TELEMETRY) $(VENV)/bin/mlflow ui" in (REPO / "Makefile").read_text()
    )
