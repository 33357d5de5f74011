"""A team's own code named in params.yaml as "package.module:function": found, imported and described.

Modules are searched at the project root first (so a team's `models/resnet.py` is `models.resnet:build`),
then among installed packages. What was imported is recorded (file hash, package version) so a run says which
version of the team's code trained it.

A team's module inside the project is a DVC dependency of every stage that runs it (`require_stage_dep`), so
editing the builder re-runs train and calibrate: the stage refuses to run while dvc.yaml does not list it.

A team's function is called inside `team_call`, so that it cannot end the stage's process: its `sys.exit` or
`os._exit` becomes one error line naming it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

from tracking.dvc_files import added_outputs, stage_deps, within
from tracking.errors import UserCodeError
from tracking.layout import DVC_FILE


def load_callable(spec: str, key: str, root: Path) -> Callable[..., Any]:
    """The function `spec` names; a `UserCodeError` naming `key` when it does not import or is not callable."""
    module_name, _, attribute = spec.partition(":")
    module = import_module(module_name, key, root)
    found = getattr(module, attribute, None)
    if found is None:
        raise UserCodeError(
            f"{key}: module '{module_name}' ({getattr(module, '__file__', '?')}) has no '{attribute}'; "
            f"name a function defined there, e.g. '{module_name}:build', in params.yaml"
        )
    if not callable(found):
        raise UserCodeError(
            f"{key}: '{spec}' is a {type(found).__name__}, not a function; name a callable in params.yaml"
        )
    return found


def import_module(module_name: str, key: str, root: Path) -> Any:
    """Import `module_name` with the project root first on the path."""
    root_entry = str(root.resolve())
    if root_entry not in sys.path:
        sys.path.insert(0, root_entry)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            raise UserCodeError(
                f"{key}: no module '{module_name}' at the project root ({root_entry}) or among installed "
                "packages; check the spelling in params.yaml or install the package"
            ) from err
        raise UserCodeError(f"{key}: module '{module_name}' failed to import: {err}; install what it needs") from err
    except Exception as err:  # the user's module raised while importing: show its error, not ours
        raise UserCodeError(
            f"{key}: module '{module_name}' raised {type(err).__name__} while importing: {err}; fix the module"
        ) from err


class ExitAttempt(BaseException):
    """Raised in place of `os._exit(status)` while a team's function runs. A `BaseException`, as `SystemExit` is,
    so the team's own `except Exception` does not swallow it."""

    def __init__(self, status: object) -> None:
        super().__init__(status)
        self.status = status


@contextmanager
def team_call(where: str, instead: str, fix: str) -> Iterator[None]:
    """Run a team's function so that it cannot end the process: its `sys.exit(...)` or `os._exit(...)` is one
    `UserCodeError` naming it (`where`: "model.builder: 'models.net:build'") and saying it tried to exit instead
    of `instead` ("returning a model"), with `fix`.

    `os._exit` ends a process at once, past every handler, with the team's status: a stage exiting 0 with no
    output looked like success to DVC. While the function runs it raises `ExitAttempt` instead, in the process
    and thread that called the function only (a worker process it forks, such as multiprocessing's, and other
    threads exit as they mean to); it is restored after.
    """
    real = os._exit
    caller = (os.getpid(), threading.get_ident())

    def refuse(status: int) -> NoReturn:
        if (os.getpid(), threading.get_ident()) != caller:
            real(status)
        raise ExitAttempt(status)

    os._exit = refuse
    try:
        yield
    except SystemExit as err:
        raise UserCodeError(f"{where} called sys.exit({err.code!r}) instead of {instead}", fix=fix) from err
    except ExitAttempt as err:
        raise UserCodeError(
            f"{where} called os._exit({err.status!r}) to end the process instead of {instead}", fix=fix
        ) from err
    finally:
        os._exit = real


def describe_callable(spec: str, function: Callable[..., Any], root: Path) -> dict[str, str]:
    """Where `function` came from: its module's file (relative to the project when inside it), SHA-256, package version."""
    resolved = source_file(function)
    record = {"spec": spec}
    if resolved is not None:
        inside = resolved.is_relative_to(root.resolve()) and "site-packages" not in resolved.parts
        record["file"] = str(resolved.relative_to(root.resolve())) if inside else str(resolved)
        record["file_sha256"] = hashlib.sha256(resolved.read_bytes()).hexdigest()
        if not inside:
            record["package_version"] = _distribution_version(spec.partition(":")[0])
    return record


