"""What a stage pays before its work: the time from the process's start to each milestone it reaches.

Milestones are marked where they happen (the stage's modules imported, the candidate judged, MLflow store open,
TensorFlow imported, first training step done) and are said as one line at the first training step (or, in a
stage that trains nothing, when it ends), so a slow start shows in every `dvc repro` log with where the time went. The process's start is the kernel's record of it (Linux), so
the interpreter start-up and the re-execution that pins PYTHONHASHSEED count too; elsewhere it is the time
this module was imported.
"""

from __future__ import annotations

import logging
import os
import time

# Milestones in the order a stage reaches them, with the phrase the line uses for the time leading to each.
MAIN = "imports"
JUDGED = "judgement"
TENSORFLOW = "TensorFlow"
STORE = "store"
FIRST_STEP = "first step"
PHRASES = {
    MAIN: "Python and the stage's imports, twice where it re-executes itself to pin PYTHONHASHSEED",
    JUDGED: "reading the calibration and judging the candidate",
    TENSORFLOW: "importing TensorFlow and Keras",
    STORE: "opening the MLflow store",
    FIRST_STEP: "model, provenance and the first training step",
}

_IMPORTED = time.time()
_marks: dict[str, float] = {}
_wanted = False
_announced = False
log = logging.getLogger(__name__)


def process_started() -> float:
    """The wall-clock time this process started (before any re-execution), or this module's import time."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    return time.time() - age


def mark(milestone: str) -> None:
    """Note that the process reached `milestone` now (the first time only); the first training step ends the
    start-up, so the line is said there, while the stage trains on, rather than after its work."""
    _marks.setdefault(milestone, time.time())
    if milestone == FIRST_STEP:
        announce()


def say_line(wanted: bool) -> None:
    """Whether this process says the `stage start:` line: a stage does (`run_main`), a `tracking` command, a Ray
    worker or an audit's training process does not (what they pay to start is not a stage's)."""
    global _wanted
    _wanted = wanted


def announce() -> None:
    """Log the `stage start:` line, once per process: at the first training step, or when a stage that trains
    nothing ends (`run_main`)."""
    global _announced
    line = report() if _wanted and not _announced else None
    if line:
        _announced = True
        log.info(line)


def report() -> str | None:
    """One line: when each milestone was reached, and what the time before it went to; None if none was."""
    if not _marks:
        return None
    started = min(process_started(), *_marks.values())
    parts, previous = [], started
    for milestone, at in sorted(_marks.items(), key=lambda item: item[1]):
        parts.append(f"{PHRASES[milestone]} {at - previous:.1f} s")
        previous = at
    last = max(_marks, key=_marks.get)
    return f"stage start: {last} reached {previous - started:.1f} s after the process started ({', '.join(parts)})"
