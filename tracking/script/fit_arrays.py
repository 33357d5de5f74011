"""The arrays of `x` and `y` as Keras's `fit` takes them (one array, or a dict or list of them), named for the
data manifest and shaped for MLflow's dataset and the model's signature, so `run.log_data` hashes a renamed
input as changed data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def named_arrays(prefix: str, data: Any) -> dict[str, Any]:
    """The arrays of `data` as `fit` takes it, by name: one array as `prefix`, a dict's under `prefix/<key>`, a
    list's or tuple's under `prefix/<index>`."""
    import numpy as np

    if isinstance(data, Mapping):
        return {f"{prefix}/{key}": np.asarray(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return {f"{prefix}/{index}": np.asarray(value) for index, value in enumerate(data)}
    return {prefix: np.asarray(data)}


def manifest_shapes(split: str, xs: dict[str, Any]) -> dict[str, list[int]]:
    """The manifest's feature shapes: the split's, as our prepare stage records them, or each named input's."""
    if len(xs) == 1 and f"{split}/x" in xs:
        return {split: [int(size) for size in xs[f"{split}/x"].shape[1:]]}
    return {name: [int(size) for size in array.shape[1:]] for name, array in xs.items()}


def for_mlflow(data: Any, arrays: dict[str, Any]) -> Any:
    """`data` as MLflow's dataset takes it: one array, or a dict of arrays by the key or index it came under."""
    if len(arrays) == 1 and not isinstance(data, (Mapping, list, tuple)):
        return next(iter(arrays.values()))
    return {name.rsplit("/", 1)[1]: array for name, array in arrays.items()}


def first_rows(data: Any) -> Any:
    """The first two samples of `x`, kept in its structure (a dict or list of arrays), for the model's signature."""
    import numpy as np

    if isinstance(data, Mapping):
        return {key: np.asarray(value)[:2] for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [np.asarray(value)[:2] for value in data]
    return np.asarray(data)[:2]
