"""The default calibration with the local executor and with Ray on this machine, side by side in one run.

In a fresh clone of this repository (its committed HEAD, this checkout's `.venv`): `dvc repro prepare`, then
`dvc repro -f -s calibrate` from nothing kept, once as committed (`compute.executor: local`), once with
`compute.executor: ray` (a private Ray using every core) and once on a Ray cluster already running, as a team uses
one (`ray start --head` on this machine before the timing, `compute.address` pointing at it, token
authentication); then this machine's own ceiling, with no Ray and no tracking: the same bare training (the default
configuration's ALGO repeats, untracked) in one process alone, then in one process per core at once, then alone
again; the rate they reach together over the rate of one alone bounds any executor's speed-up here (cores that
share a physical core or memory bandwidth give less than their count).

All of that is one round, and the bench runs `ROUNDS` of them, every other round in reverse order, and keeps the
fastest of each measurement: load beside a virtual machine only ever slows a run, and it comes and goes over
minutes (one running-cluster calibration took 84.9 s, two others the same afternoon 66.8 and 67.7 s), so a share
read against a ceiling measured at another time moved either way (77% to 103%). Prints each wall time, the
speed-up (target: at least 1.6 on 2 cores), how many worker processes trained, whether all gave the same weights,
repeat for repeat, and where each executor's time went (read back from the repeats' MLflow runs): before the first
repeat (the stage's start, and with Ray the cluster's and its workers'), the repeats, after the last one, and how
busy the workers kept. Each Ray calibration's share of the ceiling is printed, each round's and from the fastest
of each; the target for the running cluster, which pays no Ray start-up, is 95%.
Run from the project root: `.venv/bin/python bench/cluster_speedup.py` (`--rounds N`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from servers import RayHead

from tracking.layout import CALIBRATE, NOISE_FILE, REPEATS_DIR
from tracking.names import COMPUTE_PROCESS_TAG
from tracking.noise.record import NoiseRecord
from tracking.store.recorded import read_link
from tracking.yaml_text import yaml_editor

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET = 1.6
CLUSTER_SHARE_TARGET = 0.95  # of the machine's ceiling, with the cluster already running
BARE_TRAININGS = 4  # per process, after one warm-up
ROUNDS = 3  # of every calibration and the ceiling, interleaved; the fastest of each counts
Calibration = tuple[float, dict, dict[str, float]]  # wall time, noise file, timeline


def calibrate(clone: Path, env: dict[str, str]) -> Calibration:
    """Wall time of `dvc repro -f -s calibrate` from nothing kept, the noise file it wrote with each repeat's run and
    place from the checkout's link merged in, and its timeline."""
    shutil.rmtree(clone / REPEATS_DIR, ignore_errors=True)
    began = time.time()
    started = time.perf_counter()
    done = subprocess.run(["dvc", "repro", "-f", "-s", "calibrate"], cwd=clone, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"dvc repro calibrate failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    # run ids and places are in the checkout's link: the noise file holds results only
    noise = NoiseRecord.whole(json.loads((clone / NOISE_FILE).read_text()), read_link(clone, CALIBRATE))
    return elapsed, noise, timeline(clone, noise, began, began + elapsed)


def timeline(clone: Path, noise: dict, began: float, ended: float) -> dict[str, float]:
    """Where a calibration's wall time went, from its repeats' runs in the clone's store (their start and end
    times): seconds before the first repeat opened its run, from then to the last repeat's end (the span), and
    after; the mean repeat; and the share of the span its worker processes spent in repeats."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{clone / 'mlflow.db'}")
    spans, busy = [], {}
    for run in noise["runs"]:
        info = client.get_run(run["run_id"]).info
        start, end = info.start_time / 1000, info.end_time / 1000
        spans.append((start, end))
        worker = run["where"][COMPUTE_PROCESS_TAG]
        busy[worker] = busy.get(worker, 0.0) + end - start
    first, last = min(start for start, _ in spans), max(end for _, end in spans)
    span = last - first
    return {
        "before": first - began,
        "span": span,
        "after": ended - last,
        "repeat": sum(end - start for start, end in spans) / len(spans),
        "workers": len(busy),
        "busy": sum(busy.values()) / (len(busy) * span),
    }


def timeline_line(name: str, parts: dict[str, float]) -> str:
    return (
        f"{name}: {parts['before']:.1f} s before the first repeat, {parts['span']:.1f} s of repeats "
        f"({parts['repeat']:.2f} s each; {parts['workers']:.0f} worker process(es) {parts['busy']:.0%} busy), "
        f"{parts['after']:.1f} s after the last"
    )


def set_executor(clone: Path, executor: str, address: str | None = None) -> None:
    """Edit params.yaml as a user would: `compute.executor` and `compute.address` only."""
    yaml = yaml_editor()
    path = clone / "params.yaml"
    params = yaml.load(path.read_text())
    params["compute"]["executor"] = executor
    params["compute"]["address"] = address
    with path.open("w") as file:
        yaml.dump(params, file)


def bare_trainings(count: int) -> None:
    """Train the default configuration's ALGO repeats 1..count untracked, as a team's script would (after one
    warm-up that pays the imports and tracing); print the seconds they took."""
    sys.path.insert(0, str(REPO / "bench"))
    from harness import bare_training, bench_setup

    bench = bench_setup(Path("params.yaml"), "bench-ceiling-")

    bare_training(bench, "algo", 0, gpu=False)
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts its timed trainings at once
    started = time.perf_counter()
    for repeat in range(1, count + 1):
        bare_training(bench, "algo", repeat, gpu=False)
    print(f"{time.perf_counter() - started:.3f}")


def ceiling(clone: Path, env: dict[str, str], processes: int) -> tuple[float, float, float]:
    """Seconds of `BARE_TRAININGS` bare trainings in one process alone, before and after the slowest of `processes`
    such processes whose timed trainings start together (after each has imported and trained its warm-up): the
    first alone run can follow a Ray cluster's shutdown, whose processes can still take a core."""
    command = [sys.executable, str(Path(__file__).resolve()), "--bare", str(BARE_TRAININGS)]

    def together(count: int) -> list[float]:
        started = [
            subprocess.Popen(
                command,
                cwd=clone,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for _ in range(count)
        ]
        for process in started:  # each has imported, set up and trained its warm-up
            if process.stdout.readline().strip() != "ready":
                sys.exit("a bare training process of the ceiling measurement failed before its timed trainings")
        for process in started:
            process.stdin.write("go\n")
            process.stdin.flush()
        return [float(process.communicate()[0].split()[-1]) for process in started]

    (before,) = together(1)
    slowest = max(together(processes))
    (after,) = together(1)
    return before, slowest, after


@dataclass
class Round:
    """One round's measurements: each executor's calibration and the ceiling's bare runs (seconds)."""

    local: Calibration
    ray: Calibration
    cluster: Calibration
    alone: float  # the faster of the alone runs before and after the together run
    together: float  # the slowest process of those at once

    def ceiling(self, cores: int) -> float:
        """The rate `cores` bare processes reach together over the rate of one alone."""
        return cores * self.alone / self.together

    def share(self, cores: int) -> float:
        """The running cluster's speed-up over the local executor, as a share of the ceiling."""
        return self.local[0] / self.cluster[0] / self.ceiling(cores)


def one_round(clone: Path, env: dict[str, str], cores: int, reverse: bool) -> Round:
    """Every calibration and the ceiling once, in order or in reverse, so that a load that grows or fades over the
    round falls on each side in turn."""
    found: dict[str, object] = {}

    def local() -> None:
        set_executor(clone, "local")
        found["local"] = calibrate(clone, env)

    def private() -> None:
        set_executor(clone, "ray")
        found["ray"] = calibrate(clone, env)

    def cluster() -> None:
        head = RayHead(cpus=cores).start()  # started before the timing, as a team's cluster runs already
        try:
            set_executor(clone, "ray", head.address)
            found["cluster"] = calibrate(clone, {**env, **head.env})
        finally:
            head.stop()

    def bare() -> None:
        before, together, after = ceiling(clone, env, cores)
        found["alone"], found["together"] = min(before, after), together

    for step in reversed((local, private, cluster, bare)) if reverse else (local, private, cluster, bare):
        step()
    return Round(**found)


def fastest(rounds: list[Round], executor: str) -> Calibration:
    return min((getattr(each, executor) for each in rounds), key=lambda calibration: calibration[0])


def of(values: list[float]) -> str:
    return "the fastest of " + ", ".join(f"{value:.1f}" for value in values) + " s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bare", type=int, help=argparse.SUPPRESS)  # one process of the ceiling measurement
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds of every measurement (default {ROUNDS})")
    args = parser.parse_args()
    if args.bare:
        bare_trainings(args.bare)
        return
    env = {key: value for key, value in os.environ.items() if key not in ("MLFLOW_TRACKING_URI", "VIRTUAL_ENV")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    cores = os.cpu_count() or 1
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        (clone / ".venv").symlink_to(REPO / ".venv")
        subprocess.run(["dvc", "repro", "prepare"], cwd=clone, env=env, check=True, capture_output=True)
        started = time.perf_counter()
        for number in range(args.rounds):
            rounds.append(one_round(clone, env, cores, reverse=number % 2 == 1))
            each = rounds[-1]
            left = (time.perf_counter() - started) / (number + 1) * (args.rounds - number - 1)
            print(
                f"round {number + 1} of {args.rounds}: local {each.local[0]:.1f} s, private Ray {each.ray[0]:.1f} s, "
                f"running cluster {each.cluster[0]:.1f} s, bare training alone {each.alone:.1f} s and "
                f"{each.together:.1f} s {cores} at once; the running cluster at {each.share(cores):.0%} of this "
                f"round's ceiling" + (f" (about {left / 60:.0f} min left)" if left else ""),
                flush=True,
            )

    best = Round(
        *(fastest(rounds, executor) for executor in ("local", "ray", "cluster")),
        alone=min(each.alone for each in rounds),
        together=min(each.together for each in rounds),
    )
    (local_s, local, local_parts), (ray_s, ray, ray_parts), (cluster_s, _, cluster_parts) = (
        best.local,
        best.ray,
        best.cluster,
    )
    alone_s, together_s = best.alone, best.together
    repeats = len(local["runs"])
    workers = len({run["where"][COMPUTE_PROCESS_TAG] for run in ray["runs"]})
    hashes = [
        [run["weights_sha256"] for run in getattr(each, executor)[1]["runs"]]
        for each in rounds
        for executor in ("local", "ray", "cluster")
    ]
    same = all(found == hashes[0] for found in hashes)
    speedup = local_s / ray_s
    print(f"default calibration, {repeats} repeats, {cores} cores, {len(rounds)} rounds (the fastest of each counts)")
    print(
        f"local executor: {local_s:.1f} s ({local_s / repeats:.2f} s a repeat, one process; {of([each.local[0] for each in rounds])})"
    )
    print(
        f"ray executor:   {ray_s:.1f} s ({workers} worker processes, a private Ray started and stopped; "
        f"{of([each.ray[0] for each in rounds])})"
    )
    print(
        f"ray executor on a running cluster: {cluster_s:.1f} s ({local_s / cluster_s:.2f}x the local executor; "
        f"{of([each.cluster[0] for each in rounds])})"
    )
    print(f"speed-up: {speedup:.2f}x (target >= {TARGET}) {'OK' if speedup >= TARGET else 'UNDER TARGET'}")
    print(f"same weights, repeat for repeat, every calibration of every round: {same}")
    print(timeline_line("local", local_parts))
    print(timeline_line("ray  ", ray_parts))
    print(timeline_line("ray on a running cluster", cluster_parts))
    limit = best.ceiling(cores)
    print(
        f"this machine's ceiling, no Ray, no tracking: {BARE_TRAININGS} bare trainings take {alone_s:.1f} s in one "
        f"process alone ({of([each.alone for each in rounds])}) and {together_s:.1f} s in each of {cores} at once "
        f"({of([each.together for each in rounds])}): {limit:.2f}x the rate of one (the Ray speed-up is "
        f"{speedup / limit:.0%} of it)" + (f"; over {cores}x: the machine was not quiet" if limit > cores else "")
    )
    share = best.share(cores)
    print(
        f"ray on a running cluster: {share:.0%} of the ceiling from the fastest of each (target >= "
        f"{CLUSTER_SHARE_TARGET:.0%}) {'OK' if share >= CLUSTER_SHARE_TARGET else 'UNDER TARGET'}; round by round "
        + ", ".join(f"{each.share(cores):.0%}" for each in rounds)
    )
    repeats_speedup = local_parts["span"] / ray_parts["span"]
    ideal = local_parts["before"] + local_parts["after"] + local_parts["span"] / limit
    print(
        f"the repeats alone: {repeats_speedup:.2f}x ({repeats_speedup / limit:.0%} of the ceiling); with the stage's "
        f"own {local_parts['before'] + local_parts['after']:.1f} s before and after the repeats unchanged, an executor "
        f"at the ceiling takes {ideal:.1f} s: {local_s / ideal:.2f}x ({local_s / ideal / limit:.0%} of the ceiling)"
    )


if __name__ == "__main__":
    main()
