"""The verdict on a candidate: the band that fits it, every check Holm-corrected within its family, and what fails
`compare.fail_on_drift`. The compare stage calls `judge_calibrated`, and so must anything else that judges a
candidate against a calibration: one code path for every verdict.

Which band, and the test, are `tracking.noise.policy`'s (the policy `tracking diff` uses): a candidate whose data or
configuration differs from the baseline, or only its seeds, is judged against the band of reseeded runs (`algo`, or
`algo+impl` with kernel noise: did the change move the metric beyond chance?); one with the same seeds and op
determinism against `control`, where anything but bit-identical is drift. The metrics of `compare.metrics` form the
primary family, which decides the verdict; churn, per-class and per-group checks are families of their own, reported
beside it. Each verdict says what it can see (the band std's interval, the shift detected with 80% power).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracking.config.params import CompareParams, Params
from tracking.determinism.seeds import resolve_seeds
from tracking.errors import ParamsError, RunStateError
from tracking.layout import NOISE_FILE
from tracking.names import CANDIDATES_GAP_PREFIX, CANDIDATES_T_PREFIX
from tracking.noise.candidates import judge_churn, judge_values
from tracking.noise.judging import judge
from tracking.noise.metric_family import judge_family
from tracking.noise.policy import (
    CONFIG_SECTIONS,
    CONTROL,
    DETERMINISM,
    EXCEEDS,
    INCONCLUSIVE,
    Differences,
    changed_keys,
    choose_band,
    direction,
)
from tracking.noise.record import NoiseRecord
from tracking.noise.statistics import band_from_summary, pairwise_disagreement


def judge_calibrated(
    params: Params,
    baseline: Params,
    noise: NoiseRecord,
    data_sha256: str,
    candidates: list[dict[str, float]],
    predictions: np.ndarray,
    weights_sha256: list[str],
    calibration_predictions: np.ndarray,
) -> dict[str, Any]:
    """The verdict on the candidate runs (`candidates`: each run's flat test metrics; `predictions`: their test
    predictions stacked, one row per run; `weights_sha256`: their weight hashes), trained with `params` on data of
    content `data_sha256`, against the calibration `noise` of `baseline` (`calibration_predictions`: its runs'
    stacked predictions). The bands are taken at `compare.alpha`."""
    noise = noise.at_alpha(params.compare.alpha)
    data_changed = data_sha256 != noise.data_sha256
    name, reason = choose_variant(params, baseline, data_changed, list(noise.variants))
    variant = noise.variant(name)
    chosen = calibration_predictions[variant.runs]
    if chosen.shape[1:] != predictions.shape[1:]:
        raise RunStateError(
            "the candidate's test set differs in size from the calibration's; re-run `dvc repro` so both use data/prepared"
        )
    churn_matrix = pairwise_disagreement(np.concatenate([predictions, chosen]), noise.task, noise.target_std)
    result = judge_candidate(
        params,
        {"name": name, "weights_sha256": variant.weights_sha256},
        noise.band_values(name),
        candidates,
        churn_matrix,
        weights_sha256,
        name == CONTROL,
    )
    return {
        **result,
        "band_variant": name,
        "reason": reason,
        "data_changed": data_changed,
        "calibration_runs": len(variant.runs),
        "churn_measure": noise.churn_measure,
    }


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
    band's zero spread is a measurement (`exact`); any other band without spread is inconclusive, as is a metric
    that is not a number. A gap beyond noise whose interval lies inside ± `compare.min_effect` is within tolerance.
    """
    alpha = params.compare.alpha
    modes = {**params.compare_metrics(), "churn": "min"}
    source = f"calibration:{variant.get('name', 'band')}"
    bit_identical = all(found in variant["weights_sha256"] for found in weights_sha256)
    primary = judge(
        *primary_inputs(params, band_values, candidates),
        modes=params.compare_metrics(),
        alpha=alpha,
        min_effect=params.compare.min_effect,
        control=control,
        weights_identical=bit_identical,
        source=source,
    )
    families: dict[str, list] = {"churn": [judge_churn(churn_matrix, len(candidates), alpha, exact=control)]}
    families |= {"class": [], "group": []}
    for name in candidates[0]:
        family = (
            "class" if name.startswith("test_accuracy_class_") else "group" if name.startswith("test_group_") else None
        )
        if family and name in band_values:
            values = [run.get(name, float("nan")) for run in candidates]
            families[family].append(judge_values(name, band_values[name], values, alpha, source, exact=control))
    judged = {"primary": list(primary.checks)} | {
        # Held to the default smallest shifts as the verdict's metrics are, so their words mean what the verdict's
        # do: a 0.978 -> 0.593 drop of one class was `within_noise` for missing Holm's level (issue 50).
        family: judge_family(found, alpha, {})
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
    return {
        "verdict": primary.verdict,
        "checks": rows,
        "candidate_runs": len(candidates),
        "bit_identical_to_control": bit_identical if control else None,
        "worse": list(primary.worse),
        "better": list(primary.better),
        "secondary_exceeding": sum(row["verdict"] == EXCEEDS for row in rows if row["family"] != "primary"),
        "inconclusive": list(primary.inconclusive),
        "correction": (
            f"Holm-Bonferroni at alpha={alpha} within each family: primary ({len(primary.checks)} checks,"
            f" decides the verdict), churn ({len(families['churn'])}), per-class ({len(families['class'])}), "
            f"per-group ({len(families['group'])})"
        ),
        "candidate_churn": {
            "mean": float(churn_matrix[: len(candidates), len(candidates) :].mean()),
            "max": float(churn_matrix[: len(candidates), len(candidates) :].max()),
        },
    }


def primary_inputs(
    params: Params, band_values: dict[str, list[float]], candidates: list[dict[str, float]]
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """The primary family as `tracking.judge` and the sequential design take it: each metric of `compare.metrics`
    with its band (declared in `compare.known_bands`, else its values over the band's runs), and its values in the
    candidate runs (each run's flat metrics)."""
    alpha = params.compare.alpha
    declared = {
        metric: band_from_summary(metric, known.mean, known.std, known.n, alpha, "declared in compare.known_bands")
        for metric, known in params.compare.known_bands.items()
        if metric in params.compare_metrics()
    }
    return (
        {metric: declared.get(metric, band_values.get(metric, [])) for metric in params.compare_metrics()},
        {metric: [run[metric] for run in candidates] for metric in params.compare_metrics()},
    )


def fails(result: dict[str, Any], compare: CompareParams) -> bool:
    """Whether `compare.fail_on_drift` fails the stage: drift in the worse direction of a metric's mode (an
    improvement beyond noise is reported, not failed), or a CONTROL candidate whose weights are not
    bit-identical."""
    if not compare.fail_on_drift or result["verdict"] != EXCEEDS:
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


def check_compare_metrics(params: Params, logged: dict[str, float], noise: NoiseRecord) -> None:
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
        if metric not in params.compare.known_bands and not noise.bands_everywhere(metric):
            raise RunStateError(
                f"compare.metrics.{metric}: the calibration in {NOISE_FILE} has no band for it; re-run the "
                "calibration (`dvc repro -f calibrate`) or declare one in compare.known_bands"
            )


def verdict_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The DVC metrics: the verdict, and of each main check the candidate runs' mean gap to the band's mean and the
    test's t statistic (CANDIDATES_GAP_PREFIX, CANDIDATES_T_PREFIX), so `dvc exp show` lists them."""
    summary: dict[str, Any] = {
        "verdict": result["verdict"],
        "band_variant": result["band_variant"],
        "secondary_exceeding": result["secondary_exceeding"],
        "bit_identical_to_control": result["bit_identical_to_control"],
        "candidate_runs": result["candidate_runs"],
    }
    if "sequential" in result:
        summary["candidate_runs_cap"] = result["sequential"]["cap"]
        summary["candidate_runs_stopped"] = result["sequential"]["stopped"]
    for row in result["checks"]:
        if row["family"] == "primary":
            if row["z"] is not None:
                summary[f"{CANDIDATES_T_PREFIX}{row['metric']}"] = row["z"]
            summary[f"{CANDIDATES_GAP_PREFIX}{row['metric']}"] = row["delta"]
            if row["delta"] is None:
                summary[f"{CANDIDATES_GAP_PREFIX}{row['metric']}_note"] = row["note"]
            elif row["verdict"] == INCONCLUSIVE:
                summary[f"inconclusive_{row['metric']}"] = row["note"]
    return summary
