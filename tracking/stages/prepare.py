"""The prepare stage's work: load the source or loader, split it with `data.split_seed`, check the pin, write the
arrays and their manifest to `data/prepared`."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tracking.config.params import CLASSIFICATION, DataParams, Params
from tracking.config.user_code import load_callable, require_loader_inputs, require_stage_dep
from tracking.data.arrays import Arrays, flat, n_rows
from tracking.data.dataset import build_manifest, check_pin, load_data, split_file, staging_folder, write_splits
from tracking.data.manifest import Origin
from tracking.data.memory import available_memory
from tracking.data.npz import human_size
from tracking.data.partition import partition
from tracking.data.source import Source
from tracking.determinism.settings import configure_environment
from tracking.errors import DataError
from tracking.layout import PINS_DIR, PREPARE, PREPARED
from tracking.progress import GB, Progress
from tracking.store.location import project_root


def prepare_data(params: Params) -> None:
    """Write the prepared splits of the project's data: a loader and the files it reads must be the stage's deps
    (so `dvc status` sees them change), and a pinned `data.sha256` must match what was read. A loader runs under
    the process settings of `determinism` (its params are the stage's too)."""
    root = project_root()
    if params.data.loader is not None:
        # The team's module may import Keras or TensorFlow: with the backend and the numerics (oneDNN off, XLA's
        # flags) the training stages run with, and TensorFlow's start-up lines as quiet as theirs.
        configure_environment(params.determinism)
        require_stage_dep(load_callable(params.data.loader, "data.loader", root), "data.loader", (PREPARE,), root)
        require_loader_inputs(params.data.inputs, params.data.kwargs, PREPARE, root)
    scratch = (root / PREPARED).with_name(f".{PREPARED.name}.stream")  # a loader's dataset, read to disk
    staging = staging_folder(root / PREPARED)
    shutil.rmtree(staging, ignore_errors=True)  # what a stopped prepare left
    try:
        source = load_data(params.data, root, scratch)
        size = sum(array.nbytes for role, value in source.arrays().items() for array in flat(role, value).values())
        hashing = Progress(PREPARE, "hashed", "GB", 2 * size, GB)  # the source, then its splits
        origin = Origin.of(source.arrays(), params.data.task, hashing)  # before the split consumes a streamed copy
        splits = split(source, params.data, params.data.split_seed, staging, scratch)
        manifest = build_manifest(splits, source, params.data.task, origin, hashing)
        check_pin(manifest, params.data.sha256, root / PINS_DIR)
        write_splits(root / PREPARED, splits, manifest)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    print(f"prepared {manifest.total} samples, content sha256 {manifest.content_sha256}")


def split(
    source: Source, data: DataParams, seed: int, staging: Path | None = None, consumed: Path | None = None
) -> dict[str, dict[str, Arrays]]:
    """Train/val/test split, reproducible from `seed`: stratified by class for classification with one label per
    sample, plain for regression, multi-label rows, labels per pixel or step, and a dict `y` (none of them is one
    class per sample). The rows of a memory-mapped array are written straight into `staging` under the names
    `write_splits` keeps, and the files under `consumed` (a loader's streamed copy) are cut short as they are, so
    the disk holds the source and one prepared copy (tracking/data/partition.py)."""
    from sklearn.model_selection import train_test_split

    arrays = source.arrays()
    index = np.arange(n_rows(source.y))
    classes = data.task == CLASSIFICATION and not isinstance(source.y, Mapping)
    stratify = source.y if classes and source.y.ndim == 1 and np.bincount(source.y).min() >= 2 else None
    try:
        rest, test = train_test_split(index, test_size=data.test_fraction, random_state=seed, stratify=stratify)
        parts = {"test": test}
        if data.val_fraction > 0:
            val_share = data.val_fraction / (1 - data.test_fraction)
            strat_rest = source.y[rest] if stratify is not None else None
            rest, parts["val"] = train_test_split(rest, test_size=val_share, random_state=seed, stratify=strat_rest)
    except ValueError as err:
        raise DataError(
            f"data: cannot split {len(index)} samples with data.test_fraction={data.test_fraction} and "
            f"data.val_fraction={data.val_fraction} ({err}); use more samples{' per class' if classes else ''} or change the fractions in params.yaml"
        ) from err
    parts["train"] = rest
    absent = sorted(set(range(int(source.y.max()) + 1)) - set(np.unique(source.y[rest]).tolist())) if classes else []
    if absent:
        raise DataError(
            f"data: {len(index)} samples are too few for {int(source.y.max()) + 1} classes: the training split of "
            f"{len(rest)} has no sample of class(es) {', '.join(map(str, absent[:10]))}; use more samples per class "
            "(at least 2 each, so that the split can keep every class in training) or change the fractions in "
            "params.yaml"
        )
    _require_memory(arrays, source.name)
    return partition(arrays, {name: np.sort(idx) for name, idx in parts.items()}, staging, split_file, consumed)


def _require_memory(arrays: dict[str, Arrays], name: str) -> None:
    """A `DataError` where the arrays held in memory (not memory-mapped) are more than the memory available to
    copy them into the splits: one line saying so, rather than a process the kernel kills."""
    held = sum(
        array.nbytes
        for role, value in arrays.items()
        for array in flat(role, value).values()
        if not isinstance(array, np.memmap)
    )
    available = available_memory()
    if held > available:
        raise DataError(
            f"data: {name} gave {human_size(held)} of arrays in memory, which the split copies, and "
            f"{human_size(available)} of memory is available to this process",
            fix="have the loader return memory-mapped arrays (np.load(path, mmap_mode='r')) or a "
            "keras.utils.PyDataset of batches, which prepare reads a batch at a time",
        )
