"""The start-up line: time from the process's start (not from an import) to each milestone, in order."""

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
        r"stage: started in ([0-9.]+) s \(MLflow store ([0-9.]+) s, TensorFlow ([0-9.]+) s\)\n",
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


def test_the_line_is_a_line_of_its_own_after_stdout_and_outside_an_open_progress_bar():
    """Said at the first step while the calibrate stage's bar is drawn, it landed after the bar on the same line,
    and ahead of what the stage had printed to stdout before it."""
    code = (
        "import sys\nfrom tqdm import tqdm\nfrom tracking import startup\nfrom tracking.entry import run_main\n"
        "def main():\n"
        "    print('stdout before')\n"
        "    with tqdm(total=3, desc='calibrate', file=sys.stderr) as bar:\n"
        "        bar.update(1); startup.mark(startup.FIRST_STEP); bar.update(2)\n"
        "run_main(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=project_env()
    )
    shown = done.stdout.decode()  # as bytes: text mode would turn the bar's carriage returns into newlines
    assert done.returncode == 0, shown
    said = re.search(r"\r *\rstage: started in [0-9.]+ s \(imports [0-9.]+ s, first step [0-9.]+ s\)\n", shown)
    assert said and shown.startswith("stdout before\n"), repr(shown)
