"""DVC stage `compare`: judge the candidate run against the noise band that fits it.

Which band, and the test, are `tracking.noise.policy`'s (the policy `tracking diff` uses): a candidate whose
data or configuration differs from the baseline, or only its seeds, is judged against the band of reseeded
runs (`algo`, or `algo+impl` with kernel noise: did the change move the metric beyond chance?); one with the
same seeds and op determinism against `control`, where anything but bit-identical is drift. The metrics of
`compare.metrics` form the primary family, which decides the verdict (as `tracking diff` judges the same
metrics); churn, per-class and per-group checks are families of their own, reported beside it. Each family
is corrected with Holm-Bonferroni at `compare.alpha`, so a seed-only candidate is flagged at most about alpha
of the time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.scoring import flat_metrics
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
from tracking.noise.policy import (
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
from tracking.noise.statistics import (
    CLASSIFICATION_CHURN,
    Band,
    band_from_summary,
    band_from_values,
    pairwise_disagreement,
)
from tracking.run.tracker import Tracker
from tracking.stage import run_main
from tracking.store.location import open_client, project_root, tracking_uri
from tracking.store.recorded import require_recorded_runs


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
    metrics: dict[str, float],
    churn_values: np.ndarray,
    baseline_churn: np.ndarray,
    weights_sha256: str,
    control: bool,
) -> dict[str, Any]:
    """Every check of the candidate's flat `metrics`, Holm-corrected within its family, and the verdict.

    The primary family (the metrics of `compare.metrics`) decides the verdict; churn, per-class and per-group
    checks are families of their own, reported beside it. A CONTROL band's zero spread is a measurement
    (`exact`); any other band without spread cannot judge.
    """
    alpha = params.compare.alpha
    families: dict[str, list] = {"primary": [], "churn": [], "class": [], "group": []}
    for metric in params.compare_metrics():
        declared = params.compare.known_bands.get(metric)
        if declared:
            band = band_from_summary(
                metric, declared.mean, declared.std, declared.n, alpha, "declared in compare.known_bands"
            )
        else:
            band = Band(**variant["bands"][metric])
        families["primary"].append(judge(metrics[metric], band, exact=control and not declared))
    families["churn"].append(
        judge(
            float(churn_values.mean()),
            band_from_values("churn", baseline_churn, alpha, "baseline pairwise churn"),
            exact=control,
        )
    )
    modes = {**params.compare_metrics(), "churn": "min"}
    for name, value in metrics.items():
        family = (
            "class" if name.startswith("test_accuracy_class_") else "group" if name.startswith("test_group_") else None
        )
        if family and name in variant["bands"] and np.isfinite(value):
            families[family].append(judge(value, Band(**variant["bands"][name]), exact=control))
    judged = {family: judge_family(found, alpha) for family, found in families.items()}
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
    bit_identical = weights_sha256 in variant["weights_sha256"]
    verdict = EXCEEDS if control and not bit_identical else family_verdict(judged["primary"])
    unjudged = [found for found in judged["primary"] if found.z is None]
    return {
        "verdict": verdict,
        "checks": rows,
        "bit_identical_to_control": bit_identical if control else None,
        "secondary_exceeding": sum(row["verdict"] == EXCEEDS for row in rows if row["family"] != "primary"),
        "cannot_judge": [f"{found.metric}: {found.note}" for found in unjudged],
        "correction": (
            f"Holm-Bonferroni at alpha={alpha} within each family: primary ({len(families['primary'])} checks,"
            f" decides the verdict), churn ({len(families['churn'])}), per-class ({len(families['class'])}), "
            f"per-group ({len(families['group'])})"
        ),
        "candidate_churn": {"mean": float(churn_values.mean()), "max": float(churn_values.max())},
    }


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
    churn_values = pairwise_disagreement(np.concatenate([predictions[None], chosen]), task, target_std)[0, 1:]
    baseline_pairs = pairwise_disagreement(chosen, task, target_std)[np.triu_indices(len(chosen), k=1)]
    result = judge_candidate(
        params,
        variant,
        flat_metrics(evaluation),
        churn_values,
        baseline_pairs,
        candidate_run["weights_sha256"],
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
        f"{result['verdict']}: {reason}; judged against {name} ({len(variant['runs'])} runs){unjudged}. Report: {COMPARE_REPORT}"
    )
    if result["verdict"] == EXCEEDS and params.compare.fail_on_drift:
        print("error: drift beyond noise and compare.fail_on_drift is true", file=sys.stderr)
        sys.exit(1)


def check_compare_metrics(params: Params, logged: dict[str, float], noise: dict[str, Any]) -> None:
    """Stop before any MLflow run when a metric of `compare.metrics` is not logged by evaluate or not banded."""
    for metric in params.compare_metrics():
        if metric not in logged:
            raise ParamsError(
                f"compare.metrics.{metric}: the evaluate stage does not log it; it logs "
                f"{', '.join(sorted(logged))}: name one of those in params.yaml"
            )
    for metric in params.compare_metrics():
        if metric not in params.compare.known_bands and not all(
            metric in variant["bands"] for variant in noise["variants"].values()
        ):
            raise RunStateError(
                f"compare.metrics.{metric}: the calibration in {NOISE_FILE} has no band for it; re-run the "
                "calibration (`dvc repro -f calibrate`) or declare one in compare.known_bands"
            )


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
    }
    for row in result["checks"]:
        if row["family"] == "primary":
            if row["z"] is not None:
                summary[f"z_{row['metric']}"] = float(row["z"])
            summary[f"delta_{row['metric']}"] = float(row["delta"])
    return summary


def write_outputs(
    root: Path, result: dict, summary: dict, noise: dict, calibration: Any, predictions: np.ndarray, evaluation: dict
) -> None:
    from tracking.noise.report import render_plots, render_report

    for path in (COMPARE_METRICS, COMPARE_REPORT):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / COMPARE_METRICS).write_text(json.dumps(summary, indent=2) + "\n")
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
