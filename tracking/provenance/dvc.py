"""DVC gatherer: the hashes DVC recorded for each stage's dependencies (dvc.lock, and a running stage's hashed
now), the experiment being run, and an output's hash at a git revision. The DVC files themselves are read by
`tracking.dvc_files`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tracking.dvc_files import declared_stages
from tracking.env import DVC_EXP_BASELINE_REV, DVC_EXP_NAME
from tracking.layout import DVC_FILE
from tracking.yaml_text import parse_dvc_file


def _redacted(name: str | None) -> str | None:
    """A name DVC was given from outside (`dvc exp run -n`), through the redactor."""
    from tracking.redaction import redact_name

    return None if name is None else redact_name(name)


def gather_dvc(root: Path, stages: tuple[str, ...] = (), running: str | None = None) -> dict[str, Any]:
    """Dependency hashes from dvc.lock (for `stages`, or all) and DVC's experiment variables; the deps of the
    `running` stage (DVC's `DVC_STAGE`) hashed now instead, since dvc.lock holds their previous run's hashes."""
    deps = lock_hashes(root / "dvc.lock", stages)
    if running:
        deps = {name: hashes for name, hashes in deps.items() if name != running}
        deps[running] = stage_hashes_now(root, running)
    return {
        "experiment": _redacted(os.environ.get(DVC_EXP_NAME)),
        "baseline_rev": _redacted(os.environ.get(DVC_EXP_BASELINE_REV)),
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

    from tracking.data.hashing import file_md5

    if path.is_file():
        return file_md5(path)
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

    Every training run reads the lock: `parse_dvc_file` reads it as text, paths and hashes as DVC wrote them.
    """
    if not lock.is_file():
        return {}
    content = parse_dvc_file(lock.read_text()) or {}
    found = {}
    for name, stage in (content.get("stages") or {}).items():
        if stages and name not in stages:
            continue
        found[name] = {str(dep["path"]): str(dep.get("md5") or dep.get("hash") or "") for dep in stage.get("deps", [])}
    return found


def locked_out_md5(project: Path, ref: str, out: str) -> str | None:
    """The hash `dvc.lock` at git revision `ref` records for the output `out` (None: no such lock or output): a
    clone has the lock file from git, but not the cache it points into."""
    import dvc.api
    from dvc.exceptions import DvcException

    try:
        lock = parse_dvc_file(dvc.api.read("dvc.lock", repo=str(project), rev=ref)) or {}
    except (DvcException, OSError):
        return None
    outs = [found for stage in (lock.get("stages") or {}).values() for found in stage.get("outs") or []]
    return next((found.get("md5") for found in outs if found.get("path") == out), None)
