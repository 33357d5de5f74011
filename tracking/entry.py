"""Entry points of commands and DVC stages: a user error is one line on stderr and exit status 2; shared argparse types.

Ctrl-C exits 130 and SIGTERM 143, after the `Tracker` has ended its run as KILLED. Library messages are shown
through `tracking.log`, configured here.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable

from tracking import startup
from tracking.errors import USER_ERROR_EXIT, NondeterministicOpError, TrackingError, WriteFault
from tracking.log import configure as configure_logging
from tracking.run.lifecycle import Terminated, end_start_up, ended_killed


def say_error(err: TrackingError) -> None:
    """A user error as every command, stage and team script shows it: one `error:` line on stderr, each of its parts
    redacted (a store's URI without its password, no token or credential's value: tracking/redaction/), so a
    credential in the problem never takes the fix with it."""
    from tracking.redaction import redact_printed

    print(f"error: {err.line(redact_printed)}", file=sys.stderr)


def run_main(main: Callable[[], None], startup_line: bool = True) -> None:
    """Call `main`, mapping user errors (a write the file system refused among them: `WriteFault`) and interrupts
    to a single line and an exit status; a stage says its start-up line (`train: started in ...`,
    `tracking.startup`) at its first training step, or when it succeeds having trained nothing, unless
    `startup_line` is false.

    An interrupt's line says a run was ended as KILLED only when this process owned one and ended it so
    (`tracking diff` or `tracking sync` open none). Made to be a process's last call: once `main` has returned,
    the objects made so far are left out of garbage collection.
    """
    end_start_up()
    try:
        configure_logging()
        startup.say_line(startup_line)
        startup.mark(startup.MAIN)
        main()
        startup.announce()  # said already at the first training step in a stage that trains
        # The process ends next. Its exit would collect every object it made, TensorFlow's among them (1.5 s of a
        # stage's wall time); frozen, they are freed with the process, while files still close and exit handlers run.
        gc.freeze()
    except TrackingError as err:
        say_error(err)
        sys.exit(USER_ERROR_EXIT)
    except OSError as err:  # a read-only project or a full disk met mid-run: the file it could not write
        fault = WriteFault.of(err)
        if fault is None:
            raise
        say_error(fault)
        sys.exit(USER_ERROR_EXIT)
    except Exception as err:  # the backend refused an op for want of a deterministic kernel: the op, in one line
        from tracking.determinism.settings import determinism_refusal  # loads the params schema: not for --help

        refusal = determinism_refusal(err)
        if refusal is None:
            raise
        say_error(
            NondeterministicOpError(
                f"{refusal} (determinism.op_determinism is true)",
                fix="run `tracking audit` to name the layer and its alternatives, or set determinism.op_determinism: "
                "false (runs are then not bit-reproducible; the calibration's IMPL band measures what that costs)",
            )
        )
        sys.exit(USER_ERROR_EXIT)
    except KeyboardInterrupt:
        print(_interrupted("interrupted"), file=sys.stderr)
        sys.exit(130)
    except Terminated:
        print(_interrupted("terminated"), file=sys.stderr)
        sys.exit(Terminated.exit_code)


def _interrupted(what: str) -> str:
    return f"{what}: the MLflow run was ended as KILLED" if ended_killed() else what


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
