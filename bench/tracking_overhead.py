"""Cost of tracking: the default model trained as the `train` stage does, untracked, tracked by us, and tracked by
MLflow's own `mlflow.keras.autolog()`, alternating in one process.

Prints each repeat's wall time with where its CPU went (this process, the machine's other processes, the
hypervisor's steal: a run the machine slowed shows it there), the median of the paired ratios tracked/untracked
(target: at most 1.02) for ours and for autolog, and what a run costs over the untracked training in CPU: the
CPU seconds of the tracked process over the untracked one's (every thread, paired repeat by repeat), their
geometric mean with its 95% interval, a ratio that cannot come out negative however noisy the repeats (a
difference of CPU seconds could, which is why the figure is a ratio; target: ours at most 1.02), with the counts
of params, tags, metrics, metric values, artifacts, models and data sets each arm records. Each arm's time after
`fit` (its phases after fit, hash, save and end together) is printed, median and slowest (goal: under 1 s, whatever
the training's length).
Ours is tracked with MLflow's system metrics and without them; the ratios use the one `compute.system_metrics` says
(on by default, as users get it), and the paired ratio with/without is their own cost. The one-off per-process
costs (importing MLflow, opening the store) are printed apart, since they do not grow with training. Then our
per-run fixed cost in CPU seconds (process time, every thread), each part measured alone on the trained model in
the order a run makes them.

Every run is timed phase by phase (bench/waits.py): `seed` (its start-up: the frameworks seeded), `build`, `open`
(the run opened), `before fit` (the data: the seeded batches made; ours hands its setup's logging to the writer),
`fit`, `after fit` (ours: the weights hashed, the model and curves logged; autolog: its model logged), `hash`,
`save` (the model and history written as the train stage writes them) and `end` (the run ended), with the main thread's context switches and its wait channel sampled every 50 ms: for each arm's
slowest run, the phase that took longest over its median and what the thread waited on there, so a stall is
named, ours or the machine's.
`--epochs` trains longer than params.yaml says (`--epochs 320`: about a minute on 2 cores), where the ratio's
target is judged on a realistic training length.
Run from the project root: `.venv/bin/python bench/tracking_overhead.py [--repeats 7] [--epochs N]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

from harness import bench_setup, geometric_interval
from waits import Phase, WaitSampler, described

TARGET = 1.02
AFTER_FIT_GOAL_S = 1.0  # a run's phases after `fit`, whatever the number of epochs, samples and metric values
UNTRACKED, AUTOLOG = "untracked", "autolog"
# A run's phases in the order it goes through them (an arm skips those it has not).
PHASES = ("seed", "build", "open", "before fit", "fit", "after fit", "hash", "save", "end")
AFTER_FIT = PHASES[PHASES.index("fit") + 1 :]


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
    import mlflow

    import_s = time.perf_counter() - started
    import keras
    import mlflow.keras

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
    autolog_experiment = connect(root, "bench-autolog")
    sampler = WaitSampler()

    class FitLaps(keras.callbacks.Callback):
        """Lap the run's phases where `fit` begins and ends, to tell the training from the run's own work."""

        def __init__(self, phases: dict[str, Phase]) -> None:
            super().__init__()
            self.phases = phases

        def on_train_begin(self, logs: Any = None) -> None:
            sampler.lap(self.phases, "fit")

        def on_train_end(self, logs: Any = None) -> None:
            sampler.lap(self.phases, "after fit")

    def built_model(phases: dict[str, Phase]) -> Any:
        sampler.lap(phases, "seed")
        effective = seed_frameworks(params, seeds)
        sampler.lap(phases, "build")
        return effective, prepare_model(params, seeds, BuildInputs.of(manifest, train, root))

    def untracked() -> tuple[str, dict[str, Phase], str | None]:
        phases: dict[str, Phase] = {}
        _, built = built_model(phases)
        sampler.lap(phases, "before fit")
        history = fit_model(built.model, params, seeds, train, val, [FitLaps(phases)])
        sampler.lap(phases, "hash")
        digest = weights_sha256(built.model.get_weights())
        sampler.lap(phases, "save")
        write_outputs(scratch / UNTRACKED, built.model, history, digest)
        sampler.lap(phases, None)
        return digest, phases, None

    def tracked(system_metrics: bool) -> tuple[str, dict[str, Phase], str | None]:
        phases: dict[str, Phase] = {}
        effective, built = built_model(phases)
        sampler.lap(phases, "open")
        with Tracker("bench-overhead", root, stage="bench", system_metrics=system_metrics) as tracker:
            sampler.lap(phases, "before fit")  # the setup's logging is handed to the writer; hashing is after fit
            model, history, digest = tracked_training(
                params, seeds, effective, built, root, manifest, train, val, tracker, [FitLaps(phases)]
            )
            sampler.lap(phases, "save")
            write_outputs(scratch / "tracked", model, history, digest)
            sampler.lap(phases, "end")
        sampler.lap(phases, None)
        return digest, phases, tracker.run_id

    def autologged() -> tuple[str, dict[str, Phase], str | None]:
        phases: dict[str, Phase] = {}
        _, built = built_model(phases)
        sampler.lap(phases, "open")
        # On after the model is built: our build's preflight check fits a step, which autolog would log as a run.
        mlflow.keras.autolog(silent=True)
        run = mlflow.start_run(experiment_id=autolog_experiment)
        sampler.lap(phases, "before fit")
        history = fit_model(built.model, params, seeds, train, val, [FitLaps(phases)])
        sampler.lap(phases, "hash")
        digest = weights_sha256(built.model.get_weights())
        sampler.lap(phases, "save")
        write_outputs(scratch / AUTOLOG, built.model, history, digest)
        sampler.lap(phases, "end")
        mlflow.end_run()
        sampler.lap(phases, None)
        return digest, phases, run.info.run_id

    with_system, without_system = "ours with system metrics", "ours without"
    arms = {
        UNTRACKED: untracked,
        with_system: partial(tracked, True),
        without_system: partial(tracked, False),
        AUTOLOG: autologged,
    }
    configured = with_system if params.compute.system_metrics else without_system
    last_run: dict[str, str | None] = {}

    def arm_run(name: str) -> tuple[str, dict[str, Phase], str | None]:
        """One run of arm `name`; autologging is on in the autolog arm's run only (its `open` phase turns it on,
        as a team's script calls `mlflow.keras.autolog()` once before its one run)."""
        try:
            found = arms[name]()
        finally:
            mlflow.keras.autolog(disable=True, silent=True)
        last_run[name] = found[2]
        return found

    for name in arms:
        arm_run(name)  # warm-up
    times: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    waits: dict[str, list[dict[str, Phase]]] = {name: [] for name in arms}
    digests: dict[str, set[str]] = {name: set() for name in arms}
    for repeat in range(args.repeats):
        order = list(arms)
        for name in order[repeat % len(order) :] + order[: repeat % len(order)]:  # each arm first in turn
            digest, phases, parts = measured(partial(arm_run, name))
            digests[name].add(digest)
            times[name].append(parts)
            waits[name].append(phases)
        print(
            f"repeat {repeat + 1}/{args.repeats}: " + ", ".join(f"{name} {run_line(times[name][-1])}" for name in arms)
        )
    sampler.stop()

    def median(name: str, part: str) -> float:
        return statistics.median(parts.get(part, 0.0) for parts in times[name])

    def paired_ratio(name: str, other: str) -> float:
        return statistics.median(a["total"] / b["total"] for a, b in zip(times[name], times[other], strict=True))

    def cpu_ratio(name: str) -> tuple[float, float, float]:
        """Arm `name`'s CPU seconds over the untracked training's, repeat by repeat: their geometric mean and its
        95% interval."""
        return geometric_interval([a["cpu"] / b["cpu"] for a, b in zip(times[name], times[UNTRACKED], strict=True)])

    ratio, autolog_ratio = paired_ratio(configured, UNTRACKED), paired_ratio(AUTOLOG, UNTRACKED)
    epochs = params.train.epochs
    per_epoch = (median(configured, "fit") - median(UNTRACKED, "fit")) / epochs
    per_run = median(configured, "total") - median(UNTRACKED, "total") - per_epoch * epochs
    print(f"model {params.model.builder}, {epochs} epochs, {len(train['y'])} training samples")
    print(
        f"median untracked {median(UNTRACKED, 'total'):.2f} s, {configured} {median(configured, 'total'):.2f} s, "
        f"autolog {median(AUTOLOG, 'total'):.2f} s (fit {median(UNTRACKED, 'fit'):.2f} s untracked, "
        f"{median(configured, 'fit'):.2f} s ours, {median(AUTOLOG, 'fit'):.2f} s autolog)"
    )
    print(
        f"ours, per epoch on the training thread: {per_epoch * 1000:.1f} ms; per run: {per_run:.2f} s "
        f"(opening the run {median(configured, 'open'):.2f} s, logging after fit "
        f"{median(configured, 'after fit'):.2f} s, ending it {median(configured, 'end'):.2f} s)"
    )
    for name, found in ((configured, ratio), (AUTOLOG, autolog_ratio)):
        print(
            f"ratio {name}/untracked (median of the paired repeats): {found:.3f} (target <= {TARGET})"
            f" {'OK' if found <= TARGET else 'OVER TARGET'}"
        )
    ours_cpu = cpu_ratio(configured)[0]
    print(
        "CPU of the tracked process over the untracked one (geometric mean of the paired repeats, 95% interval): "
        + ", ".join(
            "{} {:.3f} [{:.3f}, {:.3f}]".format(name, *cpu_ratio(name))
            for name in (configured, without_system, AUTOLOG)
        )
        + f" (target: ours <= {TARGET}) {'OK' if ours_cpu <= TARGET else 'OVER TARGET'}"
    )
    for name in arms:
        after = [sum(parts.get(phase, 0.0) for phase in AFTER_FIT) for parts in times[name]]
        print(
            f"after fit ({', '.join(AFTER_FIT)}), {name}: median {statistics.median(after):.3f} s, slowest "
            f"{max(after):.3f} s (goal < {AFTER_FIT_GOAL_S} s) {'OK' if max(after) < AFTER_FIT_GOAL_S else 'OVER GOAL'}"
        )
    print(
        f"system metrics: ours with/without {paired_ratio(with_system, without_system):.3f} (median of the "
        f"paired repeats); ending the run {median(with_system, 'end'):.3f} s with, "
        f"{median(without_system, 'end'):.3f} s without"
    )
    client = mlflow.MlflowClient()
    for name in (configured, AUTOLOG):
        counts = recorded(client, last_run[name])
        print(f"{name} records per run: " + ", ".join(f"{count} {what}" for what, count in counts.items()))
    print(
        "weights identical in every run, tracked or not: "
        f"{len(set().union(*digests.values())) == 1} ({', '.join(f'{name} {len(found)}' for name, found in digests.items())} distinct)"
    )
    phase_names = [phase for phase in PHASES if any(phase in phases for runs in waits.values() for phases in runs)]
    for name in arms:
        print(
            f"{name}, median phases: "
            + ", ".join(f"{phase} {phase_median(waits[name], phase):.3f} s" for phase in phase_names)
        )
    for name in arms:
        index = max(range(len(times[name])), key=lambda i: times[name][i]["total"])
        slowest, phases = times[name][index], waits[name][index]

        over = {phase: found.seconds - phase_median(waits[name], phase) for phase, found in phases.items()}
        worst = max(over, key=over.__getitem__)
        print(
            f"slowest {name}: {slowest['total'] / median(name, 'total'):.2f}x its median, {run_line(slowest)}; "
            f"fit {slowest['fit']:.2f} s (median {median(name, 'fit'):.2f} s); its longest phase over its median: "
            f"{worst} +{over[worst]:.2f} s ({phases[worst].seconds:.2f} s), where the main thread waited in "
            f"{described(phases[worst])}; outside fit in all: {described(outside_fit(phases))}"
        )
    print(f"one-off per process: import mlflow {import_s:.2f} s, open the store {connect_s:.2f} s")
    costs = fixed_costs(bench, params, params.compute.system_metrics)
    print(
        "ours, per-run fixed cost, CPU seconds (median of 5 runs, each part alone): "
        + ", ".join(f"{part} {seconds:.3f}" for part, seconds in costs.items())
        + f"; in all {sum(costs.values()):.3f} s"
    )


