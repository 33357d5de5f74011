"""A data source's arrays before splitting (`Source`) and their checks: one entry per sample, features Keras's
`fit` takes (numbers, booleans or text, finite), class labels 0..K-1 with every class present (one per sample,
or per pixel or step), multi-hot rows of 0 and 1 (`data.task: multilabel`) or finite regression targets, per-output targets of a dict `y`, groups and sample weights. A built-in, a `.npz` and a
team's loader (tracking/data/dataset.py) all pass the same checks, each mistake one `DataError` line naming
where it came from and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tracking.config.params import CLASSIFICATION, MULTILABEL
from tracking.data.arrays import Arrays, bad_key, flat
from tracking.errors import DataError

# What the keys of a dict `x` or `y` name.
ROLE_NAMES = {"x": "input", "y": "output"}


@dataclass(frozen=True)
class Source:
    """Arrays loaded from a source, before splitting: `x` one array or a dict of them by input name, `y` one array
    or a dict of them by output name."""

    x: Arrays
    y: Arrays
    groups: np.ndarray | None
    name: str
    sample_weight: np.ndarray | None = None

    def arrays(self) -> dict[str, Arrays]:
        """Every array of the source by its role, as it is split, stored and hashed."""
        optional = {"groups": self.groups, "sample_weight": self.sample_weight}
        return {"x": self.x, "y": self.y, **{role: array for role, array in optional.items() if array is not None}}


def _check_keys(value: Arrays, role: str, where: str) -> None:
    """A dict x or y needs keys that name the model's inputs or outputs and can name files: letters, digits, _
    and -."""
    key, what = bad_key(value), ROLE_NAMES[role]
    if key == "":
        raise DataError(f"{where} {role} is an empty dict; give one array per model {what}, keyed by the {what}'s name")
    if key is not None:
        raise DataError(
            f"{where} {role} has key {key!r}; name each array after the model {what} it "
            f"{'feeds' if role == 'x' else 'is the target of'}, in letters, digits, _ and - (it names the file the "
            "array is stored in)"
        )


def checked_source(arrays: dict[str, Arrays], where: str, name: str, task: str) -> Source:
    """The arrays checked for `task`: one entry per sample, features Keras's `fit` takes (numbers, booleans or
    text, any rank, finite), labels or targets that fit (a dict `y`: numbers per output, finite). Nothing is
    reshaped or re-typed but one array `y` (labels to int64, regression targets to float32)."""
    x, y, groups, weights = arrays["x"], arrays["y"], arrays.get("groups"), arrays.get("sample_weight")
    _check_keys(x, "x", where)
    _check_keys(y, "y", where)
    features = flat("x", x)
    targets = flat("y", y)
    for feature, array in features.items():
        if array.ndim < 1 or len(array) == 0:
            raise DataError(
                f"{where} array {feature} must hold at least one sample, got shape {array.shape}; "
                f"save {feature} with one entry per sample, shape (n_samples, ...)"
            )
        if array.size == 0:
            raise DataError(
                f"{where} array {feature} must hold at least one sample of features, got shape {array.shape}; "
                f"save {feature} with one entry per sample, shape (n_samples, features...)"
            )
    lengths = {
        **{name: len(array) for name, array in features.items()},
        **{name: len(array) if array.ndim else 0 for name, array in targets.items()},
        **({"groups": len(groups)} if groups is not None else {}),
        **({"sample_weight": len(weights)} if weights is not None else {}),
    }
    if len(set(lengths.values())) != 1:
        raise DataError(f"{where} arrays differ in length ({lengths}); every array needs one entry per sample")
    if isinstance(y, Mapping):
        for target, array in targets.items():
            _output_targets(array, target, where)
    else:
        y = {CLASSIFICATION: _labels, MULTILABEL: _multi_hot}.get(task, _targets)(y, where)
    if groups is not None and (groups.ndim != 1 or groups.dtype.kind not in "biuUS"):
        raise DataError(
            f"{where} array groups must be 1-D integers or strings, got {groups.dtype} with shape {groups.shape}; "
            "give one group id per sample (e.g. np.asarray(groups, dtype=str))"
        )
    for feature, array in features.items():
        _check_features(array, feature, where)
    if weights is not None:
        _check_weights(weights, where)
    return Source(x=x, y=y, groups=groups, name=name, sample_weight=weights)


def _check_weights(weights: np.ndarray, where: str) -> None:
    """One finite, non-negative float or integer weight per sample, as `fit`'s `sample_weight` takes it."""
    if weights.ndim != 1 or weights.dtype.kind not in "fiu":
        raise DataError(
            f"{where} array sample_weight must be 1-D numbers, got {weights.dtype} with shape {weights.shape}; "
            "give one weight per sample (for class weights: np.asarray(class_weight)[y])"
        )
    finite = np.isfinite(weights)
    if not finite.all() or (weights < 0).any():
        first = int(np.argmin(finite & (weights >= 0)))
        raise DataError(
            f"{where} array sample_weight has a NaN, infinite or negative weight (the first at index {first}); "
            "give every sample a finite weight >= 0"
        )


def _check_features(x: np.ndarray, name: str, where: str) -> None:
    """Features of a kind Keras takes (numbers, booleans, text): complex numbers and Python objects are refused
    (an object array cannot be saved without pickle), floats must be finite."""
    if x.dtype.kind == "O":
        raise DataError(
            f"{where} array {name} holds Python objects (dtype object), which cannot be stored without pickle; "
            f"return text as np.asarray({name}, dtype=str) and numbers as a numeric array"
        )
    if x.dtype.kind not in "biufUS":
        raise DataError(
            f"{where} array {name} has dtype {x.dtype}, which Keras cannot take as features; "
            "give numbers, booleans or text (e.g. split complex values into real and imaginary features)"
        )
    if x.dtype.kind == "f":
        _check_finite(x, name, where)


