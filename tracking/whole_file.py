"""A file that appears whole or not at all: written under a temporary name beside it, then moved into place in
one step, so a kill, a Ctrl-C or a full disk mid-write never leaves half a file for a reader (a kept repeat, the
model DVC caches, a sync's progress) to take for a whole one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

PARTIAL_SUFFIX = ".partial"  # the temporary file's: `.<name>.<random>.partial` beside the file it becomes


@contextlib.contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` for the caller to write; it replaces `path` when the block ends, and is removed
    when the block raises anything, an interrupt included, leaving `path` as it was. A folder that refuses the
    write is reported against `path`, the file the user knows, not the temporary name."""
    try:
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX)
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from err
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException as err:
        with contextlib.suppress(OSError):  # a read-only folder refuses even the unlink of a missing file
            temporary.unlink()
        if isinstance(err, OSError) and err.filename == str(temporary):
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
