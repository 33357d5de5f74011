"""The pipeline as a user meets it, timed in a fresh clone of this repository: `tracking --help`, a cold
`dvc repro` of the default pipeline (each stage's wall time and its start-up line), a no-op `dvc repro`.

Targets: `tracking --help` under 0.3 s, the cold `dvc repro` under 150 s, the no-op under 3 s. The clone
uses this checkout's `.venv` (commands are the ones `make run` puts on PATH) and its committed HEAD; the
weights the clone's `train` stage makes are checked against the committed metrics/train.json.
Run from the project root: `.venv/bin/python bench/pipeline_speed.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
HELP_TARGET_S, COLD_TARGET_S, NOOP_TARGET_S = 0.3, 150.0, 3.0


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Wall time and combined output of `cmd`; a failure stops the bench with its output."""
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed, done.stdout + done.stderr


def stage_times(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, dict[str, float], list[str]]:
    """Run `dvc repro`, timing each stage from its 'Running stage' line to the next; its start-up lines."""
    started = time.perf_counter()
    process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks: list[tuple[str, float]] = []
    startup: list[str] = []
    output = []
    for line in process.stdout:
        output.append(line)
        found = re.match(r"Running stage '([^']+)'", line)
        if found:
            marks.append((found.group(1), time.perf_counter()))
        if re.match(r"\w+: started in ", line):
            startup.append(line.strip())
    if process.wait() != 0:
        sys.exit("dvc repro failed:\n" + "".join(output))
    total = time.perf_counter() - started
    ends = [at for _, at in marks[1:]] + [started + total]
    return total, {name: end - at for (name, at), end in zip(marks, ends, strict=True)}, startup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--help-repeats", type=int, default=7)
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if key not in ("MLFLOW_TRACKING_URI", "VIRTUAL_ENV")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        (clone / ".venv").symlink_to(REPO / ".venv")

        helps = [timed(["tracking", "--help"], clone, env)[0] for _ in range(args.help_repeats)]
        print(
            f"tracking --help: median {statistics.median(helps):.2f} s over {len(helps)} "
            f"(target < {HELP_TARGET_S} s) {'OK' if statistics.median(helps) < HELP_TARGET_S else 'OVER TARGET'}"
        )

        total, stages, startup = stage_times(["dvc", "repro"], clone, env)
        print(
            f"cold dvc repro: {total:.1f} s (target < {COLD_TARGET_S:.0f} s) "
            f"{'OK' if total < COLD_TARGET_S else 'OVER TARGET'}"
        )
        for name, seconds in stages.items():
            print(f"  {name:<10} {seconds:6.1f} s")
        for line in startup:
            print(f"  {line}")
        committed = json.loads((REPO / "metrics/train.json").read_text())["weights_sha256"]
        made = json.loads((clone / "metrics/train.json").read_text())["weights_sha256"]
        print(f"train weights {made[:12]}: as committed in metrics/train.json: {made == committed}")

        noops = [timed(["dvc", "repro"], clone, env)[0] for _ in range(3)]
        print(
            f"no-op dvc repro: median {statistics.median(noops):.2f} s over 3 (target < {NOOP_TARGET_S} s) "
            f"{'OK' if statistics.median(noops) < NOOP_TARGET_S else 'OVER TARGET'}"
        )


if __name__ == "__main__":
    main()
