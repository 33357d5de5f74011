"""The `tracking` commands over noise: `bands` (each metric's band over existing MLflow runs), `compare-groups`
(two groups of runs compared) and `plan` (the repeats a shift needs, from the project's calibration). Kept
apart from tracking/cli.py's parser; imports stay inside the commands so that `tracking --help` starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys

DEFAULT_METRICS = ["test_accuracy", "test_loss"]


def bands_command(args: argparse.Namespace) -> None:
    from tracking.noise.groups import bands
    from tracking.store.location import find_project, open_client

    client = open_client(find_project())
    result = bands(client, args.experiment, args.filter, args.metric or DEFAULT_METRICS, args.alpha)
    sys.stdout.write(json.dumps(result, indent=2, allow_nan=False) + "\n")


def compare_groups_command(args: argparse.Namespace) -> None:
    from tracking.noise.groups import compare_metric_groups, fetch_metric_values
    from tracking.noise.statistics import strict
    from tracking.store.location import find_project, open_client

    client = open_client(find_project())
    metrics = args.metric or DEFAULT_METRICS
    group_a = fetch_metric_values(client, args.experiment, args.a, metrics)
    group_b = fetch_metric_values(client, args.experiment, args.b, metrics)
    compared = compare_metric_groups(
        {metric: group_a[metric].values for metric in metrics},
        {metric: group_b[metric].values for metric in metrics},
        args.alpha,
    )
    result = {
        metric: {**row, "skipped_a": group_a[metric].skipped, "skipped_b": group_b[metric].skipped}
        for metric, row in compared.items()
    }
    if args.json:
        sys.stdout.write(json.dumps(strict(result), indent=2, allow_nan=False) + "\n")
        return
    lines = []
    for metric, row in result.items():
        lines.append(
            f"{metric}: A n={row['n_a']} mean={row['mean_a']:.6g} std={row['std_a']:.4g} | "
            f"B n={row['n_b']} mean={row['mean_b']:.6g} std={row['std_b']:.4g} | std ratio A/B {ratio_text(row)}"
        )
        lines.append(f"  {row['verdict']}")
        if row["brown_forsythe_power_at_ratio"] is not None:
            lines.append(
                f"  at n={row['n_a']} vs {row['n_b']}, Brown-Forsythe detects a true ratio of "
                f"{row['std_ratio_a_over_b']:.3g} {row['brown_forsythe_power_at_ratio']:.0%} of the time "
                "at the level Holm's first step tests (simulated, normal runs)"
            )
    sys.stdout.write("\n".join(lines) + "\n")


def ratio_text(row: dict) -> str:
    """The std ratio as compare-groups prints it, with why it has no interval."""
    from tracking.noise.groups import NO_RATIO_INTERVAL

    if row["std_ratio_a_over_b"] is None:
        return "undefined"
    return f"{row['std_ratio_a_over_b']:.3g} ({NO_RATIO_INTERVAL})"


def plan_command(args: argparse.Namespace) -> None:
    """The planning line from the project's calibration: its band's std and size, at alpha / (compare metrics)."""
    from tracking.config.params_file import load_params
    from tracking.errors import RunStateError
    from tracking.layout import NOISE_FILE
    from tracking.noise.power import plan
    from tracking.noise.record import NoiseRecord
    from tracking.store.location import project_root

    root = project_root()
    params = load_params(root / "params.yaml")
    noise = NoiseRecord.read(root / NOISE_FILE)
    band = noise.variant(args.variant).bands.get(args.metric)
    if band is None:
        raise RunStateError(
            f"{NOISE_FILE} has no {args.variant} band for {args.metric}",
            fix=f"name a metric it bands ({', '.join(noise.variant(args.variant).bands)})",
        )
    level = params.compare.alpha / len(params.compare_metrics())
    sys.stdout.write(plan(args.metric, args.shift, band["std"], band["n"], level, args.power).sentence() + "\n")
