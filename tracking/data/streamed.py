"""A loader's `tf.data.Dataset` or `keras.utils.PyDataset` taken as a source's arrays: read once, batch by batch in
the order it yields them (batches, as `fit` takes either), each numeric array appended to a file in a scratch
folder and memory-mapped, so reading holds one batch in memory whatever the data set's size. The arrays then pass
the checks, the split and the full-content hash of any loader's arrays (tracking/data/source.py, manifest.py).

The loader's own randomness (a `shuffle` without a seed of its own, a `PyDataset` shuffling its files with
`np.random` or `random` when it is made) draws from Python's, NumPy's and TensorFlow's global generators, which the
prepare stage seeds with `data.split_seed` before the loader is called, and tf.data runs with `deterministic`
order: the same params give the same samples in the same order, and the content hash says so. A tf.data dataset
that draws random numbers in its functions (keras.io's `ds.map(data_augmentation)`) is refused: its draws would be
frozen into the prepared data, the test split's too; `train.augment` augments training batches anew each epoch.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tracking.data.arrays import Arrays, nested
from tracking.errors import DataError
from tracking.layout import PREPARE
from tracking.progress import Progress

# The roles of a batch's parts, in the order `fit` reads a tuple: (x, y) or (x, y, sample_weight).
ROLES = ("x", "y", "sample_weight")


def is_dataset(value: Any) -> bool:
    """Whether a loader returned a tf.data dataset or a Keras `PyDataset` (neither framework is imported here: a
    loader that made one has imported it)."""
    tf, keras = sys.modules.get("tensorflow"), sys.modules.get("keras")
    return bool(
        (tf is not None and isinstance(value, tf.data.Dataset))
        or (keras is not None and isinstance(value, keras.utils.PyDataset))
    )


def seed_loader_randomness(seed: int) -> None:
    """Python's and NumPy's global generators seeded with `seed`, and TensorFlow's global seed where TensorFlow is
    loaded, before a loader is called: a `PyDataset` that shuffles its files with `np.random` or `random` when it is
    made (the common DataGenerator), or a dataset's unseeded shuffle, draws the same order on every prepare."""
    random.seed(seed)
    np.random.seed(seed)
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        tf.random.set_seed(seed)


def random_ops(dataset: Any) -> list[str]:
    """The random ops a tf.data dataset's functions run (a `map` of keras.io's augmentation layers, `tf.random`),
    sorted; empty for a dataset whose graph cannot be read (a `from_generator`'s Python)."""
    import tensorflow as tf

    try:
        graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    except (tf.errors.OpError, ValueError, TypeError):
        return []
    ops = {node.op for node in graph.node} | {
        node.op for function in graph.library.function for node in function.node_def
    }
    return sorted(op for op in ops if "Random" in op or op.startswith("Rng"))


def _batches(dataset: Any, where: str) -> Iterator[Any]:
    """The dataset's batches as NumPy: a tf.data dataset's with deterministic order, a PyDataset's by index."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(dataset, tf.data.Dataset):
        if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
            raise DataError(f"{where} returned an infinite dataset (a repeat()); return it without repeat()")
        drawn = random_ops(dataset)
        if drawn:
            raise DataError(
                f"{where} returned a dataset that draws random numbers ({', '.join(drawn[:3])}): augmentation "
                "mapped there would be drawn once, frozen into the prepared data and applied to the test split too",
                fix="return the dataset without it, and set train.augment to a function (x, y, seed) -> (x, y) that "
                "augments each training batch anew (docs/configuration.md#class-weights-sample-weights-and-augmentation)",
            )
        options = tf.data.Options()
        options.deterministic = True
        yield from dataset.with_options(options).as_numpy_iterator()
        return
    count = dataset.num_batches
    if count is None:
        raise DataError(f"{where} returned a PyDataset without a length; give it __len__ (its number of batches)")
    for index in range(count):
        yield dataset[index]


def _length(dataset: Any) -> int | None:
    """How many batches the dataset holds, where it says."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(dataset, tf.data.Dataset):
        count = int(dataset.cardinality())
        return count if count >= 0 else None
    return getattr(dataset, "num_batches", None)


