"""DVC gatherer: the hashes DVC recorded for each stage's dependencies, the experiment being run, and the
outputs DVC declares (which the git gatherer leaves out of the captured diff: they are results, not code)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from ruamel.yaml.error import YAMLError

from tracking.env import DVC_EXP_BASELINE_REV, DVC_EXP_NAME
from tracking.errors import RepoError
from tracking.layout import DVC_FILE
from tracking.yaml_text import parse_yaml


def gather_dvc(root: Path, stages: tuple[str, ...] = (), running: str | None = None) -> dict[str, Any]:
    """Dependency hashes from dvc.lock (for `stages`, or all) and DVC's experiment variables; the deps of the
    `running` stage (DVC's `DVC_STAGE`) hashed now instead, since dvc.lock holds their previous run's hashes."""
    deps = lock_hashes(root / "dvc.lock", stages)
    if running:
        deps = {name: hashes for name, hashes in deps.items() if name != running}
        deps[running] = stage_hashes_now(root, running)
    return {
        "experiment": os.environ.get(DVC_EXP_NAME),
        "baseline_rev": os.environ.get(DVC_EXP_BASELINE_REV),
        "deps": deps,
    }


def stage_hashes_now(root: Path, stage: str) -> dict[str, str]:
    """{dep path: md5} of `stage`'s file deps as they are now, as DVC 3 will lock them (MD5 of the bytes); a
    folder dep gets the MD5 of its files' sorted "path md5" lines, marked `.files`, not DVC's `.dir` hash.
    `stage` is DVC's address (`train`, or `sub/dvc.yaml:train`); empty when dvc.yaml does not declare it."""
    file, _, name = stage.rpartition(":")
    declared = declared_stages(root, file or DVC_FILE).get(name) or {}
    folder = (root / (file or DVC_FILE)).parent / declared.get("wdir", ".")
    return {str(dep): _md5_now(folder / str(dep)) for dep in declared.get("deps") or [] if isinstance(dep, str)}


def _md5_now(path: Path) -> str:
    """MD5 of a file's bytes; of a folder's sorted file lines (`.files`); empty for a path that does not exist."""
    import hashlib

    if path.is_file():
        return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
    if path.is_dir():
        lines = "".join(
            f"{item.relative_to(path).as_posix()} {_md5_now(item)}\n"
            for item in sorted(path.rglob("*"))
            if item.is_file()
        )
        return hashlib.md5(lines.encode(), usedforsecurity=False).hexdigest() + ".files"
    return ""


def lock_hashes(lock: Path, stages: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """{stage: {dep path: md5}} as recorded in dvc.lock; empty when the lock does not exist yet.

    Read with libyaml's C loader rather than `parse_yaml` (ruamel.yaml, pure Python): every training run reads
    the lock, and the default pipeline's takes 5 ms so against 50 ms through ruamel.yaml. Paths and hashes read the same either way:
    DVC quotes any that YAML would take for a number.
    """
    import yaml

    if not lock.is_file():
        return {}
    content = yaml.load(lock.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    found = {}
    for name, stage in (content.get("stages") or {}).items():
        if stages and name not in stages:
            continue
        found[name] = {str(dep["path"]): str(dep.get("md5") or dep.get("hash") or "") for dep in stage.get("deps", [])}
    return found


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
            for stage in ((parse_yaml(text) or {}).get("stages") or {}).values():
                wdir = folder / stage.get("wdir", ".")
                for section in _OUTPUT_SECTIONS:
                    for entry in stage.get(section) or []:
                        for path in entry if isinstance(entry, dict) else [entry]:
                            found.add(normal_path(wdir / path))
        except (YAMLError, AttributeError, TypeError) as err:
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
        outs = (parse_yaml((root / name).read_text(encoding="utf-8")) or {}).get("outs") or []
        folder = PurePosixPath(name).parent
        found[name] = [PurePosixPath(normal_path(folder / str(out["path"]))) for out in outs if "path" in out]
    return found


def normal_path(path: PurePosixPath) -> str:
    """`path` without `.` parts and with `..` folded (`audit/../metrics/a.json` -> `metrics/a.json`)."""
    return os.path.normpath(str(path)).replace(os.sep, "/")


def declared_stages(root: Path, dvc_file: str = DVC_FILE) -> dict[str, Any]:
    """The stages `root / dvc_file` declares, by name, as plain YAML holds them ({} without the file)."""
    path = root / dvc_file
    return _stages(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _stages(text: str) -> dict[str, Any]:
    """The `stages` mapping of a dvc.yaml's text, by name ({} when it declares none)."""
    return (parse_yaml(text) or {}).get("stages") or {}


def locked_out_md5(project: Path, ref: str, out: str) -> str | None:
    """The hash `dvc.lock` at git revision `ref` records for the output `out` (None: no such lock or output): a
    clone has the lock file from git, but not the cache it points into."""
    import dvc.api
    from dvc.exceptions import DvcException

    try:
        lock = parse_yaml(dvc.api.read("dvc.lock", repo=str(project), rev=ref)) or {}
    except (DvcException, OSError):
        return None
    outs = [found for stage in (lock.get("stages") or {}).values() for found in stage.get("outs") or []]
    return next((found.get("md5") for found in outs if found.get("path") == out), None)


def within(path: PurePosixPath, deps: Iterable[PurePosixPath]) -> bool:
    """Whether the project path `path` is one of `deps` or inside one (a folder dep covers what it holds; `.` all)."""
    return any(path == dep or dep in path.parents for dep in deps)


def stage_deps(root: Path, stage: str, dvc_file: str = DVC_FILE) -> list[PurePosixPath] | None:
    """The deps of `stage` in `root / dvc_file` as paths relative to `root`; None when that file does not declare it.

    Read as plain YAML (milliseconds); a templated dvc.yaml (`${...}`, `foreach`, `matrix`) goes through DVC's
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
