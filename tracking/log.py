"""Messages from the library to the person running it, through Python's `logging`.

Each module logs to its own logger under `tracking` (`logging.getLogger(__name__)`). Commands and stages call
`configure()` once, and so does a `Tracker` in a program that has not set up logging: a message is then one line on stderr, `warning: ...` or `error: ...` by its level, an
informational one as it is. `TRACKING_LOGLEVEL` (DEBUG, INFO, WARNING or ERROR; default INFO) chooses how much
is shown. A program that imports the library and sets up logging itself keeps its own set-up.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from tracking.env import TRACKING_LOGLEVEL
from tracking.errors import SettingError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
DEFAULT_LEVEL = "INFO"


class _Line(logging.Formatter):
    """One line per message, redacted: a URL's user:password@ (a store's URI, a remote), a token or a credential
    never reaches the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        from tracking.redaction import redact_printed

        message = redact_printed(record.getMessage())
        return message if record.levelno == logging.INFO else f"{record.levelname.lower()}: {message}"


class _Stderr(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a message is emitted, not when the handler was made."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """`StreamHandler` sets a stream at creation; this handler always follows `sys.stderr` instead."""


def configure_unless_configured() -> None:
    """`configure()`, unless the program set up logging itself (handlers on the root or the `tracking` logger).

    The `Tracker` calls it, so a team's own script that opens runs shows the same `warning:` lines a stage does.
    """
    if not (logging.getLogger().handlers or logging.getLogger("tracking").handlers):
        configure()


def configure() -> None:
    """Show the library's messages on stderr at `TRACKING_LOGLEVEL`; calling it again changes nothing."""
    logger = logging.getLogger("tracking")
    if any(isinstance(handler, _Stderr) for handler in logger.handlers):
        return
    level = os.environ.get(TRACKING_LOGLEVEL, DEFAULT_LEVEL).upper()
    if level not in LEVELS:
        raise SettingError(
            f"{TRACKING_LOGLEVEL}={os.environ[TRACKING_LOGLEVEL]!r} is not a log level",
            fix=f"set it to one of {', '.join(LEVELS)}, or unset it for {DEFAULT_LEVEL}",
        )
    handler = _Stderr()
    handler.setFormatter(_Line())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
