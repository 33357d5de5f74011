"""The prepared data set: loading a source, splitting it, the pin check, and the arrays on disk (their manifest,
with full-content hashes, is `tracking.data.manifest`).

A source is a scikit-learn built-in (`sklearn:digits`, `sklearn:breast_cancer`, `sklearn:diabetes`: they ship
with scikit-learn, so it works offline), a `.npz` file with arrays `x`, `y` and optionally `groups` and
`sample_weight` (one non-negative weight per sample, which training passes to `fit`), or a team's
`data.loader` function returning those arrays (memory-mapped `.npy` allowed: hashes read it in chunks) or a
`tf.data.Dataset` or `keras.utils.PyDataset` of batches, read once into memory-mapped arrays
(tracking/data/streamed.py); each passes the same checks (tracking/data/source.py).
`x` is kept as given: one array or a dict of arrays keyed by the model's input names (`x.<name>` in a `.npz`),
any rank and dtype `fit` takes (numbers, booleans, text); `data.task` decides what one array `y`
holds: class labels 0..K-1 (one per sample, or per pixel or step), multi-hot rows, or float regression targets
of any shape. `y` may also be a dict of arrays keyed by the
model's output names (`y.<name>` in a `.npz`): each output's targets are numbers of any shape, kept as given. The manifest's `content_sha256` is what `data.sha256` in params.yaml pins.
"""

from __future__ import annotations

import inspect
import json
import logging
import shutil
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from tracking import startup
from tracking.config.params import CLASSIFICATION, DEFAULT_SPLIT_SEED, REGRESSION, DataParams
from tracking.config.references import referenced_values, resolved
from tracking.config.user_code import load_callable, source_file, team_call
from tracking.data.arrays import SEPARATOR, Arrays, flat, nested
from tracking.data.manifest import MANIFEST, Manifest, Origin
from tracking.data.npz import read_npz
from tracking.data.source import ROLE_NAMES, Source, checked_source
from tracking.data.streamed import is_dataset, seed_loader_randomness, streamed_arrays
from tracking.dvc_files import stage_deps, within
from tracking.errors import DataError, DataPinMismatch, UserCodeError, not_a_readable_file
from tracking.layout import DVC_FILE, PINS_DIR, PREPARE
from tracking.progress import Progress
from tracking.redaction import redact_name, redact_param, redact_text, secret_values
from tracking.yaml_text import flatten

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")


# scikit-learn's shipped sets (no download) and the task each one is for.
BUILTIN_TASKS = {
    "sklearn:digits": CLASSIFICATION,
    "sklearn:breast_cancer": CLASSIFICATION,
    "sklearn:diabetes": REGRESSION,
}
LOADER_KEYS = ("x", "y", "groups", "sample_weight")
NPY_MAGIC = b"\x93NUMPY"  # how a single array's .npy file starts


def load_data(data: DataParams, root: Path = Path("."), scratch: Path | None = None) -> Source:
    """The samples `data.source` or `data.loader` names, checked for `data.task`; a loader's dataset is read into
    memory-mapped arrays under `scratch`, which must outlive the source's use."""
    if data.loader is not None:
        return load_from_loader(data.loader, data.kwargs, root, data.task, scratch, data.split_seed)
    return load_source(data.source, root, data.task)


