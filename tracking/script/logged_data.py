"""The training data a team's script logs (`run.log_data`): every array of `x`, `y` and the sample weights hashed
into the data manifest, as our prepare stage hashes a split, and what the targets say of the task (class labels,
one-hot rows, or nothing to tell), which decides how the model's outputs are read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracking.data.manifest import Manifest
from tracking.errors import UsageError
from tracking.script.fit_arrays import manifest_shapes, named_arrays


@dataclass(frozen=True)
class LoggedData:
    """The manifest of a script's training data, its arrays by name, and whether its targets are a classifier's
    (None where the script gave no targets: nothing says what the task is)."""

    manifest: Manifest
    xs: dict[str, Any]
    ys: dict[str, Any]
    classifier: bool | None


def logged_data(x: Any, y: Any, name: str, sample_weight: Any) -> LoggedData:
    """`x`, `y` and `sample_weight` as `fit` takes them, hashed under their names (`train/x/<key>`, so a renamed
    input changes the digest) into one manifest; arrays of different sample counts are one error line."""
    import numpy as np

    from tracking.data.hashing import array_sha256, combine

    xs, ys = named_arrays("train/x", x), {} if y is None else named_arrays("train/y", y)
    weights = {} if sample_weight is None else {"train/sample_weight": np.asarray(sample_weight)}
    hashes = {key: array_sha256(array) for key, array in {**xs, **ys, **weights}.items()}
    samples = {len(array) for array in {**xs, **ys, **weights}.values() if array.ndim}
    if len(samples) != 1:
        raise UsageError(
            "run.log_data(): the arrays of x, y and sample_weight hold different numbers of samples "
            f"({sorted(samples)})",
            fix="pass x, y and sample_weight as fit takes them: every array's first axis is the sample",
        )
    target = next(iter(ys.values())) if len(ys) == 1 else None
    labels = target is not None and target.ndim == 1 and len(target) > 0 and np.issubdtype(target.dtype, np.integer)
    classes = int(target.max()) + 1 if labels else None
    manifest = Manifest(
        source=name,
        source_sha256=combine(hashes),
        content_sha256=combine(hashes),
        arrays=hashes,
        target_shape=None if target is None else [int(size) for size in target.shape[1:]],
        n_samples={"train": samples.pop()},
        shapes=manifest_shapes("train", xs),
        n_outputs=classes or sum(int(np.prod(array.shape[1:], dtype=np.int64)) for array in ys.values()),
        n_classes=classes,
    )
    one_hot = (
        target is not None
        and target.ndim == 2
        and bool(np.isin(target, (0, 1)).all() and (target.sum(axis=1) == 1).all())
    )
    return LoggedData(manifest, xs, ys, (bool(labels) or one_hot) if ys else None)
