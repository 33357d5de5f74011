"""The `stage start:` line: time from the process's start (not from an import) to each milestone, in order."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import project_env


def test_the_line_counts_from_the_process_start_and_names_each_milestone():
    """A process that idles 1 s before importing the module still reports the second: the kernel dates its start."""
    code = (
        "import time; time.sleep(1.0)\n"
        "from tracking import startup\n"
        "startup.mark(startup.STORE); time.sleep(0.2); startup.mark(startup.TENSORFLOW); startup.mark(startup.STORE)\n"
        "print(startup.report())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=project_env(), check=True)
    found = re.fullmatch(
        r"stage start: TensorFlow reached ([0-9.]+) s after the process started "
        r"\(opening the MLflow store ([0-9.]+) s, importing TensorFlow and Keras ([0-9.]+) s\)\n",
        done.stdout,
    )
    assert found, done.stdout
    total, store, tensorflow = (float(value) for value in found.groups())
    assert 1.0 <= store < 5 and 0.1 <= tensorflow < 1 and abs(total - store - tensorflow) <= 0.15


def test_importing_a_stage_imports_neither_tensorflow_nor_keras():
    """Determinism settings (oneDNN, threads) must be in the environment before TensorFlow loads: a stage that
    imported Keras at module level stopped with `determinism.onednn must be applied before ...` (or, where the
    variable was already set, trained under whatever TensorFlow read at import)."""
    stages = ("prepare", "train", "evaluate", "calibrate", "compare", "audit")
    code = (
        f"import sys\nfor name in {stages!r}: __import__('pipelines.' + name)\n"
        "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=project_env(), check=True)
    assert done.stdout == "[]\n", done.stdout
