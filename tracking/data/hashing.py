"""Full-content SHA-256 of arrays, weight lists and files: every byte, never a sample of rows."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from tracking.progress import Progress

_CHUNK = 1 << 20


def array_sha256(array: np.ndarray, progress: Progress | None = None) -> str:
    """SHA-256 of an array's dtype, shape and C-order bytes, so equal hashes mean equal arrays; each chunk hashed
    advances `progress` by its bytes."""
    digest = hashlib.sha256()
    _update(digest, array, progress)
    return digest.hexdigest()


def weights_sha256(weights: Iterable[np.ndarray]) -> str:
    """SHA-256 over a model's weights in order: two models hash alike only if every weight is bit-identical."""
    digest = hashlib.sha256()
    for array in weights:
        _update(digest, np.asarray(array))
    return digest.hexdigest()


def combine(hashes: dict[str, str]) -> str:
    """One SHA-256 standing for several named hashes, independent of their order."""
    lines = "".join(f"{name}:{value}\n" for name, value in sorted(hashes.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in chunks: a file of any size takes a chunk of memory."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def file_md5(path: str | Path) -> str:
    """MD5 of a file's bytes as DVC 3 locks a dependency, read in chunks like `file_sha256`."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.md5(usedforsecurity=False)).hexdigest()


def _update(digest: hashlib._Hash, array: np.ndarray, progress: Progress | None = None) -> None:
    """Header, then the C-order bytes a block of rows at a time: a memory-mapped array is never read in whole.

    The digest is the same as hashing all bytes at once, so chunking changes no recorded hash.
    """
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    if array.ndim == 0:
        digest.update(memoryview(np.ascontiguousarray(array)).cast("B"))
        return
    row_bytes = max(1, array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64)))
    rows = max(1, _CHUNK // row_bytes)
    for start in range(0, len(array), rows):
        chunk = np.ascontiguousarray(array[start : start + rows])
        digest.update(memoryview(chunk).cast("B"))
        if progress is not None:
            progress.advance(chunk.nbytes)
