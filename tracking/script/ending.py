"""How a script's run ends when the script opened it without a `with` block: at interpreter exit, honestly.

An uncaught exception reaches `sys.excepthook` before the interpreter runs its exit handlers, so the hook keeps it
and the exit handler ends the run FAILED (KILLED for Ctrl-C or SIGTERM), FINISHED only after a clean exit. A
`TrackingError` (a user error of the script's set-up) is shown as our commands show it, one `error:` line, and
the process exits with status 2.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable
from types import TracebackType

from tracking.errors import USER_ERROR_EXIT, TrackingError

_uncaught: list[BaseException] = []
_installed: list[bool] = []


def user_errors_in_one_line() -> None:
    """From now on, an uncaught `TrackingError` prints `error: <line>` and exits 2 (other errors as before); exit
    handlers registered with `end_at_exit` run first."""
    if _installed:
        return
    _installed.append(True)
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        _uncaught.append(error)
        if not isinstance(error, TrackingError):
            previous(kind, error, tb)
            return
        from tracking.entry import say_error

        say_error(error)
        atexit._run_exitfuncs()  # the run ends FAILED before the exit status is forced
        _exit(USER_ERROR_EXIT)

    sys.excepthook = hook


def end_at_exit(end: Callable[[BaseException | None], None]) -> Callable[[], None]:
    """Call `end(the uncaught exception or None)` at interpreter exit; return the function that cancels it."""

    def at_exit() -> None:
        try:
            end(_uncaught[-1] if _uncaught else None)
        except TrackingError as err:  # the store failed the run's last writes: the script did not succeed
            from tracking.entry import say_error

            say_error(err)
            _exit(USER_ERROR_EXIT)

    atexit.register(at_exit)
    return lambda: atexit.unregister(at_exit)


def _exit(status: int) -> None:
    """Leave now with `status` (an exit handler cannot change the status otherwise), output flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
