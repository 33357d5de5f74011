"""Speed and memory of the noise metrics at scale: 1,000 runs x 10,000 test predictions x 100,000 weights.

Synthetic arrays; times the pairwise churn and weight-distance matrices, their summaries and a band per
metric, and reports the peak memory NumPy allocated (tracemalloc). Target here: under 10 s and 2 GiB.
Run: `.venv/bin/python bench/noise_metrics_speed.py`.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracking.noise.statistics import band_from_values, off_diagonal_summary, pairwise_churn, pairwise_weight_distance

TIME_LIMIT_S, MEMORY_LIMIT_GIB = 10.0, 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--predictions", type=int, default=10_000)
    parser.add_argument("--weights", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    truth = rng.integers(0, args.classes, args.predictions)
    flips = rng.random((args.runs, args.predictions)) < 0.05
    predictions = np.where(flips, rng.integers(0, args.classes, (args.runs, args.predictions)), truth).astype(np.int16)
    weights = rng.standard_normal(args.weights, dtype=np.float32) + 0.01 * rng.standard_normal(
        (args.runs, args.weights), dtype=np.float32
    )
    accuracy = (predictions == truth).mean(axis=1)
    print(f"inputs: predictions {predictions.nbytes / 2**20:.0f} MiB, weights {weights.nbytes / 2**20:.0f} MiB")

    import scipy.stats  # noqa: F401 - imported before timing: a one-off cost of the process, not of the metrics

    tracemalloc.start()
    started = time.perf_counter()
    churn = pairwise_churn(predictions)
    churn_done = time.perf_counter()
    distance = pairwise_weight_distance(weights)
    distance_done = time.perf_counter()
    summaries = {"churn": off_diagonal_summary(churn), "weight_distance": off_diagonal_summary(distance)}
    band = band_from_values("test_accuracy", accuracy, 0.05, "synthetic")
    total = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(f"{args.runs} runs x {args.predictions} predictions x {args.weights} weights")
    print(
        f"pairwise churn {churn_done - started:.2f} s, pairwise weight distance {distance_done - churn_done:.2f} s, "
        f"summaries and band {total - (distance_done - started):.2f} s"
    )
    print(
        f"churn mean {summaries['churn']['mean']:.4f} max {summaries['churn']['max']:.4f}; "
        f"weight distance mean {summaries['weight_distance']['mean']:.4f}; accuracy band std {band.std:.5f}"
    )
    peak_gib = peak / 2**30
    process_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    ok = total < TIME_LIMIT_S and process_gib < MEMORY_LIMIT_GIB
    print(
        f"total {total:.2f} s (limit {TIME_LIMIT_S:.0f} s); peak allocated by the metrics {peak_gib:.2f} GiB, "
        f"peak resident memory of the whole process, inputs included, {process_gib:.2f} GiB "
        f"(limit {MEMORY_LIMIT_GIB:.0f} GiB): {'OK' if ok else 'OVER LIMIT'}"
    )


if __name__ == "__main__":
    main()
