"""Errors a user can cause and fix: each carries one line saying what is wrong and how to fix it.

Every such error is a subclass of `TrackingError`, defined here, one per kind of failure. Commands and pipeline
stages turn it into that line on stderr and exit status 2 (`USER_ERROR_EXIT`); anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import difflib
import errno
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

USER_ERROR_EXIT = 2
# The errors of a write the file system refused: the file, its folder or its whole file system is read-only (or
# immutable), or the disk (or the user's quota) is full.
NOT_WRITABLE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def did_you_mean(name: str, choices: Iterable[str], within: str = "") -> str:
    """`did you mean 'adam'? ` for the choice most like the unknown `name` (difflib's match, ignoring case), or ""
    where none is close: the one way a mistyped key or name is answered. `within` leads the choice shown (a
    key's section: `train.epochs`)."""
    lowered: dict[str, str] = {}
    for choice in choices:
        lowered.setdefault(choice.lower(), choice)  # the first of `adam` and `Adam`
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1)
    return f"did you mean '{within}{lowered[close[0]]}'? " if close else ""


def not_a_readable_file(path: Path) -> str | None:
    """What `path` is, said for an error line, when it is not a regular file to read: "not found", "a directory", "a
    symbolic link that loops", "a FIFO (named pipe)", "a character device" ...; None for a regular file (links
    followed). Asked before opening it: reading a FIFO blocks until a writer comes, /dev/zero never ends."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a symbolic link to a missing file" if path.is_symlink() else "not found"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "a symbolic link that loops (or chains more links than the system follows)"
        return f"not readable ({err.strerror})"
    if stat.S_ISREG(mode):
        return None
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((kind for test, kind in kinds.items() if test(mode)), "not a regular file")


class TrackingError(Exception):
    """Root of the errors a user can fix; `str(err)` is the single line to show.

    The line is built from its parts: the problem (naming the key, file or run), what was expected and what
    was received when that helps, and the fix. `TrackingError("params.yaml: file not found", fix="create
    it")` reads "params.yaml: file not found; create it".
    """

    def __init__(
        self, problem: str, *, expected: str | None = None, received: str | None = None, fix: str | None = None
    ) -> None:
        self.problem, self.expected, self.received, self.fix = problem, expected, received, fix
        super().__init__(self.line())

    def line(self, each: Callable[[str], str] = str) -> str:
        """The one line: problem (expected ..., got ...); fix. Each part is passed through `each` alone (the redactor,
        for the terminal), so a credential's value that takes the rest of its part (`password=...` in a team's
        exception) leaves the parts after it, the fix among them, readable."""
        found = [
            f"expected {each(self.expected)}" if self.expected else "",
            f"got {each(self.received)}" if self.received else "",
        ]
        shown = ", ".join(part for part in found if part)
        return each(self.problem) + (f" ({shown})" if shown else "") + (f"; {each(self.fix)}" if self.fix else "")


class ParamsError(TrackingError):
    """params.yaml is missing, malformed, or has an unknown key or a bad value."""


class UnknownKey(ParamsError):
    """A key params.yaml's schema does not have: names the closest valid key and every valid one there."""

    def __init__(self, path: str, key: str, valid: list[str], more: str = "") -> None:
        section, _, name = key.rpartition(".")
        where = f"'{section}'" if section else "the top level"
        hint = did_you_mean(name, valid, f"{section}." if section else "")
        super().__init__(f"{path}: unknown key '{key}'", fix=f"{hint}valid keys in {where}: {', '.join(valid)}{more}")


class BadValue(ParamsError):
    """A value of params.yaml's that its key does not accept: what the key expects, what it got, where to fix it."""

    def __init__(self, path: str, key: str, expected: str, received: object, more: str = "") -> None:
        shown = repr(received)
        shown = shown if len(shown) <= 80 else f"{shown[:60]}... ({len(shown)} characters)"
        super().__init__(f"{path}: {key}: {expected}, got {shown}", fix=f"fix it in {path}{more}")


class DataError(TrackingError):
    """The data source is missing, corrupt, or does not match what params.yaml pins."""


class DataPinMismatch(DataError):
    """The prepared data's content hash differs from `data.sha256`."""


class RepoError(TrackingError):
    """The working directory is not the git + DVC repository the pipeline expects."""


class TrackingServerError(TrackingError):
    """The MLflow tracking store cannot be reached or refused a write."""


class StoreFault(TrackingError):
    """The MLflow store is damaged, cannot be opened or written, or its disk is full: not a lost server."""


class JournalError(TrackingError):
    """Lines of an offline journal that `tracking sync` could not replay (garbled, or refused by the server)."""


class WriteFault(TrackingError):
    """A file a command opens or writes cannot be: the project was made read-only or not the user's, or its disk
    filled, while the command ran. Said with the file's path instead of a traceback (`tracking.entry.run_main`)."""

    @classmethod
    def of(cls, error: BaseException) -> WriteFault | None:
        """The fault a refused write shows, naming the file it went to; None for any other error (a bug, which
        keeps its traceback)."""
        if not isinstance(error, OSError) or error.errno not in (*NOT_WRITABLE_ERRNOS, *FULL_ERRNOS):
            return None
        path = error.filename2 or error.filename or "a file"  # a copy's destination is the second name
        if error.errno in FULL_ERRNOS:
            return cls(
                f"no space left on the disk holding {path} ({error.strerror})", fix="free space there and re-run"
            )
        return cls(
            f"{path} cannot be opened or written ({error.strerror})",
            fix="make it and its folder writable again (remount a read-only file system read-write; `chmod u+rw` or "
            "`chattr -i` them), then re-run",
        )


class DiskSpaceError(TrackingError):
    """A disk lacks the room for what a stage is about to write, found before it starts the work."""


class RunSelectionError(TrackingError):
    """An MLflow experiment, filter string or run id that selects no usable runs."""


class RunStateError(TrackingError):
    """A stage was run out of order, e.g. evaluate before train wrote its run id."""


class RerunError(TrackingError):
    """A logged run cannot be re-created: its commit, diff or data is not available as it was logged."""


class UserCodeError(TrackingError):
    """A "module:function" in params.yaml that does not import, is not callable, or returns the wrong thing."""


class SettingError(TrackingError):
    """An environment variable the product reads holds a value it cannot use."""


class UsageError(TrackingError):
    """A team's own code called the library's functions in an order that cannot work."""


class RunNotFound(TrackingError):
    """Neither a run id nor a DVC experiment name the store knows."""


class NoiseError(TrackingError):
    """Too few runs, or values that cannot form a band."""


class AuditError(TrackingError):
    """The audit cannot run or finish as configured."""


class UnsupportedOpError(AuditError):
    """An op of the model has no deterministic implementation, so op determinism cannot be audited."""


class NondeterministicOpError(TrackingError):
    """An op the model trains with has no deterministic kernel on this backend and device, and op determinism is on."""


class ComputeError(TrackingError):
    """The compute section asks for what the cluster cannot give, or a repeat's worker died on every try."""
