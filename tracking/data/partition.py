"""A data set's rows written into its splits a block of rows at a time, from the last block to the first.

Each split holds its rows in the source's order, so every block of the source goes to known places of each
split's file. A memory-mapped source is read in blocks into memory-mapped `.npy` files, never whole; a copy the
prepare stage made itself (a loader's dataset, streamed to disk) is cut short behind each block once its rows
are written, so the disk holds the source and one prepared copy at any time, not a second copy of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from tracking.data.arrays import Arrays, flat, nested
from tracking.layout import PREPARE
from tracking.progress import GB, Progress

# How many bytes of rows are read and written at a time: the disk holds at most this much beyond the source and one
# prepared copy.
BLOCK_BYTES = 16 * 2**20


def partition(
    arrays: dict[str, Arrays],
    parts: Mapping[str, np.ndarray],
    staging: Path | None,
    file_name: Callable[[str, str], str],
    consumed: Path | None = None,
) -> dict[str, dict[str, Arrays]]:
    """Each part's rows (sorted indices `parts[name]`) of every array, in the arrays' structure; memory-mapped
    arrays are written into `staging`, as `file_name(part, flat name)`; files under `consumed` are cut short as
    their rows are written."""
    mapped = [array for role, value in arrays.items() for array in flat(role, value).values()]
    total = sum(array.nbytes for array in mapped if isinstance(array, np.memmap))
    progress = Progress(PREPARE, "split", "GB", total, GB)
    found: dict[str, dict[str, np.ndarray]] = {name: {} for name in parts}
    for role, value in arrays.items():
        for flat_name, array in flat(role, value).items():
            if staging is None or not isinstance(array, np.memmap):
                for name, index in parts.items():
                    found[name][flat_name] = array[index]
                continue
            staging.mkdir(parents=True, exist_ok=True)
            files = {name: staging / file_name(name, flat_name) for name in parts}
            written = _written(array, parts, files, consumed, progress)
            for name in parts:
                found[name][flat_name] = written[name]
    return {name: nested(values) for name, values in found.items()}


def _written(
    array: np.memmap, parts: Mapping[str, np.ndarray], files: dict[str, Path], consumed: Path | None, progress: Progress
) -> dict[str, np.ndarray]:
    """`array`'s rows of each part written to its file, the last block first; the array's own file cut short
    behind each block where it lies under `consumed`."""
    source = Path(array.filename)
    cut = consumed is not None and source.is_relative_to(consumed.resolve())
    outs = {
        name: np.lib.format.open_memmap(files[name], mode="w+", dtype=array.dtype, shape=(len(index), *array.shape[1:]))
        for name, index in parts.items()
    }
    row_bytes = max(1, array[:1].nbytes)
    step = max(1, BLOCK_BYTES // row_bytes)
    for start in reversed(range(0, len(array), step)):
        stop = min(start + step, len(array))
        block = np.asarray(array[start:stop])
        for name, index in parts.items():
            low, high = np.searchsorted(index, (start, stop))
            outs[name][low:high] = block[index[low:high] - start]
        if cut:
            os.truncate(source, array.offset + start * row_bytes)
        progress.advance(block.nbytes)
    for out in outs.values():
        out.flush()
    return {name: np.load(path, mmap_mode="r") for name, path in files.items()}
