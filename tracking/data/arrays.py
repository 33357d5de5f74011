"""Features and targets as Keras's `fit` takes them: one array, or a dict of arrays keyed by the model's input
(or output) names; their rows, their shapes, and the flat names (`x` or `x.title`, `y.priority`) under which each
array is stored and hashed."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import numpy as np

Arrays: TypeAlias = np.ndarray | dict[str, np.ndarray]
Shapes: TypeAlias = tuple[int, ...] | dict[str, tuple[int, ...]]
# Between an array's role and its key in a flat name (`x.title`): in file names (`train_x.title.npy`), in the
# manifest's hashes (`train/x.title`) and in a `.npz`'s array names.
SEPARATOR = "."
# What a key of a dict of arrays may be: it becomes part of a file name.
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")


def flat(role: str, value: Arrays) -> dict[str, np.ndarray]:
    """`{role: array}` for one array, `{role.key: array}` for each array of a dict, keys sorted."""
    if isinstance(value, Mapping):
        return {f"{role}{SEPARATOR}{key}": value[key] for key in sorted(value)}
    return {role: value}


def nested(arrays: Mapping[str, np.ndarray]) -> dict[str, Arrays]:
    """The inverse of `flat` over several roles: `{"x.title": a, "x.body": b, "y": c}` to `{"x": {...}, "y": c}`."""
    found: dict[str, Any] = {}
    for name, array in arrays.items():
        role, separator, key = name.partition(SEPARATOR)
        if separator:
            found.setdefault(role, {})[key] = array
        else:
            found[role] = array
    return found


def bad_key(value: Arrays) -> str | None:
    """The first key of a dict of arrays that cannot name a file (or '' for an empty dict); None when all can."""
    if not isinstance(value, Mapping):
        return None
    if not value:
        return ""
    return next((str(key) for key in value if not (isinstance(key, str) and KEY_PATTERN.match(key))), None)


def n_rows(value: Arrays) -> int:
    """Samples in `value`: the length of its (first) array."""
    return len(next(iter(value.values()))) if isinstance(value, Mapping) else len(value)


def rows(value: Arrays, index: Any) -> Arrays:
    """The samples `index` (a slice or integer positions) of every array in `value`, in its structure."""
    return map_arrays(lambda array: array[index], value)


def widths(value: Arrays) -> int | dict[str, int]:
    """Values per sample of each array (1 for a 1-D array): what a builder receives as `n_outputs` for a dict `y`."""
    return map_arrays(lambda array: int(np.prod(array.shape[1:], dtype=np.int64)), value)


def columns(value: Arrays) -> np.ndarray:
    """Every value of `value` per sample, as one (N, total) array: a dict's arrays flattened in key order."""
    arrays = [value[key] for key in sorted(value)] if isinstance(value, Mapping) else [value]
    return np.concatenate([np.asarray(array).reshape(len(array), -1) for array in arrays], axis=1)


def shapes(value: Arrays) -> Shapes:
    """Each array's shape without its sample axis: what a builder receives as `input_shape`."""
    if isinstance(value, Mapping):
        return {key: tuple(array.shape[1:]) for key, array in value.items()}
    return tuple(value.shape[1:])


def map_arrays(function: Callable[[Any], Any], value: Any) -> Any:
    """`function` applied to every array of `value` (one, or a dict of them), keeping the structure."""
    if isinstance(value, Mapping):
        return {key: function(array) for key, array in value.items()}
    return function(value)
