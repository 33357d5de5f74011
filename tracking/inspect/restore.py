"""Restore what a run logged into a re-created project: params.yaml from its params, data from the DVC cache.

The logged values are authoritative: params.yaml is rewritten from them (every section, seeds and
determinism included), and the prepared data is checked out of the user's DVC cache at the logged hash
and accepted only if its content SHA-256 equals the logged one.
"""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path
from typing import Any

from tracking.config.params import Params
from tracking.data.hashing import array_sha256, combine
from tracking.data.manifest import MANIFEST, Manifest
from tracking.errors import RerunError
from tracking.layout import PREPARED
from tracking.redaction import was_redacted
from tracking.yaml_text import parse_yaml, yaml_editor


def params_from_logged(logged: dict[str, str]) -> dict[str, Any]:
    """The nested params.yaml content of MLflow params logged by `Tracker.log_params` (dotted, JSON-spelled).

    The keys stay as logged, also for runs of earlier versions (`seeds.split`): the run is re-created at its
    own commit, whose schema reads exactly those keys.
    """
    tree: dict[str, Any] = {}
    for key, text in sorted(logged.items()):
        *sections, name = key.split(".")
        node = tree
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = _decode(key, text)
    return tree


def write_logged_params(path: Path, logged: dict[str, str]) -> list[str]:
    """Make params.yaml hold exactly the logged params; return the dotted keys it held otherwise (missing ones too).

    A param logged redacted (a secret) cannot be restored: that is a `RerunError`. Only values that differ are
    rewritten (comments, order and spelling of the rest are kept), and the file is checked to read back, as the
    stages read it, to exactly what was logged, types included.
    """
    from ruamel.yaml.comments import CommentedMap

    redacted = sorted(key for key, text in logged.items() if was_redacted(text))
    if redacted:
        raise RerunError(
            f"param(s) {', '.join(redacted)} were logged redacted (they held secret-looking values), so params.yaml "
            "cannot be re-created; have the loader read those secrets from the environment instead, and train again"
        )
    tree, written = params_from_logged(logged), _read(path)
    wanted = _canonical(tree)
    read, before = _as_read(tree), _as_read(written)
    if read is None or before is None:  # one the schema refuses: compared as written
        read, before = wanted, _canonical(written)
    differed = sorted(key for key in read.keys() | before.keys() if read.get(key) != before.get(key))
    if not differed:  # the stages read the logged params from the file as it is (a default left out, 1 for 1.0)
        return []
    editor = yaml_editor()
    document = (editor.load(path.read_text()) if path.is_file() else None) or CommentedMap()
    for key, value in _flatten(tree).items():
        *sections, name = key.split(".")
        node = document
        for section in sections:
            if not isinstance(node.get(section), dict):
                node[section] = CommentedMap()
            node = node[section]
        if name not in node or json.dumps(node[name]) != json.dumps(value):
            node[name] = value
    with open(path, "w") as handle:
        editor.dump(document, handle)
    found = _canonical(_read(path))
    if found != wanted:
        differing = sorted(key for key in wanted.keys() | found.keys() if wanted.get(key) != found.get(key))
        raise RerunError(
            f"params.yaml cannot be made to hold exactly the logged params (differing: {', '.join(differing)})"
        )
    return differed


def params_step(file: str, logged: int, differed: list[str], shown: int = 6) -> str:
    """What a rerun says of the params file it wrote: whether the file at the run's commit already held the logged
    params, or which of them it held otherwise (a user rerunning a clean run at HEAD expects none)."""
    if not differed:
        return f"{file} at the commit already holds the {logged} logged params"
    more = f" and {len(differed) - shown} more" if len(differed) > shown else ""
    return (
        f"{file} rewritten to hold the {logged} logged params: {len(differed)} differed from the file at the commit "
        f"({', '.join(differed[:shown])}{more})"
    )


def _read(path: Path) -> dict[str, Any]:
    """params.yaml as the stages (and DVC) read it, empty when there is none."""
    return (parse_yaml(path.read_text()) or {}) if path.is_file() else {}


def _as_read(tree: dict[str, Any]) -> dict[str, str] | None:
    """Flattened as the stages read the params (validated, each default filled in, each value its field's type), as
    JSON; None for a tree the schema refuses."""
    from pydantic import ValidationError

    from tracking.config.params import Params

    try:
        return _canonical(Params.model_validate(tree).model_dump(mode="json"))
    except ValidationError:
        return None


def _canonical(tree: dict[str, Any]) -> dict[str, str]:
    """Flattened, each value as JSON, so 1, 1.0, true and "1" all differ."""
    return {key: json.dumps(value) for key, value in _flatten(tree).items()}


def _decode(key: str, text: str) -> Any:
    """A logged value back to its YAML value: text stays text for string-typed keys (a whole number too where the
    key also takes a count, as `compare.candidate_repeats` takes 3 or `auto`), JSON otherwise."""
    annotation = _annotation(key)
    if text != "null" and _admits(annotation, str):
        return int(text) if _admits(annotation, int) and re.fullmatch(r"-?[0-9]+", text) else text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _annotation(key: str) -> Any:
    """The current schema's type of `key`, or None for a key it does not know (decoded as JSON)."""
    model: Any = Params
    annotation: Any = None
    for part in key.split("."):
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        annotation = fields[part].annotation
        model = annotation
    return annotation