def load_source(source: str, root: Path = Path("."), task: str = CLASSIFICATION) -> Source:
    """Load a scikit-learn built-in or a user `.npz`, checking shapes, labels and values for `task`."""
    if source in BUILTIN_TASKS:
        if BUILTIN_TASKS[source] != task:
            raise DataError(
                f"data.task: '{source}' is a {BUILTIN_TASKS[source]} set but data.task is {task}; "
                f"set data.task: {BUILTIN_TASKS[source]} in params.yaml"
            )
        return _builtin(source)
    if source.startswith("sklearn:"):
        names = ", ".join(f"'{name}'" for name in BUILTIN_TASKS)
        raise DataError(f"data.source: unknown built-in '{source}'; use {names}, or a path to an .npz file")
    path = root / source
    kind = not_a_readable_file(path)
    if kind == "not found":
        raise DataError(f"data.source: file '{source}' not found; check the path or run `dvc pull` to fetch it")
    if kind is not None:
        raise DataError(f"data.source: '{source}' is {kind}, not a file", fix="name an .npz file in data.source")
    _warn_untracked(source, path, root)
    with open(path, "rb") as handle:
        single_array = handle.read(len(NPY_MAGIC)) == NPY_MAGIC
    if single_array:
        raise DataError(
            f"data.source: '{source}' is not a readable .npz file (it holds a single array, not named arrays "
            "x and y); save it with np.savez(path, x=..., y=...)"
        )
    try:
        stored = read_npz(path, f"data.source: '{source}'")
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise DataError(
            f"data.source: '{source}' is not a readable .npz file ({err}); re-create or re-fetch it"
        ) from err
    for role, what in (("x", "input"), ("y", "output")):
        if role in stored and any(name.startswith(f"{role}{SEPARATOR}") for name in stored):
            raise DataError(
                f"data.source: '{source}' holds both an array {role} and arrays {role}.<name>; save either one "
                f"array {role} or one array {role}.<{what} name> per model {what}"
            )
    arrays = nested({name: array for name, array in stored.items() if name.partition(SEPARATOR)[0] in ("x", "y")})
    arrays.update({name: array for name, array in stored.items() if SEPARATOR not in name})
    missing = [key for key in ("x", "y") if key not in arrays]
    if missing:
        raise DataError(
            f"data.source: '{source}' lacks array(s) {', '.join(missing)}; save it with np.savez(path, x=..., y=...)"
        )
    return checked_source(arrays, f"data.source: '{source}'", source, task)


def _warn_untracked(source: str, path: Path, root: Path) -> None:
    """Warn when DVC does not track `data.source`: outside the project, or outside every dependency of `prepare`.

    Such a file works, but a change to it re-runs nothing and `dvc pull` cannot restore it; only a `data.sha256`
    pin notices it changed. No warning without a dvc.yaml declaring the stage (a script, a benchmark).
    """
    project = root.resolve()
    deps = stage_deps(project, PREPARE)
    if deps is None:
        return
    resolved = path.resolve()
    if resolved.is_relative_to(project):
        relative = PurePosixPath(resolved.relative_to(project).as_posix())
        if within(relative, deps):
            return
        where = f"not under a dependency of stage {PREPARE} in {DVC_FILE}"
    else:
        where = "outside the project"
    log.warning(
        "data.source: '%s' is %s, so DVC neither re-runs %s when it changes nor restores it with `dvc pull`; "
        "put it under data/raw/ and `dvc add` it (or pin its content with `tracking pin-data`)",
        source,
        where,
        PREPARE,
    )


def _builtin(source: str) -> Source:
    from sklearn import datasets

    if source == "sklearn:digits":
        digits = datasets.load_digits()
        x = (digits.images / 16.0).astype("float32")[..., None]
        return Source(x=x, y=digits.target.astype("int64"), groups=None, name=source)
    if source == "sklearn:breast_cancer":
        found = datasets.load_breast_cancer()
        x = found.data
        x = ((x - x.mean(axis=0)) / x.std(axis=0)).astype("float32")  # features span 1e-3..1e3: standardise
        return Source(x=x, y=found.target.astype("int64"), groups=None, name=source)
    found = datasets.load_diabetes()  # features already centred and scaled by scikit-learn
    y = found.target
    return Source(
        x=found.data.astype("float32"), y=((y - y.mean()) / y.std()).astype("float32"), groups=None, name=source
    )


