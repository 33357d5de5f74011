"""The prepared data set: loading a source, the manifest with full-content hashes, and the pin check.

A source is `sklearn:digits` (ships with scikit-learn, works offline) or a `.npz` file with arrays `x`,
`y` and optionally `groups`. The manifest's `content_sha256` is what `data.sha256` in params.yaml pins.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracking.errors import DataError, DataPinMismatch
from tracking.hashing import array_sha256, combine

SPLITS = ("train", "val", "test")
MANIFEST = "manifest.json"
PINS_DIR = Path("data/pins")
PREPARED = Path("data/prepared")


@dataclass(frozen=True)
class Source:
    """Arrays loaded from a source, before splitting."""

    x: np.ndarray
    y: np.ndarray
    groups: np.ndarray | None
    name: str


def load_source(source: str, root: Path = Path(".")) -> Source:
    """Load `sklearn:digits` or a user `.npz`, checking shapes, labels and values."""
    if source == "sklearn:digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = (digits.images / 16.0).astype("float32")[..., None]
        return Source(x=x, y=digits.target.astype("int64"), groups=None, name=source)
    if source.startswith("sklearn:"):
        raise DataError(f"data.source: unknown built-in '{source}'; use 'sklearn:digits' or a path to an .npz file")
    path = root / source
    if not path.is_file():
        raise DataError(f"data.source: file '{source}' not found; check the path or run `dvc pull` to fetch it")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise DataError(f"data.source: '{source}' is not a readable .npz file (it holds a single array, not named arrays "
                            "x and y); save it with np.savez(path, x=..., y=...)")
        with loaded as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise DataError(f"data.source: '{source}' is not a readable .npz file ({err}); re-create or re-fetch it") from err
    return _validate(arrays, source, source)


def _validate(arrays: dict[str, np.ndarray], source: str, name: str) -> Source:
    missing = [key for key in ("x", "y") if key not in arrays]
    if missing:
        raise DataError(f"data.source: '{source}' lacks array(s) {', '.join(missing)}; save it with np.savez(path, x=..., y=...)")
    x, y, groups = arrays["x"], arrays["y"], arrays.get("groups")
    if x.ndim < 2 or len(x) == 0:
        raise DataError(f"data.source: '{source}' array x must hold at least one sample of features, got shape {x.shape}; "
                        "save x with one row per sample, shape (n_samples, features...)")
    lengths = {"x": len(x), "y": len(y), **({"groups": len(groups)} if groups is not None else {})}
    if len(set(lengths.values())) != 1:
        raise DataError(f"data.source: '{source}' arrays differ in length ({lengths}); every array needs one entry per sample")
    if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1:
        raise DataError(f"data.source: '{source}' array y must be 1-D integer class labels, got {y.dtype} with shape {y.shape}; "
                        "save class indices (e.g. y.argmax(axis=1) for one-hot rows, y.astype(int) for whole-number floats)")
    if y.min() < 0:
        raise DataError(f"data.source: '{source}' array y has negative label {y.min()}; labels must be 0..n_classes-1")
    absent = _absent_classes(y)
    if absent:
        raise DataError(f"data.source: '{source}' array y has labels up to {y.max()} but classes {absent} never appear; "
                        "labels must be 0..n_classes-1 with every class present: re-encode them with np.unique(y, return_inverse=True)")
    if not np.issubdtype(x.dtype, np.number):
        raise DataError(f"data.source: '{source}' array x must be numeric, got {x.dtype}; encode the features as numbers "
                        "(e.g. x.astype('float32'))")
    finite = np.isfinite(x).reshape(len(x), -1).all(axis=1)
    if not finite.all():
        nans, infs = int(np.isnan(x).sum()), int(np.isinf(x).sum())
        raise DataError(f"data.source: '{source}' array x has NaN or infinite values ({nans} NaN, {infs} inf, in "
                        f"{int((~finite).sum())} sample(s), the first at index {int(np.argmin(finite))}); "
                        "drop or impute those samples before use")
    if x.ndim == 3:
        x = x[..., None]
    return Source(x=x.astype("float32"), y=y.astype("int64"), groups=groups, name=name)


def _absent_classes(y: np.ndarray, shown: int = 10) -> str:
    """The labels in 0..max(y) that no sample carries, as a short list ('' when there are none)."""
    present = np.unique(y)
    missing_count = int(y.max()) + 1 - len(present)
    if missing_count == 0:
        return ""
    missing = np.setdiff1d(np.arange(min(int(y.max()), len(present) + shown) + 1), present)[:shown]
    listed = ", ".join(str(label) for label in missing)
    return listed + (f" and {missing_count - len(missing)} more" if missing_count > len(missing) else "")


def build_manifest(splits: dict[str, dict[str, np.ndarray]], source: Source, n_classes: int) -> dict[str, Any]:
    """Hashes of every array written, sample and class counts, and the combined content hash."""
    origin = {"x": source.x, "y": source.y, **({"groups": source.groups} if source.groups is not None else {})}
    hashes = {f"{split}/{name}": array_sha256(array) for split, arrays in splits.items() for name, array in arrays.items()}
    return {
        "source": source.name,
        "source_sha256": combine({name: array_sha256(array) for name, array in origin.items()}),
        "content_sha256": combine(hashes),
        "arrays": hashes,
        "n_classes": n_classes,
        "n_samples": {split: int(len(arrays["y"])) for split, arrays in splits.items()},
        "class_counts": {split: _class_counts(arrays["y"], n_classes) for split, arrays in splits.items()},
        "shapes": {split: list(arrays["x"].shape[1:]) for split, arrays in splits.items()},
        "has_groups": all("groups" in arrays for arrays in splits.values()),
    }


def _class_counts(y: np.ndarray, n_classes: int) -> dict[str, int]:
    counts = Counter(int(label) for label in y)
    return {str(label): counts.get(label, 0) for label in range(n_classes)}


def check_pin(manifest: dict[str, Any], pinned: str | None, pins_dir: Path = PINS_DIR) -> None:
    """Stop when the prepared content differs from `data.sha256`, printing both hashes and the count changes."""
    actual = manifest["content_sha256"]
    if pinned is None or pinned == actual:
        return
    previous = pins_dir / f"{pinned}.json"
    if previous.is_file():
        changes = describe_count_changes(json.loads(previous.read_text()), manifest) or "counts unchanged, values differ"
    else:
        total = sum(manifest["n_samples"].values())
        changes = f"now {total} samples; no record of the pinned data's counts in {previous}"
    raise DataPinMismatch(
        f"data content sha256 {actual} differs from data.sha256 {pinned} pinned in params.yaml ({changes}); "
        "restore the pinned data (`dvc checkout`), or if the change is intended run `tracking pin-data`"
    )


def describe_count_changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Sample and per-class count changes between two manifests, e.g. 'samples 1797 -> 1897 (+100)'."""
    parts = []
    total_before, total_after = sum(before["n_samples"].values()), sum(after["n_samples"].values())
    if total_before != total_after:
        parts.append(f"samples {total_before} -> {total_after} ({total_after - total_before:+d})")
    classes_before, classes_after = _totals(before["class_counts"]), _totals(after["class_counts"])
    for label in sorted(set(classes_before) | set(classes_after), key=int):
        old, new = classes_before.get(label, 0), classes_after.get(label, 0)
        if old != new:
            parts.append(f"class {label} {old} -> {new} ({new - old:+d})")
    return "; ".join(parts)


