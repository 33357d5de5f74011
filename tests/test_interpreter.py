"""`.venv/bin/dvc repro` without an activated environment: the stages run on the project's interpreter anyway.

DVC runs `python3 -m pipelines.<stage>` with the first `python3` on PATH. Here that is a bare interpreter
(a virtual environment with no packages, standing in for the system's), as on a machine where the user
never ran `source .venv/bin/activate`.
"""

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from conftest import BIN, REPO, make_project, project_env, run

from pipelines import BACKEND_MODULES, REQUIRED_MODULES, USER_ERROR_EXIT
from tracking.errors import USER_ERROR_EXIT as TRACKING_USER_ERROR_EXIT


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with none of the project's packages, like the system's."""
    folder = tmp_path_factory.mktemp("bare") / "python"
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(folder)], check=True
    )
    assert subprocess.run([folder / "bin/python3", "-c", "import numpy"], capture_output=True).returncode != 0
    return folder / "bin"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("interpreter") / "project")


def dvc_repro_unactivated(project: Path, bare: Path) -> subprocess.CompletedProcess:
    """`.venv/bin/dvc repro -f prepare` with the bare Python first on PATH and no venv on it."""
    return run(
        [str(BIN / "dvc"), "repro", "-f", "prepare"],
        project,
        check=False,
        env=project_env(PATH=os.pathsep.join([str(bare), "/usr/bin", "/bin"])),
    )


def test_stage_reexecutes_with_the_project_venv(project: Path, bare: Path):
    (project / ".venv").symlink_to(BIN.parent)
    try:
        done = dvc_repro_unactivated(project, bare)
    finally:
        (project / ".venv").unlink()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        f"note: {bare}/python3 (Python " in done.stderr
        and f"running this stage with {project}/.venv/bin/python" in done.stderr
    )
    assert "prepared 1797 samples" in done.stdout and (project / "data/prepared/manifest.json").is_file()


def test_without_a_venv_the_stage_names_the_interpreter_and_the_fix(project: Path, bare: Path):
    done = dvc_repro_unactivated(project, bare)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith(f"error: {bare}/python3 (Python ") and "lacks the project's packages (numpy, " in line
    assert "run `make run`" in line and "source .venv/bin/activate" in line
    assert "exited with 2" in done.stderr


def normal(name: str) -> str:
    """A distribution name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_check_covers_every_dependency():
    """Each runtime dependency in pyproject.toml provides a module the check looks for; the backend extras (cpu,
    jax) a module of `BACKEND_MODULES`, one of which the check asks for."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *extras["cpu"], *extras["jax"]]
    provided = {
        normal(dist)
        for module in (*REQUIRED_MODULES, *BACKEND_MODULES)
        for dist in packages_distributions().get(module.split(".")[0], [])
    }
    assert {normal(re.split(r"[<>=!\[; ]", spec)[0]) for spec in wanted} <= provided
    assert USER_ERROR_EXIT == TRACKING_USER_ERROR_EXIT
