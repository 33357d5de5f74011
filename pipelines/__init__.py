"""DVC stage code. Importing the package first makes sure the stage runs on an interpreter that has the project.

DVC runs each stage's `python3 -m pipelines.<stage>` with whatever `python3` comes first on PATH: with
`.venv/bin/dvc repro` and no activated environment, that is the system's, which lacks the project's
packages. Then the stage re-executes itself, same arguments and environment, with the project's
`.venv/bin/python`; without one it stops with one `error:` line naming the interpreter and the fix.
This module uses only the standard library, since it runs on that bare interpreter, until the check passes; then
it makes Ctrl-C during the stage's imports one line (`tracking.run.lifecycle.quiet_start_up`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# Import names of pyproject.toml's dependencies; a Keras backend (`BACKEND_MODULES`) is looked for apart.
REQUIRED_MODULES = (
    "numpy",
    "scipy",
    "sklearn",
    "pydantic",
    "yaml",
    "ruamel.yaml",
    "tqdm",
    "psutil",
    "detect_secrets",
    "re2",
    "git",
    "matplotlib",
    "mlflow",
    "dvc",
    "keras",
    "vl_convert",
)
# Keras's backends (tracking/determinism/backend.py): one of them must be installed; which one params.yaml's
# `determinism.backend` names is checked when the stage sets the backend up, with the install line for it.
BACKEND_MODULES = ("tensorflow", "jax", "torch")
PROJECT_VENV = Path(__file__).resolve().parent.parent / ".venv"
USER_ERROR_EXIT = 2  # tracking.errors.USER_ERROR_EXIT, which cannot be imported before this check passes


def missing_modules() -> list[str]:
    """The required modules this interpreter cannot import (found without importing them)."""
    missing = [name for name in REQUIRED_MODULES if not _findable(name)]
    if not any(_findable(name) for name in BACKEND_MODULES):
        missing.append(" or ".join(BACKEND_MODULES))
    return missing


def _findable(name: str) -> bool:
    """Whether this interpreter can import `name` (found without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def ensure_project_interpreter() -> None:
    """Return if this interpreter has the project's packages; otherwise re-execute with `.venv/bin/python`, or exit 2."""
    missing = missing_modules()
    if not missing:
        return
    venv_python = PROJECT_VENV / "bin" / "python"
    in_venv = Path(sys.prefix).resolve() == PROJECT_VENV.resolve()
    named = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    lacks = f"{sys.executable} (Python {sys.version.split()[0]}) lacks the project's packages ({named})"
    if not in_venv and os.access(venv_python, os.X_OK) and hasattr(sys, "orig_argv"):
        print(
            f"note: {lacks}; running this stage with {venv_python} (activate it to skip this step: "
            f"`source .venv/bin/activate`)",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        os.execv(venv_python, [str(venv_python), *sys.orig_argv[1:]])
    fix = (
        "re-create it with `make venv`"
        if in_venv
        else "run `make run` (it sets up .venv and runs the pipeline), or activate the environment that has them "
        "(`source .venv/bin/activate`) before `dvc repro`"
    )
    print(f"error: {lacks}; {fix}", file=sys.stderr)
    sys.exit(USER_ERROR_EXIT)


ensure_project_interpreter()
# From here the project's packages import; Ctrl-C in the stage's imports is one line, not a traceback.
from tracking.run.lifecycle import quiet_start_up  # noqa: E402

quiet_start_up()