def load_from_loader(
    spec: str,
    kwargs: dict[str, Any],
    root: Path,
    task: str,
    scratch: Path | None = None,
    seed: int = DEFAULT_SPLIT_SEED,
) -> Source:
    """Call the team's `data.loader` with `data.kwargs` and check what it returns: a mapping of arrays x, y, groups,
    or a `tf.data.Dataset` or `keras.utils.PyDataset` of batches, read once into memory-mapped arrays under
    `scratch` (tracking/data/streamed.py); the loader runs with Python's, NumPy's and TensorFlow's global generators
    seeded with `seed`, so its own unseeded randomness draws the same on every prepare."""
    loader = load_callable(spec, "data.loader", root)
    where = f"data.loader: '{spec}'"
    try:
        inspect.signature(loader).bind(**kwargs)
    except TypeError as err:
        raise UserCodeError(
            f"{where} cannot be called with data.kwargs {_shown(kwargs)} ({err}); "
            "make data.kwargs match the loader's parameters in params.yaml"
        ) from err
    except ValueError:  # no signature to check (a builtin): the call itself says
        pass
    seed_loader_randomness(seed)
    returned = _call_loader(loader, resolved(kwargs, "data.kwargs."), where, root, referenced_values(kwargs))
    if is_dataset(returned):
        if scratch is None:
            raise DataError(f"{where} returned a dataset where only arrays are taken; return a dict with arrays x, y")
        return checked_source(streamed_arrays(returned, where, scratch), where, f"loader:{spec}", task)
    if not isinstance(returned, Mapping):
        raise DataError(
            f"{where} returned a {type(returned).__name__}, not a mapping; return a dict with arrays x, y "
            "(and optionally groups, sample_weight), or a tf.data.Dataset or keras.utils.PyDataset of batches "
            "(x, y) as fit takes them"
        )
    unknown = sorted(str(key) for key in returned if key not in LOADER_KEYS)
    missing = [key for key in ("x", "y") if key not in returned]
    if missing or unknown:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown key(s) {', '.join(unknown)}"
        raise DataError(
            f"{where} returned a mapping that {problem}; return exactly the keys x, y and optionally groups, "
            "sample_weight"
        )
    arrays = {}
    for key, value in returned.items():
        named = key in ("x", "y") and isinstance(value, Mapping)
        for name, array in value.items() if named else [(None, value)]:
            if not isinstance(array, np.ndarray):
                what = f"a dict of NumPy arrays by {ROLE_NAMES[key]} name, or " if key in ROLE_NAMES else ""
                shown = key if name is None else f"{key}[{name!r}]"
                raise DataError(
                    f"{where} returned {shown} as a {type(array).__name__}; return {what}NumPy arrays "
                    f"(np.asarray({key}), or np.load(path, mmap_mode='r') for a large .npy)"
                )
        arrays[key] = dict(value) if named else value
    return checked_source(arrays, where, f"loader:{spec}", task)


def _shown(kwargs: dict[str, Any]) -> dict[str, str]:
    """`data.kwargs` as an error line may show them: flattened, each value as logged, secrets redacted."""
    return {key: redact_param(key, value)[0] for key, value in flatten(kwargs, "data.kwargs.").items()}


def _call_loader(loader: Callable[..., Any], kwargs: dict[str, Any], where: str, root: Path, known: set[str]) -> Any:
    """What the team's loader returns; its exception, or its `sys.exit` or `os._exit` (`team_call`), is one line
    naming the loader's file, without the credentials it was given (by name, or `known`: read from the environment)."""
    file = source_file(loader)
    shown = file.relative_to(root.resolve()) if file is not None and file.is_relative_to(root.resolve()) else file
    fix = f"fix the loader ({shown})" if shown else "fix the loader"
    exited_fix = f"{fix} to return a dict of arrays x, y (and optionally groups), or to raise an exception saying why"
    with team_call(where, "returning its arrays", fix=exited_fix):
        try:
            return loader(**kwargs)
        except MemoryError as err:
            raise DataError(
                f"{where} ran out of memory",
                fix="free memory, or return memory-mapped arrays (np.load(path, mmap_mode='r')) from the loader",
            ) from err
        except Exception as err:  # the team's code failed: its error is the message, ours only says where
            reason = redact_text((str(err).strip().splitlines() or [""])[0], secret_values(kwargs) | known)[:300]
            raise UserCodeError(
                f"{where} raised {type(err).__name__}" + (f": {reason}" if reason else ""),
                fix=f"{fix} or data.kwargs in params.yaml",
            ) from err


