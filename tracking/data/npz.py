"""A user's `.npz` read safely: each array's size is checked against its header before any memory is allocated.

An `.npz` is a zip of `.npy` files, each with a header stating its shape and dtype; NumPy allocates what the
header claims before reading a byte, so a damaged or crafted header claiming 10^12 elements ends in a
MemoryError (7.28 TiB), and a zip bomb (1.2 GB from 1.2 MB) fills memory. What is read here:
- refused: a name held twice (np.load keeps one copy silently), an array of Python objects (stored pickled:
  loading a pickle runs code), an array whose header claims more bytes than its member holds (the file is
  damaged or crafted), and an archive whose arrays, decompressed, exceed the memory available (loading would
  fail or swap; a loader returning memory-mapped `.npy` arrays reads a larger set in chunks);
- warned: an archive that expands more than `BOMB_RATIO` times, to more than `BOMB_MIN_BYTES`: real features
  rarely compress that well, so it is a mostly constant array or a zip bomb, worth a look either way.
"""

from __future__ import annotations

import logging
import math
import zipfile
from pathlib import Path

import numpy as np

from tracking.data.memory import available_memory
from tracking.errors import DataError

log = logging.getLogger(__name__)

BOMB_RATIO = 100
BOMB_MIN_BYTES = 16 * 2**20
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def read_npz(path: Path, where: str) -> dict[str, np.ndarray]:
    """Every array of the `.npz` at `path`, after its sizes are checked; `where` names it in errors and warnings."""
    expanded = check_sizes(path, where)
    compressed = path.stat().st_size
    if expanded > BOMB_MIN_BYTES and expanded > BOMB_RATIO * compressed:
        log.warning(
            "%s expands from %s to %s (%d times) when decompressed: real features rarely compress that well; "
            "check it is the data you meant (a mostly constant array, or a zip bomb)",
            where,
            human_size(compressed),
            human_size(expanded),
            expanded // max(compressed, 1),
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except MemoryError as err:
        raise DataError(
            f"{where} does not fit in memory ({human_size(expanded)} decompressed)",
            fix="free memory, or use a data.loader returning memory-mapped arrays (np.load(path, mmap_mode='r'))",
        ) from err


def check_sizes(path: Path, where: str) -> int:
    """The bytes the archive's arrays take decompressed; a `DataError` for an array of objects, a header claiming
    more than its member holds, or for more than the memory available."""
    total = 0
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:  # np.load would keep one of them without a word: which array is the data is not known
            raise DataError(
                f"{where} holds {len(twice)} name(s) more than once ({', '.join(twice)}): the archive was appended "
                "to or hand-made, and which copy is the data cannot be told",
                fix="re-create it with np.savez(path, x=..., y=...), each array once",
            )
        for info in archive.infolist():
            total += info.file_size
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                reader = _HEADER_READERS.get(version)
                if reader is None:  # a newer format: np.load reads or rejects it
                    continue
                shape, _, dtype = reader(member)
                claimed = math.prod(shape) * dtype.itemsize
                held = info.file_size - member.tell()
            name = info.filename.removesuffix(".npy")
            if dtype.hasobject:
                raise DataError(
                    f"{where} array {name} holds Python objects ({dtype}), which np.savez stores pickled: a pickle is "
                    "never loaded here, since loading one runs code",
                    fix="save numeric arrays (e.g. np.savez(path, x=x.astype('float32'), y=y)), or read such a file "
                    "in a data.loader of your own",
                )
            if claimed > held:
                raise DataError(
                    f"{where} array {name}'s header claims shape {shape} of {dtype} ({human_size(claimed)}) but "
                    f"the file holds {human_size(held)} of it: it is damaged or was not written by np.savez",
                    fix="re-create it with np.savez(path, x=..., y=...) or re-fetch it",
                )
    available = available_memory()
    if total > available:
        raise DataError(
            f"{where} expands to {human_size(total)} decompressed, more than the {human_size(available)} of memory "
            "available",
            fix="free memory, or use a data.loader returning memory-mapped arrays (np.load(path, mmap_mode='r'))",
        )
    return total


def human_size(size: int) -> str:
    """A byte count as people read it: 512 B, 1.2 MiB, 7.28 TiB."""
    power = 0
    while power < len(_UNITS) - 1 and size >= 1024 ** (power + 1):
        power += 1
    return f"{size} B" if power == 0 else f"{size / 1024**power:.3g} {_UNITS[power]}"