def phase_median(runs: list[dict[str, Phase]], phase: str) -> float:
    """The median seconds of `phase` over `runs` (0 in a run without it)."""
    return statistics.median(phases[phase].seconds if phase in phases else 0.0 for phases in runs)


def outside_fit(phases: dict[str, Phase]) -> Phase:
    """A run's phases but `fit` taken together: their seconds, switches and wait-channel samples."""
    merged = Phase()
    for name, phase in phases.items():
        if name != "fit":
            merged.seconds += phase.seconds
            merged.voluntary += phase.voluntary
            merged.involuntary += phase.involuntary
            merged.channels.update(phase.channels)
    return merged


def recorded(client: Any, run_id: str | None) -> dict[str, int]:
    """What the run `run_id` holds, read back through MLflow: params, tags, metric keys and values, artifact files
    (every folder walked), logged models and data sets."""
    run = client.get_run(run_id)

    def files(path: str | None = None) -> int:
        return sum(files(item.path) if item.is_dir else 1 for item in client.list_artifacts(run_id, path))

    models = client.search_logged_models([run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'")
    return {
        "params": len(run.data.params),
        "tags": len(run.data.tags),
        "metrics": len(run.data.metrics),
        "metric values": sum(len(client.get_metric_history(run_id, key)) for key in run.data.metrics),
        "artifacts": files(),
        "models": len(models),
        "data sets": len(run.inputs.dataset_inputs),
    }


def machine_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine has spent busy, and those the hypervisor gave other guests (steal), since
    boot (/proc/stat's first line; Linux)."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in stat.readline().split()[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def measured(arm: Any) -> tuple[str, dict[str, Phase], dict[str, float]]:
    """Run one arm and add where its wall time's CPU went: this process's CPU seconds (every thread, and the children
    it waited for), the other processes' on this machine, and the seconds stolen from it by the hypervisor. A run slowed by the machine
    shows it in `others` or `steal`; one slowed by its own work (a busy thread) in `cpu`."""
    busy, steal = machine_seconds()
    cpu = process_cpu()
    digest, phases, _ = arm()
    cpu = process_cpu() - cpu
    busy_after, steal_after = machine_seconds()
    parts = {name: phase.seconds for name, phase in phases.items()}
    parts["total"] = sum(parts.values())
    return (
        digest,
        phases,
        {**parts, "cpu": cpu, "others": max(0.0, busy_after - busy - cpu), "steal": steal_after - steal},
    )


def process_cpu() -> float:
    """CPU seconds of this process (every thread) and of the children it waited for: MLflow's model logging infers
    a model's requirements in a child process of its own."""
    return sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


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
            tracker.log_provenance(with_model(record, built, params), installed_packages())

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
