"""The default calibration with the local executor and with Ray on this machine, side by side in one run.

In a fresh clone of this repository (its committed HEAD, this checkout's `.venv`): `dvc repro prepare`, then
`dvc repro -f -s calibrate` twice from nothing kept, once as committed (`compute.executor: local`) and once with
`compute.executor: ray` (a private Ray using every core). Prints each wall time, the speed-up (target: at
least 1.6 on 2 cores), how many worker processes trained, and whether both gave the same weights, repeat for
repeat. Run from the project root: `.venv/bin/python bench/cluster_speedup.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracking.config.params import yaml_editor
from tracking.config.project import NOISE_FILE, REPEATS_DIR
from tracking.names import COMPUTE_PROCESS_TAG

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET = 1.6


def calibrate(clone: Path, env: dict[str, str]) -> tuple[float, dict]:
    """Wall time of `dvc repro -f -s calibrate` from nothing kept, and the noise file it wrote."""
    shutil.rmtree(clone / REPEATS_DIR, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run(["dvc", "repro", "-f", "-s", "calibrate"], cwd=clone, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"dvc repro calibrate failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed, json.loads((clone / NOISE_FILE).read_text())


def set_executor(clone: Path, executor: str) -> None:
    """Edit params.yaml as a user would: `compute.executor` only."""
    yaml = yaml_editor()
    path = clone / "params.yaml"
    params = yaml.load(path.read_text())
    params["compute"]["executor"] = executor
    with path.open("w") as file:
        yaml.dump(params, file)


def main() -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("MLFLOW_TRACKING_URI", "VIRTUAL_ENV")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        (clone / ".venv").symlink_to(REPO / ".venv")
        subprocess.run(["dvc", "repro", "prepare"], cwd=clone, env=env, check=True, capture_output=True)

        local_s, local = calibrate(clone, env)
        set_executor(clone, "ray")
        ray_s, ray = calibrate(clone, env)

    repeats = len(local["runs"])
    workers = len({run["where"][COMPUTE_PROCESS_TAG] for run in ray["runs"]})
    same = [run["weights_sha256"] for run in local["runs"]] == [run["weights_sha256"] for run in ray["runs"]]
    speedup = local_s / ray_s
    print(f"default calibration, {repeats} repeats, {os.cpu_count()} cores")
    print(f"local executor: {local_s:.1f} s ({local_s / repeats:.2f} s a repeat, one process)")
    print(f"ray executor:   {ray_s:.1f} s ({workers} worker processes, a private Ray started and stopped)")
    print(f"speed-up: {speedup:.2f}x (target >= {TARGET}) {'OK' if speedup >= TARGET else 'UNDER TARGET'}")
    print(f"same weights, repeat for repeat: {same}")


if __name__ == "__main__":
    main()