def _distribution_version(module_name: str) -> str:
    """The installed distribution version that provides `module_name`'s top-level package, or 'unknown'."""
    top = module_name.split(".")[0]
    for distribution in importlib.metadata.packages_distributions().get(top, []):
        try:
            return f"{distribution} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def source_file(function: Callable[..., Any]) -> Path | None:
    """The resolved file of the module defining `function`; None for built-in or dynamically made code."""
    module = sys.modules.get(getattr(function, "__module__", ""), None)
    file = Path(getattr(module, "__file__", "") or "")
    return file.resolve() if file.is_file() else None


def require_stage_dep(
    function: Callable[..., Any], key: str, stages: Sequence[str], root: Path, dvc_file: str = DVC_FILE
) -> None:
    """Refuse to run with a team's `function` whose module file DVC would not see change in one of `stages`.

    `key` is the params.yaml key naming it (model.builder, train.loss, data.loader). The rule applies to a
    file inside the project (not an installed package, whose version provenance records instead), for each of
    `stages` the project's `dvc_file` (relative to `root`) declares: one of that stage's `deps` must be the file or
    a folder holding it. Without a dvc.yaml declaring the stage (benchmarks, tests calling the training core)
    there is no rule. Call it before opening an MLflow run, so a refused stage leaves none.
    """
    file = source_file(function)
    project = root.resolve()
    if file is None or not file.is_relative_to(project) or "site-packages" in file.parts:
        return
    require_path_dep(PurePosixPath(file.relative_to(project).as_posix()), key, stages, project, dvc_file)


def require_path_dep(
    relative: PurePosixPath, key: str, stages: Sequence[str], root: Path, dvc_file: str = DVC_FILE
) -> None:
    """Refuse to run while the project file or folder `relative` (what `key` names) is not one of the deps of each
    of `stages`, nor inside one: DVC would not re-run those stages when it changes. One line names every stage
    that lacks it; a stage `dvc_file` does not declare has no rule."""
    lacking = []
    for stage in stages:
        deps = stage_deps(root, stage, dvc_file)
        if deps is not None and not within(relative, deps):
            lacking.append(stage)
    if lacking:
        named = f"stage {lacking[0]}" if len(lacking) == 1 else f"stages {', '.join(lacking[:-1])} and {lacking[-1]}"
        raise UserCodeError(
            f"{key}: {relative} is not a dependency of {named}, so DVC would not re-run "
            f"{'it' if len(lacking) == 1 else 'them'} when it changes; add `- {relative}` under deps of {named} "
            f"in {dvc_file}"
        )


def require_loader_inputs(inputs: list[str], kwargs: dict[str, Any], stage: str, root: Path) -> None:
    """What a loader reads is a dependency of `stage`: every `data.inputs` entry (which must exist), and every
    `data.kwargs` value naming a file or folder inside the project that reads as a path (a `/`, a file suffix) or
    that `dvc add` tracks. A file outside the project is not checked."""
    project = root.resolve()
    named = [("data.inputs", entry, True) for entry in inputs]
    named += [
        (f"data.kwargs.{name}", value, False)
        for name, value in kwargs.items()
        if isinstance(value, str) and ("/" in value or PurePosixPath(value).suffix or _dvc_added(project, value))
    ]
    for key, entry, declared in named:
        path = (project / entry).resolve()
        if not path.exists():
            if declared:
                raise UserCodeError(
                    f"{key}: '{entry}' does not exist in the project ({project}); list the files or folders "
                    "data.loader reads, relative to the project root (`dvc add` them, or pull them with `dvc pull`)"
                )
            continue
        if path.is_relative_to(project) and path != project:
            require_path_dep(PurePosixPath(path.relative_to(project).as_posix()), key, (stage,), project)


def _dvc_added(root: Path, relative: str) -> bool:
    """Whether `dvc add` tracks `relative`, or a folder holding it."""
    path = PurePosixPath(relative)
    return any(within(path, outs) for outs in added_outputs(root).values())