def _admits(annotation: Any, kind: type) -> bool:
    """Whether a value of type `kind` (str or int) fits `annotation`, a Literal's values included."""
    if annotation is kind:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return any(type(arg) is kind for arg in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_admits(arg, kind) for arg in typing.get_args(annotation))
    return False


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def dvc_cache(root: Path) -> Any:
    """The user's local DVC cache (an object database), wherever `cache.dir` puts it."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return repo.cache.local


def restore_prepared(cache: Any, project: Path, md5: str, content_sha256: str, run_id: str) -> None:
    """Check out the prepared data with DVC hash `md5` from `cache` into `project` and verify its content hash.

    Missing objects are found before anything is written, and named with the fix.
    """
    from dvc_data.hashfile import load
    from dvc_data.hashfile.checkout import checkout
    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_objects.fs.local import LocalFileSystem

    target = project / PREPARED
    missing = f"{PREPARED} of run {run_id} (DVC hash {md5}, content sha256 {content_sha256[:12]}…)"
    fix = (
        "bring it back with `dvc pull` from a checkout whose dvc.lock lists that hash "
        "(if the remote lacks it too, `dvc push` it from the machine that made the run)"
    )
    if not cache.exists(md5):
        raise RerunError(f"{missing} is not in the DVC cache {cache.path}; {fix}")
    tree = load(cache, HashInfo("md5", md5))
    absent = [name for name, _, info in tree if not cache.exists(info.value)]
    if absent:
        raise RerunError(
            f"{missing} lacks {len(absent)} of its files ({'/'.join(absent[0])}, …) in the DVC cache {cache.path}; {fix}"
        )
    checkout(str(target), LocalFileSystem(), tree, cache=cache, quiet=True)
    found = prepared_content_sha256(target)
    if found != content_sha256:
        raise RerunError(
            f"{missing} checked out of the DVC cache {cache.path} hashes to content sha256 {found}, not the logged "
            "one: the cached copy was altered; remove it from the cache and fetch it again (`dvc pull`)"
        )


def cache_dir(root: Path) -> str:
    """The folder the user's DVC cache lives in, as `cache.dir` names it (the object database sits below it)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return str(repo.cache.local_cache_dir)


def checkout_stage_inputs(project: Path, stage: str, cache: str, env: dict[str, str]) -> list[str]:
    """Check out, from the user's DVC cache, the `dvc add`-ed files and folders that `stage` of the re-created
    `project` depends on (a loader's shards, say), as the logged commit's `.dvc` files pin them; return them.

    A git worktree holds the `.dvc` files but not their data, so without this DVC could neither run the stage nor
    record its dependencies' hashes, and the re-created run would differ in its data provenance.
    """
    import subprocess
    import sys

    from tracking.dvc_files import added_outputs, stage_deps

    deps = stage_deps(project, stage) or []
    targets = [
        pointer
        for pointer, paths in added_outputs(project).items()
        if any(path == dep or dep in path.parents or path in dep.parents for path in paths for dep in deps)
    ]
    if not targets:
        return []
    for command in (["config", "--local", "cache.dir", cache], ["checkout", *targets]):
        done = subprocess.run(
            [sys.executable, "-m", "dvc", *command], cwd=project, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            said = (done.stderr + done.stdout).strip().splitlines()
            reason = said[-1] if said else f"exit status {done.returncode}"
            raise RerunError(
                f"the files stage {stage} reads ({', '.join(targets)}) could not be checked out of the DVC cache "
                f"{cache} at the logged commit ({reason}); bring them back with `dvc pull` and run again"
            )
    return [target.removesuffix(".dvc") for target in targets]


def find_directory(cache: Any, content_sha256: str) -> str | None:
    """The DVC hash of a cached prepared-data directory whose manifest records `content_sha256`, if any.

    For runs that logged no DVC hash of their data (their evaluate stage did not run); the content hash is
    still verified against the arrays after checkout.
    """
    from dvc_data.hashfile import load
    from dvc_data.hashfile.hash_info import HashInfo

    for oid in cache.all():
        if not oid.endswith(".dir"):
            continue
        entries = {name: info.value for name, _, info in load(cache, HashInfo("md5", oid))}
        manifest = entries.get((MANIFEST,))
        if manifest and cache.exists(manifest):
            recorded = Manifest.from_dict(json.loads(Path(cache.oid_to_path(manifest)).read_text()))
            if recorded.content_sha256 == content_sha256:
                return oid
    return None


def prepared_content_sha256(prepared: Path) -> str:
    """The content hash the prepare stage's manifest records, recomputed from every array written there."""
    import numpy as np

    hashes = {}
    for path in sorted(prepared.glob("*.npy")):
        split, name = path.stem.split("_", 1)
        hashes[f"{split}/{name}"] = array_sha256(np.load(path, mmap_mode="r", allow_pickle=False))
    return combine(hashes)
