"""Entry-point wrapper for commands and DVC stages: a user error is one line on stderr and exit status 2.

Ctrl-C exits 130 and SIGTERM 143, after the `Tracker` has ended its run as KILLED.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from tracking.errors import USER_ERROR_EXIT, TrackingError
from tracking.lifecycle import Terminated


def run_main(main: Callable[[], None]) -> None:
    """Call `main`, mapping user errors and interrupts to a single line and an exit status."""
    try:
        main()
    except TrackingError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(USER_ERROR_EXIT)
    except KeyboardInterrupt:
        print("interrupted: the MLflow run was ended as KILLED", file=sys.stderr)
        sys.exit(130)
    except Terminated:
        print("terminated: the MLflow run was ended as KILLED", file=sys.stderr)
        sys.exit(Terminated.exit_code)