def _totals(per_split: dict[str, dict[str, int]]) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for counts in per_split.values():
        totals.update(counts)
    return dict(totals)


def output_size(manifest: dict[str, Any]) -> int:
    """How many outputs the model needs for the prepared data: `n_outputs` (or, in older manifests, `n_classes`)."""
    return int(manifest.get("n_outputs", manifest["n_classes"]))


def read_manifest(prepared: Path) -> dict[str, Any]:
    path = prepared / MANIFEST
    if not path.is_file():
        raise DataError(f"{path} not found; run the prepare stage first (`dvc repro prepare`)")
    return json.loads(path.read_text())


def load_split(prepared: Path, split: str) -> dict[str, np.ndarray]:
    """The arrays of one split as written by the prepare stage; an unreadable file names the way to re-create it."""
    arrays = {}
    for path in sorted(prepared.glob(f"{split}_*.npy")):
        try:
            arrays[path.stem.removeprefix(f"{split}_")] = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as err:
            raise DataError(f"{path} is not a readable .npy file ({err}); re-create it with `dvc repro -f prepare` "
                            "or restore it with `dvc checkout`") from err
    if "x" not in arrays or "y" not in arrays:
        raise DataError(f"{prepared}: split '{split}' is missing; run the prepare stage first (`dvc repro prepare`)")
    return arrays


def load_splits(prepared: Path, manifest: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """Every split the manifest lists with samples (val is absent when `data.val_fraction` is 0)."""
    return {split: load_split(prepared, split) for split in SPLITS if manifest["n_samples"].get(split)}


def write_splits(prepared: Path, splits: dict[str, dict[str, np.ndarray]], manifest: dict[str, Any]) -> None:
    """Write each array as .npy (byte-stable, unlike .npz) and the manifest last."""
    prepared.mkdir(parents=True, exist_ok=True)
    for split, arrays in splits.items():
        for name, array in arrays.items():
            np.save(prepared / f"{split}_{name}.npy", array, allow_pickle=False)
    (prepared / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