def build_manifest(
    splits: dict[str, dict[str, Arrays]],
    source: Source,
    task: str = CLASSIFICATION,
    origin: Origin | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """The manifest of `splits`, split from `source` (whose name is redacted: a token in a file's name stays on this
    machine); `origin` is what was read of the source before a split that consumed it; hashing advances
    `progress`."""
    found = origin if origin is not None else Origin.of(source.arrays(), task, progress)
    return Manifest.build(splits, found, redact_name(source.name), task, progress)


def check_pin(manifest: Manifest, pinned: str | None, pins_dir: Path = PINS_DIR) -> None:
    """Stop when the prepared content differs from `data.sha256`, printing both hashes and the count changes."""
    actual = manifest.content_sha256
    if pinned is None or pinned == actual:
        return
    previous = pins_dir / f"{pinned}.json"
    if previous.is_file():
        before = Manifest.from_dict(json.loads(previous.read_text()), str(previous))
        changes = before.count_changes(manifest) or "counts unchanged, values differ"
    else:
        changes = f"now {manifest.total} samples; no record of the pinned data's counts in {previous}"
    raise DataPinMismatch(
        f"data content sha256 {actual} differs from data.sha256 {pinned} pinned in params.yaml ({changes}); "
        "restore the pinned data (`dvc checkout`), or if the change is intended run `tracking pin-data`"
    )


def _mapped_from(array: np.ndarray, path: Path) -> bool:
    """Whether `array` is memory-mapped from the file `path`."""
    filename = getattr(array, "filename", None)
    return filename is not None and Path(filename) == path.resolve()


def _read_split(prepared: Path, split: str) -> dict[str, Arrays]:
    """The arrays of one split as written by the prepare stage (`x` a dict where the data has named inputs),
    memory-mapped read-only: training and scoring read them a batch at a time, so memory does not grow with the
    data set. An unreadable file names the way to re-create it."""
    arrays = {}
    for path in sorted(prepared.glob(f"{split}_*.npy")):
        try:
            arrays[path.stem.removeprefix(f"{split}_")] = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError) as err:
            raise DataError(
                f"{path} is not a readable .npy file ({err}); re-create it with `dvc repro -f {PREPARE}` "
                "or restore it with `dvc checkout`"
            ) from err
    found = nested(arrays)
    if "x" not in found or "y" not in found:
        raise DataError(
            f"{prepared}: split '{split}' is missing; run the {PREPARE} stage first (`dvc repro {PREPARE}`)"
        )
    return found


def load_split(prepared: Path, split: str) -> dict[str, Arrays]:
    """One split's arrays (`_read_split`), its mapping the start-up line's `data`."""
    found = _read_split(prepared, split)
    startup.mark(startup.DATA)
    return found


def load_splits(prepared: Path, manifest: Manifest) -> dict[str, dict[str, Arrays]]:
    """Every split the manifest lists with samples (val is absent when `data.val_fraction` is 0)."""
    found = {split: _read_split(prepared, split) for split in SPLITS if manifest.n_samples.get(split)}
    startup.mark(startup.DATA)
    return found


def staging_folder(prepared: Path) -> Path:
    """The sibling folder the prepared arrays are written into before it takes `prepared`'s place."""
    return prepared.with_name(f".{prepared.name}.partial")


def split_file(split: str, name: str) -> str:
    """The file name of a split's array `name` (flat: `x`, `x.title`, `y`)."""
    return f"{split}_{name}.npy"


def write_splits(prepared: Path, splits: dict[str, dict[str, Arrays]], manifest: Manifest) -> None:
    """Write each array as .npy (byte-stable, unlike .npz) and the manifest last, into a sibling folder that then
    takes `prepared`'s place: a full disk or a read-only project leaves no half-written set, only one error line.
    An array already memory-mapped from its file in that folder (the split of a memory-mapped source) is kept as
    it is, not written twice."""
    staging = staging_folder(prepared)
    try:
        staging.mkdir(parents=True, exist_ok=True)
        for split, arrays in splits.items():
            for role, value in arrays.items():
                for name, array in flat(role, value).items():
                    path = staging / split_file(split, name)
                    if not _mapped_from(array, path):
                        np.save(path, array, allow_pickle=False)
        (staging / MANIFEST).write_text(manifest.dumps())
        if prepared.exists():
            shutil.rmtree(prepared)
        staging.rename(prepared)
    except OSError as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise DataError(
            f"{prepared} cannot be written ({err.strerror or err}: {err.filename or staging})",
            fix=f"free space or make the folder writable, then re-run `dvc repro {PREPARE}`",
        ) from err
