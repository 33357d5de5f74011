"""What the training benchmarks share: the configured data split in memory, a scratch MLflow store, and the
geometric mean of paired ratios with its interval."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracking.config.params import Params
from tracking.config.params_file import load_params
from tracking.data.dataset import build_manifest, load_source
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process
from tracking.determinism.seeds import Seeds
from tracking.stages.prepare import split
from tracking.store.location import project_root


@dataclass(frozen=True)
class Bench:
    """The configuration, its seeds, the project root, the splits and their manifest, and the scratch folder."""

    params: Params
    seeds: Seeds
    root: Path
    splits: dict[str, dict[str, Any]]
    manifest: Manifest
    scratch: Path


def bench_setup(params_file: Path, prefix: str) -> Bench:
    """Load `params_file`, set the process up as a stage does, split its data as `prepare` does, and point
    MLflow at a new SQLite store in a temporary folder (the project's store is left alone)."""
    params = load_params(params_file)
    seeds = reproducible_process(params)
    root = project_root()
    source = load_source(params.data.source, root)
    splits = split(source, params.data, params.data.split_seed)
    manifest = build_manifest(splits, source, params.data.task)
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{scratch / 'mlflow.db'}"
    return Bench(params, seeds, root, splits, manifest, scratch)


def bare_training(bench: Bench, variant: str, repeat: int, gpu: bool) -> Any:
    """Train `variant`'s repeat `repeat` of the configuration untracked, as a team's own script would: seed,
    build, compile and fit; return the model."""
    from tracking.determinism.process import seed_frameworks
    from tracking.repeats.variants import variant_setup
    from tracking.training.fitting import train_model
    from tracking.training.model import BuildInputs

    run_params, seeds, within, _ = variant_setup(variant, repeat, bench.params, bench.seeds, True, gpu)
    seed_frameworks(run_params, seeds)
    train, val = bench.splits["train"], bench.splits.get("val")
    inputs = BuildInputs.of(bench.manifest, train, bench.root)
    model, _ = train_model(run_params, seeds, inputs, val, within_batch_seed=within)
    return model


def geometric_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of positive `ratios` and its 95% t-interval (on their logarithms): positive, whatever the
    noise; the interval is infinite with one repeat."""
    import math
    import statistics

    from scipy import stats

    logs = [math.log(ratio) for ratio in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), 0.0, math.inf
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)