def _labels(y: np.ndarray, where: str) -> np.ndarray:
    """Class labels 0..K-1 as int64, every class present: one per sample (N,), or one per element of a sample
    (a mask's pixels (N, H, W), a sequence's steps (N, T))."""
    if not np.issubdtype(y.dtype, np.integer) or y.ndim < 1 or y.shape[1:] == (1,):
        raise DataError(
            f"{where} array y must be integer class labels (one per sample, shape (n_samples,), or one per pixel or "
            f"step), got {y.dtype} with shape {y.shape}; for data.task classification save class indices (e.g. "
            "y.ravel() for a column of labels, "
            "y.argmax(axis=1) for one-hot rows of one class each, y.astype(int) for whole-number floats), set "
            "data.task: multilabel for multi-hot rows (several labels per sample), or set data.task: regression "
            "for float targets"
        )
    if y.min() < 0:
        raise DataError(f"{where} array y has negative label {y.min()}; labels must be 0..n_classes-1")
    if y.max() == 0:
        raise DataError(
            f"{where} array y holds one class only (label 0 in every one of {len(y)} samples); a classifier needs at least 2 "
            "classes: add samples of the others, or set data.task: regression for a numeric target"
        )
    absent = _absent_classes(y)
    if absent:
        raise DataError(
            f"{where} array y has labels up to {y.max()} but classes {absent} never appear; "
            "labels must be 0..n_classes-1 with every class present: re-encode them with np.unique(y, return_inverse=True)"
        )
    return np.asarray(y, dtype="int64")


def _multi_hot(y: np.ndarray, where: str) -> np.ndarray:
    """Multi-hot rows (N, L) of 0 and 1 as int64, L labels each: a sample may carry any number of them."""
    values = np.unique(y) if y.ndim == 2 and y.dtype.kind in "biuf" else None
    if values is None or not set(values.tolist()) <= {0, 1}:
        found = f"values {values[:6].tolist()}" if values is not None else f"{y.dtype} with shape {y.shape}"
        raise DataError(
            f"{where} array y must be multi-hot rows of 0 and 1 for data.task multilabel, shape (n_samples, "
            f"n_labels), got {found}; give one column per label, 1 where the sample carries it, or set data.task: "
            "classification for one class label per sample"
        )
    return np.asarray(y, dtype="int64")


def _output_targets(y: np.ndarray, name: str, where: str) -> None:
    """One output's targets of a dict `y`: numbers (integers, floats, booleans) of any shape, one row per sample,
    finite; kept as given, whatever `data.task`, since the output's loss decides what they mean."""
    if y.ndim < 1 or y.dtype.kind not in "biuf":
        raise DataError(
            f"{where} array {name} must hold numeric targets, one row per sample, got {y.dtype} with shape "
            f"{y.shape}; save them as numbers ({name}.astype('float32'), or integer class labels)"
        )
    if y.dtype.kind == "f":
        _check_finite(y, name, where)


def _targets(y: np.ndarray, where: str) -> np.ndarray:
    """Regression targets of any shape (n, ...) as float32, every value finite."""
    if y.ndim < 1 or not np.issubdtype(y.dtype, np.number) or np.issubdtype(y.dtype, np.complexfloating):
        raise DataError(
            f"{where} array y must hold numeric targets for data.task regression, one row per sample, got "
            f"{y.dtype} with shape {y.shape}; save them as floats (y.astype('float32'))"
        )
    finite = np.isfinite(y).reshape(len(y), -1).all(axis=1)
    if not finite.all():
        raise DataError(
            f"{where} array y has NaN or infinite targets in {int((~finite).sum())} sample(s), the first at index "
            f"{int(np.argmin(finite))}; drop or impute those samples before use"
        )
    return np.asarray(y, dtype="float32")


def _check_finite(x: np.ndarray, name: str, where: str, rows: int = 4096) -> None:
    """Stop on NaN or infinite features, reading x a block of rows at a time (a memory map stays on disk)."""
    bad: list[int] = []
    nans = infs = 0
    for start in range(0, len(x), rows):
        block = np.asarray(x[start : start + rows])
        finite = np.isfinite(block).reshape(len(block), -1).all(axis=1)
        if not finite.all():
            bad += list(start + np.flatnonzero(~finite))
            nans, infs = nans + int(np.isnan(block).sum()), infs + int(np.isinf(block).sum())
    if bad:
        raise DataError(
            f"{where} array {name} has NaN or infinite values ({nans} NaN, {infs} inf, in "
            f"{len(bad)} sample(s), the first at index {bad[0]}); drop or impute those samples before use"
        )


def _absent_classes(y: np.ndarray, shown: int = 10) -> str:
    """The labels in 0..max(y) that no sample carries, as a short list ('' when there are none)."""
    present = np.unique(y)
    missing_count = int(y.max()) + 1 - len(present)
    if missing_count == 0:
        return ""
    missing = np.setdiff1d(np.arange(min(int(y.max()), len(present) + shown) + 1), present)[:shown]
    listed = ", ".join(str(label) for label in missing)
    return listed + (f" and {missing_count - len(missing)} more" if missing_count > len(missing) else "")
