"""Cost of a calibration repeat next to the same configuration's bare training, alternating in one process.

A repeat is what the `calibrate` stage does per repeat (pipelines/repeats.py's `RepeatWorker.run`: a child MLflow
run, the model reset and re-seeded, training, scoring on the test set, provenance and metrics logged). Bare
training is what a team's own script does: build, compile and fit the same configuration with the same seeds,
untracked. Prints the median of the paired ratios (target: at most 1.15) and the parts a repeat is made of: the reset
and fit alone (what a repeat trains, no validation pass), and the rest (child run, scoring, logging).
Run from the project root: `.venv/bin/python bench/calibration_repeat.py [--repeats 5]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from harness import bare_training, bench_setup

TARGET = 1.15
VARIANT = "algo"  # seeds differ per repeat, kernels deterministic: the variant every calibration has


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args()
    bench = bench_setup(args.params, "bench-calibration-")
    params, seeds, root, splits, manifest = bench.params, bench.seeds, bench.root, bench.splits, bench.manifest

    from tracking.data.hashing import weights_sha256
    from tracking.determinism.process import seed_frameworks
    from tracking.repeats.kept import Job
    from tracking.repeats.variants import variant_setup
    from tracking.repeats.worker import RepeatWorker
    from tracking.run.tracker import Tracker
    from tracking.stages.calibrate import open_calibration
    from tracking.training.fitting import fit_model

    train, val = splits["train"], splits.get("val")

    with Tracker("bench-calibration", root, stage="bench", run_name="calibration") as parent:
        calibration = RepeatWorker.in_this_process(
            open_calibration(params, params, seeds, root, (manifest, splits), parent)
        )

        def setup(repeat: int) -> tuple:
            return variant_setup(VARIANT, repeat, params, seeds, True, calibration.gpu)

        def bare(repeat: int) -> str:
            return weights_sha256(bare_training(bench, VARIANT, repeat, calibration.gpu).get_weights())

        def repeat_fit(repeat: int) -> str:
            run_params, run_seeds, within, _ = setup(repeat)
            seed_frameworks(run_params, run_seeds)
            model = calibration.models.prepare(run_params, run_seeds).model
            fit_model(model, run_params, run_seeds, train, val, within_batch_seed=within)  # as a repeat: validated
            return weights_sha256(model.get_weights())

        def repeat(repeat: int) -> str:
            return calibration.run(Job(VARIANT, repeat, "bench")).run["weights_sha256"]

        kinds = {"bare": bare, "repeat": repeat, "fit": repeat_fit}
        for run in kinds.values():  # warm-up: the first of each pays the one-off tracing and imports
            run(0)
        times: dict[str, list[float]] = {name: [] for name in kinds}
        same = True
        for index in range(1, args.repeats + 1):
            order = list(kinds.items())
            digests = set()
            for name, run in order if index % 2 else order[::-1]:
                started = time.perf_counter()
                digests.add(run(index))
                times[name].append(time.perf_counter() - started)
            same = same and len(digests) == 1
            print(
                f"repeat {index}/{args.repeats}: bare training {times['bare'][-1]:.2f} s, "
                f"calibration repeat {times['repeat'][-1]:.2f} s (of which reset and fit {times['fit'][-1]:.2f} s)"
            )
    ratio = statistics.median(r / b for r, b in zip(times["repeat"], times["bare"], strict=True))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"model {params.model.builder}, {params.train.epochs} epochs, {len(train['y'])} training samples")
    print(
        f"median bare training {median['bare']:.2f} s, calibration repeat {median['repeat']:.2f} s: "
        f"reset and fit {median['fit']:.2f} s, child run, scoring and logging {median['repeat'] - median['fit']:.2f} s"
    )
    print(
        f"ratio repeat/bare (median of the paired repeats): {ratio:.3f} (target <= {TARGET})"
        f" {'OK' if ratio <= TARGET else 'OVER TARGET'}"
    )
    print(f"weights identical across bare, reset and repeat for every seed: {same}")


if __name__ == "__main__":
    main()
