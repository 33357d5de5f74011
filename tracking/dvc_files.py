"""The project's DVC files as the library reads them: the stages a dvc.yaml declares, their deps, the outputs
they declare, and the `dvc add` pointers (on the ground floor: config, data, provenance, repeats and inspect read
them alike). Read as plain YAML (a millisecond); a templated dvc.yaml goes through DVC's API, which resolves it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from tracking.errors import RepoError
from tracking.layout import DVC_FILE
from tracking.yaml_text import parse_dvc_file

_OUTPUT_SECTIONS = ("outs", "metrics", "plots")


# Text that marks a dvc.yaml needing DVC to resolve it (templating) before its stages can be read.
TEMPLATED = ("${", "foreach", "matrix")


def declared_outputs(root: Path, top: Path) -> list[str]:
    """Every output DVC declares in the project at `root` (outs, metrics and plots of every stage of every dvc.yaml,
    `cache: false` ones too) and every dvc.lock, as POSIX paths relative to the git top folder `top`, sorted.

    The dvc.yaml files are read as YAML, which costs milliseconds at stage start; only a project that uses
    templating (`${...}`, `foreach`, `matrix`) is read through DVC's own API, which resolves it (about a second).
    """
    found: set[str] = set()
    prefix = PurePosixPath(root.resolve().relative_to(top.resolve()).as_posix())
    for name in _dvc_files(root):
        text = (root / name).read_text(encoding="utf-8")
        if any(marker in text for marker in TEMPLATED):
            return _outputs_from_dvc(root, top)
        folder = prefix / PurePosixPath(name).parent
        found.add(normal_path(folder / "dvc.lock"))
        try:
            for stage in ((parse_dvc_file(text) or {}).get("stages") or {}).values():
                wdir = folder / stage.get("wdir", ".")
                for section in _OUTPUT_SECTIONS:
                    for entry in stage.get(section) or []:
                        for path in entry if isinstance(entry, dict) else [entry]:
                            found.add(normal_path(wdir / path))
        except (ValueError, AttributeError, TypeError) as err:
            raise RepoError(
                f"{root / name} is not a valid dvc.yaml ({str(err).splitlines()[0]}); "
                "fix it (`dvc stage list` checks it)"
            ) from err
    return sorted(found)


def _dvc_files(root: Path) -> list[str]:
    """The project's dvc.yaml files that git tracks or would track, relative to `root`."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ":(glob)**/dvc.yaml"],
        cwd=root,
        capture_output=True,
        check=True,
    )
    return sorted({name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name})


def _outputs_from_dvc(root: Path, top: Path) -> list[str]:
    """`declared_outputs` through DVC's API, for projects whose dvc.yaml files need templating resolved."""
    from dvc.repo import Repo
    from dvc.stage import PipelineStage

    with Repo(str(root)) as repo:
        stages = [stage for stage in repo.index.stages if isinstance(stage, PipelineStage)]  # not `.dvc` files
        paths = {Path(out.fs_path) for stage in stages for out in stage.outs}
        paths |= {Path(stage.dvcfile.path).with_name("dvc.lock") for stage in stages}
    return sorted(normal_path(PurePosixPath(path.resolve().relative_to(top.resolve()).as_posix())) for path in paths)


def added_outputs(root: Path) -> dict[str, list[PurePosixPath]]:
    """The project's `dvc add` pointers that git tracks or would track (`.dvc` files, relative to `root`), each with
    the paths it tracks, relative to `root` as well. Empty outside a git repository."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ":(glob)**/*.dvc"],
        cwd=root,
        capture_output=True,
    )
    found: dict[str, list[PurePosixPath]] = {}
    for name in sorted({name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name}):
        outs = (parse_dvc_file((root / name).read_text(encoding="utf-8")) or {}).get("outs") or []
        folder = PurePosixPath(name).parent
        found[name] = [PurePosixPath(normal_path(folder / str(out["path"]))) for out in outs if "path" in out]
    return found


def normal_path(path: PurePosixPath) -> str:
    """`path` without `.` parts and with `..` folded (`audit/../metrics/a.json` -> `metrics/a.json`)."""
    return os.path.normpath(str(path)).replace(os.sep, "/")


def declared_stages(root: Path, dvc_file: str = DVC_FILE) -> dict[str, Any]:
    """The stages `root / dvc_file` declares, by name, each scalar as its text ({} without the file)."""
    path = root / dvc_file
    return _stages(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _stages(text: str) -> dict[str, Any]:
    """The `stages` mapping of a dvc.yaml's text, by name ({} when it declares none)."""
    return (parse_dvc_file(text) or {}).get("stages") or {}


def within(path: PurePosixPath, deps: Iterable[PurePosixPath]) -> bool:
    """Whether the project path `path` is one of `deps` or inside one (a folder dep covers what it holds; `.` all)."""
    return any(path == dep or dep in path.parents for dep in deps)


def stage_deps(root: Path, stage: str, dvc_file: str = DVC_FILE) -> list[PurePosixPath] | None:
    """The deps of `stage` in `root / dvc_file` as paths relative to `root`; None when that file does not declare it.

    Read as plain YAML (a millisecond); a templated dvc.yaml (`${...}`, `foreach`, `matrix`) goes through DVC's
    API, which resolves it (about a second).
    """
    path = root / dvc_file
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    if any(marker in text for marker in TEMPLATED):
        return _stage_deps_from_dvc(root, stage, path)
    declared = _stages(text).get(stage)
    if not isinstance(declared, dict):
        return None
    wdir = PurePosixPath(dvc_file).parent / declared.get("wdir", ".")
    return [_relative(wdir / str(entry)) for entry in declared.get("deps") or []]


def _stage_deps_from_dvc(root: Path, stage: str, path: Path) -> list[PurePosixPath] | None:
    """`stage_deps` through DVC's API, for a dvc.yaml whose templating must be resolved."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        for found in repo.index.stages:
            if getattr(found, "name", None) == stage and Path(found.dvcfile.path).resolve() == path.resolve():
                paths = [Path(dep.fs_path).resolve() for dep in found.deps]
                inside = [path for path in paths if path.is_relative_to(root)]
                return [_relative(PurePosixPath(path.relative_to(root).as_posix())) for path in inside]
    return None


def _relative(path: PurePosixPath) -> PurePosixPath:
    """`path` as `declared_outputs` normalises stage paths: no `.` parts or trailing slash, `..` folded."""
    return PurePosixPath(normal_path(path))
