"""Entry points of commands and DVC stages: a user error is one line on stderr and exit status 2; shared argparse types.

Ctrl-C exits 130 and SIGTERM 143, after the `Tracker` has ended its run as KILLED.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from tracking.errors import USER_ERROR_EXIT, TrackingError
from tracking.run.lifecycle import Terminated


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


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than `low`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from err
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value

    return parse