def _parts(batch: Any, where: str, index: int) -> dict[str, Any]:
    """A batch's x, y and sample weights by role: a tuple (x, y) or (x, y, sample_weight), or a dict of them."""
    if isinstance(batch, Mapping) and {"x", "y"} <= set(batch):
        parts = dict(batch)
    elif isinstance(batch, (tuple, list)) and len(batch) in (2, 3):
        parts = dict(zip(ROLES, batch, strict=False))
    else:
        raise DataError(
            f"{where} returned a dataset whose batch {index} is a {type(batch).__name__}, not (x, y) or "
            "(x, y, sample_weight); yield batches as fit takes them, with targets (e.g. "
            "timeseries_dataset_from_array(data, targets, ...))"
        )
    return {role: value for role, value in parts.items() if role in ROLES and value is not None}


def _array(value: Any) -> np.ndarray:
    """One part of a batch as NumPy: TensorFlow's strings (bytes objects) as text."""
    array = np.asarray(value)
    return np.char.decode(array.astype(bytes), "utf-8") if array.dtype.kind in "OS" else array


@dataclass
class _Column:
    """One array of the source, growing a batch at a time: numbers appended to a file, text kept in memory."""

    path: Path
    dtype: np.dtype | None = None
    shape: tuple[int, ...] | None = None
    rows: int = 0
    text: list[np.ndarray] = field(default_factory=list)

    def append(self, array: np.ndarray, name: str, where: str, index: int) -> None:
        if array.ndim == 0:
            raise DataError(f"{where} batch {index} gives {name} as a scalar; yield batches, one row per sample")
        if self.shape is not None and (array.shape[1:] != self.shape or (array.dtype.kind in "U") != self.is_text):
            raise DataError(
                f"{where} batch {index} gives {name} shape {array.shape[1:]} ({array.dtype}) per sample, earlier "
                f"batches {self.shape} ({self.dtype}); yield samples of one shape (pad sequences to one length)"
            )
        if self.shape is None:
            self.shape, self.dtype = array.shape[1:], array.dtype
        if array.dtype.kind == "U":
            self.text.append(array)
        else:
            with self.path.open("ab") as out:
                out.write(np.ascontiguousarray(array, dtype=self.dtype).tobytes())
        self.rows += len(array)

    @property
    def is_text(self) -> bool:
        return self.dtype is not None and self.dtype.kind == "U"

    def array(self) -> np.ndarray:
        if self.is_text:
            return np.concatenate(self.text)
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self.rows, *self.shape))


def streamed_arrays(dataset: Any, where: str, scratch: Path) -> dict[str, Arrays]:
    """The dataset's samples as arrays by role (`x`, `y`, maybe `sample_weight`; a dict by name where the batch
    gives one), its numbers memory-mapped from files under `scratch`; an empty dataset, or batches that change
    their structure or shapes, are one `DataError` line."""
    scratch.mkdir(parents=True, exist_ok=True)
    columns: dict[str, _Column] = {}
    roles: set[str] | None = None
    progress = Progress(PREPARE, "read", "batches of the loader's dataset", _length(dataset))
    for index, batch in enumerate(_batches(dataset, where)):
        progress.advance(1)
        parts = _parts(batch, where, index)
        names = {}
        for role, value in parts.items():
            items = value.items() if isinstance(value, Mapping) else [(None, value)]
            names.update({role if key is None else f"{role}.{key}": _array(part) for key, part in items})
        if roles is not None and set(names) != roles:
            raise DataError(
                f"{where} batch {index} gives {', '.join(sorted(names))}, earlier batches "
                f"{', '.join(sorted(roles))}; yield the same parts in every batch"
            )
        roles = set(names)
        for name, array in names.items():
            columns.setdefault(name, _Column(scratch / f"{name}.raw")).append(array, name, where, index)
    if not columns:
        raise DataError(f"{where} returned an empty dataset (no batch); check the files and arguments it reads")
    return nested({name: column.array() for name, column in columns.items()})
