"""DVC stage `compare`: judge the candidate run against the noise band that fits it.

Which band, and the test, are `tracking.noise.policy`'s (the policy `tracking diff` uses): a candidate whose
data or configuration differs from the baseline, or only its seeds, is judged against the band of reseeded
runs (`algo`, or `algo+impl` with kernel noise: did the change move the metric beyond chance?); one with the
same seeds and op determinism against `control`, where anything but bit-identical is drift. The metrics of
`compare.metrics` form the primary family, which decides the verdict (as `tracking diff` judges the same
metrics); churn, per-class and per-group checks are families of their own, reported beside it. Each family
is corrected with Holm-Bonferroni at `compare.alpha`, so a seed-only candidate is flagged at most about alpha
of the time. Each verdict says what it can see (the band std's interval, the shift detected with 80% power);
`compare.fail_on_drift` fails only on drift in the worse direction of a metric's mode (or a CONTROL candidate
that is not bit-identical). The candidate is one run: `judge_candidate` takes several, for when a stage
trains them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tracking import startup
from tracking.config.baseline import load_baseline
from tracking.config.params import CLASSIFICATION, Params, load_params
from tracking.config.project import (
    CALIBRATION_RUNS,
    COMPARE,
    COMPARE_METRICS,
    COMPARE_PLOTS,
    COMPARE_REPORT,
    EVAL_METRICS,
    NOISE_FILE,
    PREDICTIONS,
    PREPARED,
    RUN_FILE,
)
from tracking.data.dataset import read_manifest
from tracking.determinism.seeds import resolve_seeds
from tracking.errors import ParamsError, RunStateError
from tracking.names import BAND_VARIANT_TAG, REASON_TAG, SECONDARY_EXCEEDING_TAG, VERDICT_TAG
from tracking.noise.candidates import judge_churn, judge_values
from tracking.noise.policy import (
    CANNOT_JUDGE,
    CONFIG_SECTIONS,
    CONTROL,
    DETERMINISM,
    EXCEEDS,
    Differences,
    changed_keys,
    choose_band,
    direction,
    family_verdict,
    judge,
    judge_family,
)
from tracking.noise.statistics import CLASSIFICATION_CHURN, band_from_summary, pairwise_disagreement
from tracking.run.tracker import Tracker
from tracking.stage import run_main
from tracking.store.location import open_client, project_root, tracking_uri
from tracking.store.recorded import require_recorded_runs
from tracking.training.scoring import flat_metrics


def choose_variant(candidate: Params, baseline: Params, data_changed: bool, available: list[str]) -> tuple[str, str]:
    """The calibration variant the candidate is judged against, and why (the band policy's choice)."""
    base, ran = baseline.flat(), candidate.flat()
    causes = (("data content",) if data_changed else ()) + changed_keys(base, ran, CONFIG_SECTIONS)
    # The variants set op determinism themselves; the candidate's own setting is what counts.
    kernels = (() if candidate.determinism.op_determinism else ("op determinism off",)) + tuple(
        f"{key} differs" for key in changed_keys(base, ran, (DETERMINISM,)) if key != "determinism.op_determinism"
    )
    seeds = resolve_seeds(candidate.seeds) != resolve_seeds(baseline.seeds)
    choice = choose_band(Differences(causes, seeds, kernels), available)
    if choice.variant is None:
        raise RunStateError(f"the candidate cannot be judged: {choice.reason}, then re-run `dvc repro`")
    return choice.variant, choice.reason


def judge_candidate(
    params: Params,
    variant: dict[str, Any],
    band_values: dict[str, list[float]],
    candidates: list[dict[str, float]],
    churn_matrix: np.ndarray,
    weights_sha256: list[str],
    control: bool,
) -> dict[str, Any]:
    """Every check of the candidate runs' flat metrics (one dict per run), Holm-corrected within its family, and
    the verdict.

    `band_values` holds each banded metric's values over the band's runs, `churn_matrix` the pairwise churn of
    the candidate runs (first) and the band's runs. The primary family (the metrics of `compare.metrics`) decides
    the verdict; churn, per-class and per-group checks are families of their own, reported beside it. A CONTROL
    band's zero spread is a measurement (`exact`); any other band without spread cannot judge, nor can a metric
    that is not a number. A gap beyond noise but below `compare.min_effect` is within tolerance.
    """
    alpha = params.compare.alpha
    modes = {**params.compare_metrics(), "churn": "min"}
    source = f"calibration:{variant.get('name', 'band')}"
    families: dict[str, list] = {"primary": [], "churn": [], "class": [], "group": []}
    for metric in params.compare_metrics():
        values = [run[metric] for run in candidates]
        declared = params.compare.known_bands.get(metric)
        if declared:
            band = band_from_summary(
                metric, declared.mean, declared.std, declared.n, alpha, "declared in compare.known_bands"
            )
            families["primary"].append(judge(values[0], band))
        else:
            families["primary"].append(
                judge_values(metric, band_values[metric], values, alpha, source, modes[metric], control)
            )
    families["churn"].append(judge_churn(churn_matrix, len(candidates), alpha, exact=control))
    for name in candidates[0]:
        family = (
            "class" if name.startswith("test_accuracy_class_") else "group" if name.startswith("test_group_") else None
        )
        if family and name in band_values:
            values = [run.get(name, float("nan")) for run in candidates]
            families[family].append(judge_values(name, band_values[name], values, alpha, source, exact=control))
    judged = {
        family: judge_family(found, alpha, params.compare.min_effect if family == "primary" else None)
        for family, found in families.items()
    }
    rows = [
        {
            **found.as_dict(),
            "family": family,
            "mode": modes.get(found.metric),
            "direction": direction(found.delta, modes.get(found.metric)),
        }
        for family, found_all in judged.items()
        for found in found_all
    ]
    bit_identical = all(found in variant["weights_sha256"] for found in weights_sha256)
    verdict = EXCEEDS if control and not bit_identical else family_verdict(judged["primary"])
    primary = [row for row in rows if row["family"] == "primary"]
    worse = [row["metric"] for row in primary if row["verdict"] == EXCEEDS and row["direction"] == "worse"]
    better = [row["metric"] for row in primary if row["verdict"] == EXCEEDS and row["direction"] == "better"]
    unjudged = [found for found in judged["primary"] if found.verdict == CANNOT_JUDGE]
    return {
        "verdict": verdict,
        "checks": rows,
        "candidate_runs": len(candidates),
        "bit_identical_to_control": bit_identical if control else None,
        "worse": worse,
        "better": better,
        "secondary_exceeding": sum(row["verdict"] == EXCEEDS for row in rows if row["family"] != "primary"),
        "cannot_judge": [f"{found.metric}: {found.note}" for found in unjudged],
        "correction": (
            f"Holm-Bonferroni at alpha={alpha} within each family: primary ({len(families['primary'])} checks,"
            f" decides the verdict), churn ({len(families['churn'])}), per-class ({len(families['class'])}), "
            f"per-group ({len(families['group'])})"
        ),
        "candidate_churn": {
            "mean": float(churn_matrix[: len(candidates), len(candidates) :].mean()),
            "max": float(churn_matrix[: len(candidates), len(candidates) :].max()),
        },
    }


def fails(result: dict[str, Any], params: Params) -> bool:
    """Whether `compare.fail_on_drift` fails the stage: drift in the worse direction of a metric's mode (an
    improvement beyond noise is reported, not failed), or a CONTROL candidate whose weights are not
    bit-identical."""
    if not params.compare.fail_on_drift or result["verdict"] != EXCEEDS:
        return False
    return bool(result["worse"]) or result["bit_identical_to_control"] is False


def headline(result: dict[str, Any]) -> str:
    """What the stage prints before its reason: which way a drift goes, and under CONTROL whether bit-identical."""
    parts = []
    if result["bit_identical_to_control"] is not None:
        parts.append("bit-identical" if result["bit_identical_to_control"] else "weights differ from CONTROL's")
    if result["verdict"] == EXCEEDS:
        parts += [f"{way}: {', '.join(result[way])}" for way in ("worse", "better") if result[way]]
    return "".join(f"{part}; " for part in parts)


def main() -> None:
    params = load_params()
    root = project_root()
    baseline = load_baseline(params.calibration.baseline)
    for path in (NOISE_FILE, CALIBRATION_RUNS, EVAL_METRICS, PREDICTIONS, RUN_FILE):
        if not (root / path).is_file():
            raise RunStateError(f"{path} not found; run the pipeline up to compare first (`dvc repro`)")
    noise = at_alpha(json.loads((root / NOISE_FILE).read_text()), params.compare.alpha)
    calibration = np.load(root / CALIBRATION_RUNS)
    evaluation = json.loads((root / EVAL_METRICS).read_text())
    check_compare_metrics(params, flat_metrics(evaluation), noise)
    require_recorded_runs(open_client(root), root, tracking_uri(root))  # DVC does not see a deleted mlflow.db
    candidate_run = json.loads((root / RUN_FILE).read_text())
    manifest = read_manifest(root / PREPARED)
    data_changed = manifest["content_sha256"] != noise["data_sha256"]
    name, reason = choose_variant(params, baseline, data_changed, list(noise["variants"]))
    variant = noise["variants"][name]
    predictions = np.load(root / PREDICTIONS)
    chosen = calibration["predictions"][variant["runs"]]
    if chosen.shape[1] != len(predictions):
        raise RunStateError(
            "the candidate's test set differs in size from the calibration's; re-run `dvc repro` so both use data/prepared"
        )
    task, target_std = noise.get("task", CLASSIFICATION), noise.get("target_std")
    churn_matrix = pairwise_disagreement(np.concatenate([predictions[None], chosen]), task, target_std)
    result = judge_candidate(
        params,
        {**variant, "name": name},
        band_values(noise, name),
        [flat_metrics(evaluation)],
        churn_matrix,
        [candidate_run["weights_sha256"]],
        name == CONTROL,
    )
    result.update(
        {
            "band_variant": name,
            "reason": reason,
            "data_changed": data_changed,
            "calibration_runs": len(variant["runs"]),
            "reused_runs": sum(bool(noise["runs"][index].get("reused")) for index in variant["runs"]),
            "churn_measure": noise.get("churn_measure", CLASSIFICATION_CHURN),
        }
    )
    summary = compare_metrics(result)
    startup.mark(startup.JUDGED)  # compare opens its store after judging: the line tells the two apart
    with Tracker(params.mlflow.experiment, root, run_id=candidate_run["run_id"], stage=COMPARE) as tracker:
        write_outputs(root, result, summary, noise, calibration, predictions, evaluation)
        tracker.log_metrics(
            {key: value for key, value in summary.items() if isinstance(value, float) and np.isfinite(value)}
        )
        tracker.set_tags(
            {
                VERDICT_TAG: result["verdict"],
                BAND_VARIANT_TAG: name,
                REASON_TAG: reason,
                SECONDARY_EXCEEDING_TAG: result["secondary_exceeding"],
            }
        )
        tracker.log_json(result, "compare/compare.json")
        for path in (COMPARE_REPORT, *COMPARE_PLOTS.values()):
            tracker.log_artifact(root / path, "compare")
    unjudged = "".join(f"; {line}" for line in result["cannot_judge"])
    print(
        f"{result['verdict']}: {headline(result)}{reason}; judged against {name} ({len(variant['runs'])} runs){unjudged}. "
        f"Report: {COMPARE_REPORT}"
    )
    if fails(result, params):
        print("error: drift beyond noise in the worse direction and compare.fail_on_drift is true", file=sys.stderr)
        sys.exit(1)


def check_compare_metrics(params: Params, logged: dict[str, float], noise: dict[str, Any]) -> None:
    """Stop before any MLflow run when a metric of `compare.metrics` is not logged by evaluate or not banded."""
    for metric in params.compare_metrics():
        if metric not in logged:
            raise ParamsError(
                f"compare.metrics.{metric}: the evaluate stage does not log it; it logs "
                f"{', '.join(sorted(logged))}: name one of those in params.yaml"
            )
    for metric in params.compare.min_effect:
        if metric not in params.compare_metrics():
            raise ParamsError(
                f"compare.min_effect.{metric}: not a metric the compare stage judges "
                f"({', '.join(params.compare_metrics())}); name one of those or add it to compare.metrics"
            )
    for metric in params.compare_metrics():
        if metric not in params.compare.known_bands and not all(
            metric in variant["bands"] for variant in noise["variants"].values()
        ):
            raise RunStateError(
                f"compare.metrics.{metric}: the calibration in {NOISE_FILE} has no band for it; re-run the "
                "calibration (`dvc repro -f calibrate`) or declare one in compare.known_bands"
            )


def band_values(noise: dict[str, Any], variant: str) -> dict[str, list[float]]:
    """Each banded metric's values over the runs of `variant` in the calibration's record (NaN where one lacks it)."""
    runs = [noise["runs"][index] for index in noise["variants"][variant]["runs"]]
    return {
        metric: [run["metrics"].get(metric, float("nan")) for run in runs]
        for metric in noise["variants"][variant]["bands"]
    }


def at_alpha(noise: dict[str, Any], alpha: float) -> dict[str, Any]:
    """The calibration's bands with their intervals re-derived at `alpha` (they are stored at another)."""
    for variant in noise["variants"].values():
        variant["bands"] = {
            metric: band_from_summary(metric, band["mean"], band["std"], band["n"], alpha, band["source"]).as_dict()
            for metric, band in variant["bands"].items()
        }
    noise["alpha"] = alpha
    return noise


def compare_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The DVC metrics: the verdict, and z-score and delta of each main check, so `dvc exp show` lists them."""
    summary: dict[str, Any] = {
        "verdict": result["verdict"],
        "band_variant": result["band_variant"],
        "secondary_exceeding": result["secondary_exceeding"],
        "bit_identical_to_control": result["bit_identical_to_control"],
    }
    for row in result["checks"]:
        if row["family"] == "primary":
            if row["z"] is not None:
                summary[f"z_{row['metric']}"] = row["z"]
            summary[f"delta_{row['metric']}"] = row["delta"]
            if row["delta"] is None:
                summary[f"delta_{row['metric']}_note"] = row["note"]
    return summary


def write_outputs(
    root: Path, result: dict, summary: dict, noise: dict, calibration: Any, predictions: np.ndarray, evaluation: dict
) -> None:
    from tracking.noise.report import render_plots, render_report

    for path in (COMPARE_METRICS, COMPARE_REPORT):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / COMPARE_METRICS).write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    (root / COMPARE_REPORT).write_text(render_report(result))
    render_plots(
        {name: root / path for name, path in COMPARE_PLOTS.items()},
        noise,
        calibration,
        predictions,
        flat_metrics(evaluation),
        result,
    )


if __name__ == "__main__":
    run_main(main)
