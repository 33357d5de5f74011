"""DVC stage `compare`: judge the candidate run against the noise band that fits it.

Which band: a candidate whose configuration differs from the baseline is judged against the baseline's
natural noise (`algo+impl`: did the change move the metric beyond chance?); one that differs only in seeds
likewise; one with the same seeds and op determinism against `control`, where anything but bit-identical
is drift. The main metrics and churn form the primary family, which decides the verdict; per-class and
per-group checks are families of their own. Each family is corrected with Holm-Bonferroni at
`compare.alpha`, so a seed-only candidate is flagged at most about alpha of the time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.calibrate import NOISE_FILE, RUNS_FILE
from pipelines.evaluate import EVAL_METRICS, PREDICTIONS
from pipelines.scoring import flat_metrics
from pipelines.train import RUN_FILE
from tracking.baseline import load_baseline
from tracking.dataset import PREPARED, read_manifest
from tracking.errors import RunStateError
from tracking.noise import Band, band_from_summary, band_from_values, holm, judge, pairwise_churn
from tracking.params import Params, load_params
from tracking.seeds import resolve_seeds
from tracking.stage import run_main
from tracking.store import project_root
from tracking.tracker import Tracker

COMPARE_METRICS = Path("metrics/compare.json")
REPORT = Path("reports/compare.md")
PLOTS = {"accuracy": Path("reports/accuracy_spread.png"), "churn": Path("reports/churn_heatmap.png"),
         "classes": Path("reports/per_class_spread.png")}
_NOT_CONFIG = ("seeds.", "mlflow.", "calibration.", "compare.")


def choose_variant(candidate: Params, baseline: Params, data_changed: bool, available: list[str]) -> tuple[str, str]:
    """The calibration variant the candidate is judged against, and why."""
    base_flat = baseline.flat()
    changed = [key for key, value in candidate.flat().items() if not key.startswith(_NOT_CONFIG) and base_flat.get(key) != value]
    changed = (["data content"] if data_changed else []) + changed
    if changed:
        preference, reason = ["algo+impl", "algo", "impl"], f"configuration differs from the baseline ({', '.join(changed)})"
    elif resolve_seeds(candidate.seeds) != resolve_seeds(baseline.seeds):
        preference, reason = ["algo+impl", "algo", "impl"], "differs from the baseline only in seeds"
    elif candidate.determinism.op_determinism:
        preference, reason = ["control"], "same configuration and seeds with op determinism: anything but bit-identical is drift"
    else:
        preference, reason = ["impl", "algo+impl"], "same configuration and seeds, non-deterministic kernels"
    for variant in preference:
        if variant in available:
            return variant, reason
    raise RunStateError(f"calibration has no variant for a candidate that {reason.split(':')[0]}; "
                        f"add one of {', '.join(preference)} to calibration.variants and re-run `dvc repro`")


def judge_candidate(params: Params, variant: dict[str, Any], metrics: dict[str, float], churn_values: np.ndarray,
                    baseline_churn: np.ndarray, weights_sha256: str, control: bool) -> dict[str, Any]:
    """Every check of the candidate's flat `metrics`, Holm-corrected within its family, and the verdict.

    The primary family (the main metrics and churn) decides the verdict; per-class and per-group checks are
    families of their own, reported beside it.
    """
    alpha = params.compare.alpha
    families: dict[str, list] = {"primary": [], "class": [], "group": []}
    for metric in params.compare.metrics:
        declared = params.compare.known_bands.get(metric)
        band = (band_from_summary(metric, declared.mean, declared.std, declared.n, alpha, "declared in compare.known_bands")
                if declared else Band(**variant["bands"][metric]))
        families["primary"].append(judge(metrics[metric], band))
    families["primary"].append(judge(float(churn_values.mean()), band_from_values("churn", baseline_churn, alpha, "baseline pairwise churn")))
    for name, value in metrics.items():
        family = "class" if name.startswith("test_accuracy_class_") else "group" if name.startswith("test_group_") else None
        if family and name in variant["bands"] and np.isfinite(value):
            families[family].append(judge(value, Band(**variant["bands"][name])))
    rows = []
    for family, verdicts in families.items():
        for verdict, reject in zip(verdicts, holm([v.p_value for v in verdicts], alpha)):
            rows.append({**verdict.as_dict(), "family": family, "verdict": "exceeds_noise" if reject else "within_noise"})
    bit_identical = weights_sha256 in variant["weights_sha256"]
    drift = any(row["verdict"] == "exceeds_noise" for row in rows if row["family"] == "primary")
    exceeds = drift or (control and not bit_identical)
    return {"verdict": "exceeds_noise" if exceeds else "within_noise", "checks": rows,
            "bit_identical_to_control": bit_identical if control else None,
            "secondary_exceeding": sum(row["verdict"] == "exceeds_noise" for row in rows if row["family"] != "primary"),
            "correction": (f"Holm-Bonferroni at alpha={alpha} within each family: primary ({len(families['primary'])} checks,"
                           f" decides the verdict), per-class ({len(families['class'])}), per-group ({len(families['group'])})"),
            "candidate_churn": {"mean": float(churn_values.mean()), "max": float(churn_values.max())}}


def main() -> None:
    params = load_params()
    root = project_root()
    baseline = load_baseline(params.calibration.baseline)
    for path in (NOISE_FILE, RUNS_FILE, EVAL_METRICS, PREDICTIONS, RUN_FILE):
        if not (root / path).is_file():
            raise RunStateError(f"{path} not found; run the pipeline up to compare first (`dvc repro`)")
    noise = at_alpha(json.loads((root / NOISE_FILE).read_text()), params.compare.alpha)
    calibration = np.load(root / RUNS_FILE)
    evaluation = json.loads((root / EVAL_METRICS).read_text())
    candidate_run = json.loads((root / RUN_FILE).read_text())
    manifest = read_manifest(root / PREPARED)
    data_changed = manifest["content_sha256"] != noise["data_sha256"]
    name, reason = choose_variant(params, baseline, data_changed, list(noise["variants"]))
    variant = noise["variants"][name]
    predictions = np.load(root / PREDICTIONS)
    chosen = calibration["predictions"][variant["runs"]]
    if chosen.shape[1] != len(predictions):
        raise RunStateError("the candidate's test set differs in size from the calibration's; re-run `dvc repro` so both use data/prepared")
    churn_values = pairwise_churn(np.vstack([predictions[None, :], chosen]))[0, 1:]
    baseline_pairs = pairwise_churn(chosen)[np.triu_indices(len(chosen), k=1)]
    result = judge_candidate(params, variant, flat_metrics(evaluation), churn_values, baseline_pairs, candidate_run["weights_sha256"], name == "control")
    result.update({"band_variant": name, "reason": reason, "data_changed": data_changed, "calibration_runs": len(variant["runs"])})
    summary = compare_metrics(result)
    with Tracker(params.mlflow.experiment, root, run_id=candidate_run["run_id"], stage="compare") as tracker:
        write_outputs(root, result, summary, noise, calibration, predictions, evaluation)
        tracker.log_metrics({key: value for key, value in summary.items() if isinstance(value, float) and np.isfinite(value)})
        tracker.set_tags({"noise.verdict": result["verdict"], "noise.band_variant": name, "noise.reason": reason,
                          "noise.secondary_exceeding": result["secondary_exceeding"]})
        tracker.log_json(result, "compare/compare.json")
        for path in (REPORT, *PLOTS.values()):
            tracker.log_artifact(root / path, "compare")
    print(f"{result['verdict']}: {reason}; judged against {name} ({len(variant['runs'])} runs). Report: {REPORT}")
    if result["verdict"] == "exceeds_noise" and params.compare.fail_on_drift:
        print("error: drift beyond noise and compare.fail_on_drift is true", file=sys.stderr)
        sys.exit(1)


def at_alpha(noise: dict[str, Any], alpha: float) -> dict[str, Any]:
    """The calibration's bands with their intervals re-derived at `alpha` (they are stored at another)."""
    for variant in noise["variants"].values():
        variant["bands"] = {metric: band_from_summary(metric, band["mean"], band["std"], band["n"], alpha, band["source"]).as_dict()
                            for metric, band in variant["bands"].items()}
    noise["alpha"] = alpha
    return noise


def compare_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The DVC metrics: the verdict, and z-score and delta of each main check, so `dvc exp show` lists them."""
    summary: dict[str, Any] = {"verdict": result["verdict"], "band_variant": result["band_variant"],
                               "secondary_exceeding": result["secondary_exceeding"]}
    for row in result["checks"]:
        if row["family"] == "primary":
            summary[f"z_{row['metric']}"] = float(row["z"])
            summary[f"delta_{row['metric']}"] = float(row["delta"])
    return summary


def write_outputs(root: Path, result: dict, summary: dict, noise: dict, calibration: Any, predictions: np.ndarray,
                  evaluation: dict) -> None:
    from pipelines.compare_report import render_plots, render_report

    for path in (COMPARE_METRICS, REPORT):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / COMPARE_METRICS).write_text(json.dumps(summary, indent=2) + "\n")
    (root / REPORT).write_text(render_report(result))
    render_plots({name: root / path for name, path in PLOTS.items()}, noise, calibration, predictions, evaluation, result)


if __name__ == "__main__":
    run_main(main)
