"""Cost of tracking: the default model trained as the `train` stage does, with tracking off and on, alternating
in one process.

Prints each repeat's wall time with where its CPU went (this process, the machine's other processes, the
hypervisor's steal: a run the machine slowed shows it there), the slowest run of each arm, the median of the
paired ratios tracked/untracked (target: at most 1.02), and the cost split in two: per epoch on the training thread (the metrics callback) and per run (opening the run,
logging the model, waiting for the background writes at its end). Tracked runs are made with MLflow's system
metrics and without them; the ratio and the split use the one `compute.system_metrics` says (on by default,
as users get it), and the paired ratio with/without is their own cost. The one-off per-process costs (importing MLflow, opening the store) are
printed apart, since they do not grow with training. Then the per-run fixed cost in CPU seconds (process time,
every thread), each part measured alone on the trained model in the order a run makes them: opening the run, params
and provenance, the data set, the model, the curves, ending the run (goal: 0.15 s in all).
`--epochs` trains longer than params.yaml says (`--epochs 320`: about a minute on 2 cores), where the ratio's
target is judged on a realistic training length.
Run from the project root: `.venv/bin/python bench/tracking_overhead.py [--repeats 7] [--epochs N]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

from harness import bench_setup

TARGET = 1.02
FIXED_COST_GOAL = 0.15  # CPU seconds a run adds whatever its length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--epochs", type=int, help="train this many epochs instead of train.epochs")
    args = parser.parse_args()
    bench = bench_setup(args.params, "bench-tracking-")
    params, seeds, root, manifest, scratch = bench.params, bench.seeds, bench.root, bench.manifest, bench.scratch
    if args.epochs:
        params = params.model_copy(update={"train": params.train.model_copy(update={"epochs": args.epochs})})
    train, val = bench.splits["train"], bench.splits.get("val")

    started = time.perf_counter()
    import mlflow  # noqa: F401

    import_s = time.perf_counter() - started
    import keras

    from tracking.data.hashing import weights_sha256
    from tracking.determinism.process import seed_frameworks
    from tracking.run.tracker import Tracker
    from tracking.stages.train import write_outputs
    from tracking.store.location import connect
    from tracking.training.fitting import fit_model
    from tracking.training.model import BuildInputs, prepare_model
    from tracking.training.tracked import tracked_training

    started = time.perf_counter()
    connect(root, "bench-overhead")
    connect_s = time.perf_counter() - started

    class FitTime(keras.callbacks.Callback):
        """When fit began and ended, to tell the training thread's time from the run's own."""

        def on_train_begin(self, logs: Any = None) -> None:
            self.began = time.perf_counter()

        def on_train_end(self, logs: Any = None) -> None:
            self.ended = time.perf_counter()

    def untracked() -> tuple[str, dict[str, float]]:
        seed_frameworks(params, seeds)
        began = time.perf_counter()
        built = prepare_model(params, seeds, BuildInputs.of(manifest, train, root))
        fit = FitTime()
        history = fit_model(built.model, params, seeds, train, val, [fit])
        digest = weights_sha256(built.model.get_weights())
        write_outputs(scratch / "untracked", built.model, history, digest)
        return digest, {"total": time.perf_counter() - began, "fit": fit.ended - fit.began}

    def tracked(system_metrics: bool) -> tuple[str, dict[str, float]]:
        effective = seed_frameworks(params, seeds)
        began = time.perf_counter()
        built = prepare_model(params, seeds, BuildInputs.of(manifest, train, root))
        fit, building = FitTime(), time.perf_counter()
        with Tracker("bench-overhead", root, stage="bench", system_metrics=system_metrics) as tracker:
            opened = time.perf_counter()
            model, history, digest = tracked_training(
                params, seeds, effective, built, root, manifest, train, val, tracker, [fit]
            )
            logged = time.perf_counter()
            write_outputs(scratch / "tracked", model, history, digest)
            closing = time.perf_counter()
        ended = time.perf_counter()
        return digest, {
            "total": ended - began,
            "fit": fit.ended - fit.began,
            "open": opened - building,
            "after fit": logged - fit.ended,
            "end": ended - closing,
        }

    with_system, without_system = "tracked with system metrics", "tracked without"
    arms = {"untracked": untracked, with_system: partial(tracked, True), without_system: partial(tracked, False)}
    configured = with_system if params.compute.system_metrics else without_system
    for warm_up in arms.values():
        warm_up()
    times: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    digests = set()
    for repeat in range(args.repeats):
        order = list(arms)
        for name in order[repeat % len(order) :] + order[: repeat % len(order)]:  # each arm first in turn
            digest, parts = measured(arms[name])
            digests.add(digest)
            times[name].append(parts)
        print(
            f"repeat {repeat + 1}/{args.repeats}: " + ", ".join(f"{name} {run_line(times[name][-1])}" for name in arms)
        )

    def median(name: str, part: str) -> float:
        return statistics.median(parts[part] for parts in times[name])

    def paired_ratio(name: str, other: str) -> float:
        return statistics.median(a["total"] / b["total"] for a, b in zip(times[name], times[other], strict=True))

    ratio = paired_ratio(configured, "untracked")
    epochs = params.train.epochs
    per_epoch = (median(configured, "fit") - median("untracked", "fit")) / epochs
    per_run = median(configured, "total") - median("untracked", "total") - per_epoch * epochs
    print(f"model {params.model.builder}, {epochs} epochs, {len(train['y'])} training samples")
    print(
        f"median untracked {median('untracked', 'total'):.2f} s, {configured} {median(configured, 'total'):.2f} s "
        f"(fit {median('untracked', 'fit'):.2f} s untracked, {median(configured, 'fit'):.2f} s tracked)"
    )
    print(
        f"per epoch on the training thread: {per_epoch * 1000:.1f} ms; per run: {per_run:.2f} s "
        f"(opening the run {median(configured, 'open'):.2f} s, logging after fit "
        f"{median(configured, 'after fit'):.2f} s, ending it {median(configured, 'end'):.2f} s)"
    )
    print(
        f"ratio tracked/untracked (median of the paired repeats): {ratio:.3f} (target <= {TARGET})"
        f" {'OK' if ratio <= TARGET else 'OVER TARGET'}"
    )
    print(
        f"system metrics: tracked with/without {paired_ratio(with_system, without_system):.3f} (median of the "
        f"paired repeats); ending the run {median(with_system, 'end'):.3f} s with, "
        f"{median(without_system, 'end'):.3f} s without"
    )
    print(f"weights identical in every run, tracked or not: {len(digests) == 1}")
    for name in arms:
        slowest = max(times[name], key=lambda parts: parts["total"])
        print(
            f"slowest {name}: {slowest['total'] / median(name, 'total'):.2f}x its median, {run_line(slowest)}; "
            f"fit {slowest['fit']:.2f} s (median {median(name, 'fit'):.2f} s)"
        )
    print(f"one-off per process: import mlflow {import_s:.2f} s, open the store {connect_s:.2f} s")
    costs = fixed_costs(bench, params, params.compute.system_metrics)
    total = sum(costs.values())
    print(
        "per-run fixed cost, CPU seconds (median of 5 runs, each part alone): "
        + ", ".join(f"{part} {seconds:.3f}" for part, seconds in costs.items())
        + f"; in all {total:.3f} s (goal {FIXED_COST_GOAL} s) {'OK' if total <= FIXED_COST_GOAL else 'OVER GOAL'}"
    )


def machine_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine has spent busy, and those the hypervisor gave other guests (steal), since
    boot (/proc/stat's first line; Linux)."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in stat.readline().split()[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def measured(arm: Any) -> tuple[str, dict[str, float]]:
    """Run one arm and add where its wall time's CPU went: this process's CPU seconds (every thread), the other
    processes' on this machine, and the seconds stolen from it by the hypervisor. A run slowed by the machine
    shows it in `others` or `steal`; one slowed by its own work (a busy thread) in `cpu`."""
    busy, steal = machine_seconds()
    cpu = time.process_time()
    digest, parts = arm()
    cpu = time.process_time() - cpu
    busy_after, steal_after = machine_seconds()
    return digest, {**parts, "cpu": cpu, "others": max(0.0, busy_after - busy - cpu), "steal": steal_after - steal}


def run_line(parts: dict[str, float]) -> str:
    return f"{parts['total']:.2f} s (cpu {parts['cpu']:.1f}, others {parts['others']:.1f}, steal {parts['steal']:.1f})"


def fixed_costs(bench: Any, params: Any, system_metrics: bool, runs: int = 5) -> dict[str, float]:
    """The CPU seconds (process time, all threads) of each part of a tracked run that does not grow with training,
    measured one after another on a model trained once, as the train stage makes them; medians of `runs` runs."""
    from tracking.determinism.process import seed_frameworks
    from tracking.determinism.settings import as_record
    from tracking.provenance import capture
    from tracking.provenance.software import installed_packages
    from tracking.run.tracker import Tracker
    from tracking.training.fitting import fit_model
    from tracking.training.model import BuildInputs, prepare_model, with_model
    from tracking.training.tracked import curves_figure

    root, manifest, seeds = bench.root, bench.manifest, bench.seeds
    train, val = bench.splits["train"], bench.splits.get("val")
    effective = seed_frameworks(params, seeds)
    built = prepare_model(params, seeds, BuildInputs.of(manifest, train, root))
    history = fit_model(built.model, params, seeds, train, val)
    found: dict[str, list[float]] = {}

    def part(name: str, work: Any) -> Any:
        began = time.process_time()
        result = work()
        found.setdefault(name, []).append(time.process_time() - began)
        return result

    def one_run() -> None:
        tracker = Tracker("bench-fixed-cost", root, stage="bench", system_metrics=system_metrics)
        part("opening", tracker.__enter__)

        def provenance() -> None:
            tracker.log_params(params.flat())
            record = capture(root, seeds.as_dict(), as_record(params.determinism, effective), stages=("prepare",))
            tracker.log_provenance(with_model(record, built), installed_packages())

        part("params and provenance", provenance)
        part("data", lambda: tracker.log_dataset(manifest, train["x"], train["y"], root, "training"))
        part("model", lambda: tracker.log_keras_model(built.model, train["x"][:2]))
        part("curves", lambda: tracker.log_figure(curves_figure(history), "plots/training_curves.png"))
        part("ending", lambda: tracker.__exit__(None, None, None))

    for _ in range(runs):
        one_run()
    return {name: statistics.median(values) for name, values in found.items()}


if __name__ == "__main__":
    main()
