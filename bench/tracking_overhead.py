"""Cost of tracking: the default model trained with tracking off and on, alternating in one process.

Prints each repeat's wall time, the median of the paired ratios tracked/untracked (target: at most 1.05), and the one-off
per-process costs (importing MLflow, opening the store) separately, since they do not grow with training.
Run from the project root: `.venv/bin/python bench/tracking_overhead.py [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.prepare import split
from tracking.config.params import load_params
from tracking.data.dataset import build_manifest, load_source, output_size
from tracking.determinism.process import reproducible_process
from tracking.store.location import project_root

TARGET = 1.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args()
    params = load_params(args.params)
    seeds = reproducible_process(params)
    root = project_root()
    source = load_source(params.data.source, root)
    splits = split(source, params.data, params.data.split_seed)
    manifest = build_manifest(splits, source, params.data.task)
    scratch = Path(tempfile.mkdtemp(prefix="bench-tracking-"))
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{scratch / 'mlflow.db'}"

    started = time.perf_counter()
    import mlflow  # noqa: F401

    import_s = time.perf_counter() - started
    from pipelines.train import tracked_training, write_outputs
    from pipelines.training import train_model
    from tracking.data.hashing import weights_sha256
    from tracking.determinism.process import seed_frameworks
    from tracking.run.tracker import Tracker
    from tracking.store.location import connect

    started = time.perf_counter()
    connect(root, "bench-overhead")
    connect_s = time.perf_counter() - started

    def untracked() -> str:
        seed_frameworks(params, seeds)
        model, history = train_model(params, seeds, splits["train"], splits.get("val"), output_size(manifest))
        digest = weights_sha256(model.get_weights())
        write_outputs(scratch / "untracked", model, history, digest)
        return digest

    def tracked() -> str:
        with Tracker("bench-overhead", root, stage="bench") as tracker:
            model, history, digest = tracked_training(
                params, seeds, root, manifest, splits["train"], splits.get("val"), tracker
            )
            write_outputs(scratch / "tracked", model, history, digest)
        return digest

    untracked()
    tracked()
    times: dict[str, list[float]] = {"untracked": [], "tracked": []}
    digests = set()
    for repeat in range(args.repeats):
        order = [("untracked", untracked), ("tracked", tracked)]
        for name, run in order if repeat % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            digests.add(run())
            times[name].append(time.perf_counter() - started)
        print(
            f"repeat {repeat + 1}/{args.repeats}: untracked {times['untracked'][-1]:.2f} s, tracked {times['tracked'][-1]:.2f} s"
        )
    ratio = statistics.median(t / u for t, u in zip(times["tracked"], times["untracked"], strict=False))
    print(f"model {params.model.builder}, {params.train.epochs} epochs, {len(splits['train']['y'])} training samples")
    print(
        f"median untracked {statistics.median(times['untracked']):.2f} s, tracked {statistics.median(times['tracked']):.2f} s;"
        f" fastest untracked {min(times['untracked']):.2f} s, tracked {min(times['tracked']):.2f} s"
    )
    print(
        f"ratio tracked/untracked (median of the paired repeats): {ratio:.3f} (target <= {TARGET})"
        f" {'OK' if ratio <= TARGET else 'OVER TARGET'}"
    )
    print(f"weights identical in every run, tracked or not: {len(digests) == 1}")
    print(f"one-off per process: import mlflow {import_s:.2f} s, open the store {connect_s:.2f} s")


if __name__ == "__main__":
    main()
