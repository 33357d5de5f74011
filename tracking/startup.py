"""What a stage pays before its work: the time from the process's start to each milestone it reaches.

Milestones are marked where they happen (the stage's modules imported, the candidate judged, the data mapped,
MLflow store open, TensorFlow imported, first training step done) and are said as one line, `train: started in
6.1 s (imports 0.3 s, data 0.0 s, MLflow store 1.9 s, TensorFlow 2.5 s, first step 1.4 s)`, at the first training
step (or, in a stage that trains nothing, when it ends), so a slow start shows in every `dvc repro` log with where
the time went. The process's start is the kernel's record of it (Linux), so the interpreter start-up and the
re-execution that pins PYTHONHASHSEED count in `imports`; elsewhere it is the time this module was imported.
"""

from __future__ import annotations

import logging
import os
import sys
import time

# Milestones a stage may reach, each named in the line for the time leading to it (from the milestone before).
MAIN = "imports"  # Python, the stage's imports and params, twice where it re-executes to pin PYTHONHASHSEED
JUDGED = "judging"  # reading the calibration and judging the candidate
DATA = "data"  # reading the data manifest and memory-mapping the prepared splits
TENSORFLOW = "TensorFlow"  # importing TensorFlow and Keras
STORE = "MLflow store"  # opening the MLflow store
FIRST_STEP = "first step"  # the model, its provenance and the first training step

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
    """Whether this process says the start-up line: a stage does (`run_main`), a `tracking` command, a Ray
    worker or an audit's training process does not (what they pay to start is not a stage's)."""
    global _wanted
    _wanted = wanted


def announce() -> None:
    """Log the start-up line, once per process: at the first training step, or when a stage that trains nothing
    ends (`run_main`). It lands on a line of its own: stdout is flushed first, and an open progress bar (the
    calibrate stage's, the candidate repeats') is cleared while it is written, then drawn again below it."""
    global _announced
    line = report() if _wanted and not _announced else None
    if line:
        from tqdm import tqdm

        _announced = True
        sys.stdout.flush()
        with tqdm.external_write_mode(file=sys.stderr):
            log.info(line)


def stage_name() -> str:
    """The running stage's name, `train` for `python -m pipelines.train`; `stage` where the main module has none."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name.rsplit(".", 1)[-1] if spec is not None and spec.name else "stage"


def report() -> str | None:
    """One line: how long the stage took to start, and what each part of that time went to, in the order the
    milestones were reached; None if none was."""
    if not _marks:
        return None
    started = min(process_started(), *_marks.values())
    parts, previous = [], started
    for milestone, at in sorted(_marks.items(), key=lambda item: item[1]):
        parts.append(f"{milestone} {at - previous:.1f} s")
        previous = at
    return f"{stage_name()}: started in {previous - started:.1f} s ({', '.join(parts)})"
