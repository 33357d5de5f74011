"""The compare stage: which band a candidate is judged against, and the verdict end to end with real DVC."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import client_for, run, runs_of, write_params

from tracking.config.params import Params
from tracking.errors import RunStateError
from tracking.noise.verdict import choose_variant, verdict_metrics

ALL = ["algo+impl", "algo", "impl", "control"]


def test_choose_variant():
    baseline = Params()
    assert choose_variant(Params(), baseline, False, ALL)[0] == "control"
    seeds_only = Params.model_validate({"seeds": {"dropout": 5}})
    assert choose_variant(seeds_only, baseline, False, ALL) == ("algo", "the runs differ in seeds")
    changed = Params.model_validate({"train": {"learning_rate": 0.01}, "seeds": {"base": 1}})
    variant, reason = choose_variant(changed, baseline, False, ALL)
    assert variant == "algo" and reason.startswith("train.learning_rate changed") and "seeds" not in reason
    assert "data content" in choose_variant(Params(), baseline, True, ALL)[1]
    nondeterministic = Params.model_validate({"determinism": {"op_determinism": False}})
    assert choose_variant(nondeterministic, baseline, False, ALL) == (
        "impl",
        "same seeds and configuration; kernel numerics may differ (op determinism off)",
    )
    nondeterministic_seeds = Params.model_validate({"determinism": {"op_determinism": False}, "seeds": {"dropout": 5}})
    assert choose_variant(nondeterministic_seeds, baseline, False, ALL)[0] == "algo+impl"
    assert choose_variant(seeds_only, baseline, False, ["algo+impl"])[0] == "algo+impl"
    assert choose_variant(Params(), baseline, False, ["algo"])[0] == "algo"
    with pytest.raises(RunStateError, match=r"add one of algo, algo\+impl to calibration\.variants"):
        choose_variant(seeds_only, baseline, False, ["impl", "control"])


@pytest.mark.slow
def test_calibrate_then_compare_and_edit_without_recalibrating(project: Path):
    first = run(["dvc", "repro"], project)
    assert "calibrated 12 runs over 4 variant(s)" in first.stdout
    (compare_start,) = [line for line in first.stderr.splitlines() if line.startswith("compare: started in ")]
    assert re.search(r", judging [0-9.]+ s, MLflow store [0-9.]+ s\)$", compare_start), compare_start  # apart
    noise = json.loads((project / "calibration/noise.json").read_text())
    assert noise["variants"]["control"]["bit_identical"] is True
    assert (
        noise["variants"]["impl"]["impl_noise"] == "simulated" and noise["variants"]["impl"]["bit_identical"] is False
    )
    compare = json.loads((project / "metrics/compare.json").read_text())
    assert compare["band_variant"] == "control" and compare["verdict"] == "within_noise"

    client = client_for(project)
    runs = runs_of(project)
    parent = next(r for r in runs if r.data.tags.get("noise.role") == "calibration")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["noise.variant"] for r in children) == sorted(ALL * 3)
    assert all(r.info.status == "FINISHED" for r in runs)
    candidate = next(r for r in runs if r.data.tags.get("pipeline.stage") == "compare")
    assert (
        candidate.data.tags["noise.verdict"] == "within_noise"
        and "candidates_t_test_accuracy" in candidate.data.metrics
    )
    assert {a.path for a in client.list_artifacts(candidate.info.run_id, "compare")} >= {
        "compare/compare.md",
        "compare/accuracy_spread.png",
        "compare/churn_heatmap.png",
        "compare/per_class_spread.png",
    }

    write_params(project, train={"learning_rate": 0.01})
    second = run(["dvc", "repro"], project)
    assert "Stage 'calibrate' didn't change, skipping" in second.stdout
    assert "Running stage 'train'" in second.stdout and "Running stage 'compare'" in second.stdout
    compare = json.loads((project / "metrics/compare.json").read_text())
    assert compare["band_variant"] == "algo"  # op determinism on: a changed config varies as a reseeded run
    report = (project / "reports/compare.md").read_text()
    assert "train.learning_rate" in report and "Holm-Bonferroni" in report and "| primary | test_accuracy |" in report

    write_params(
        project,
        compare={"fail_on_drift": True, "known_bands": {"test_accuracy": {"mean": 0.999, "std": 0.0001, "n": 10}}},
    )
    gated = run(["dvc", "repro"], project, check=False)
    assert gated.returncode != 0 and "compare.fail_on_drift is true" in gated.stderr
    assert json.loads((project / "metrics/compare.json").read_text())["verdict"] == "exceeds_noise"


def test_group_scores_accuracy_fpr_fnr_by_hand():
    from tracking.training.scoring import scores
    from tracking.training.task_scores import flat_metrics

    y = np.array([0, 1, 1, 0, 1, 0])
    probabilities = np.eye(2)[[0, 1, 0, 1, 1, 0]]
    groups = np.array(["a", "a", "a", "b", "b", "b"])
    result = scores(y, probabilities, "classification", 2, groups)
    assert result["per_group"]["a"] == {"accuracy": pytest.approx(2 / 3), "fpr": 0.0, "fnr": 0.5}
    assert result["per_group"]["b"] == {"accuracy": pytest.approx(2 / 3), "fpr": 0.5, "fnr": 0.0}
    flat = flat_metrics(result)
    assert flat["test_group_b_fpr"] == 0.5 and flat["test_accuracy_class_1"] == pytest.approx(2 / 3)


def _variant(values: dict[str, list[float]]) -> dict:
    from tracking.noise.statistics import band_from_values

    return {"bands": {name: band_from_values(name, v, 0.05, "test").as_dict() for name, v in values.items()},
            "weights_sha256": ["abc"]}  # fmt: skip


def _churn(runs: int, candidate: float = 0.025, seed: int = 0) -> np.ndarray:
    """A pairwise churn matrix of one candidate (first) and `runs` band runs: band pairs near 0.025."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.uniform(0.02, 0.03, (runs + 1, runs + 1)), 1)
    matrix = upper + upper.T
    matrix[0, 1:] = matrix[1:, 0] = candidate
    return matrix


def test_judge_candidate_families():
    from tracking.noise.verdict import judge_candidate

    values = {
        "test_accuracy": [0.90, 0.91, 0.92, 0.91],
        "test_loss": [0.30, 0.31, 0.29, 0.30],
        "test_group_a_accuracy": [0.80, 0.82, 0.81, 0.80],
    }
    variant = _variant(values)
    inside = {"test_accuracy": 0.91, "test_loss": 0.30, "test_group_a_accuracy": 0.81}
    churn = _churn(4)
    blind = judge_candidate(Params(), variant, values, [inside], churn, ["other"], control=False)
    assert blind["verdict"] == "inconclusive"  # 4 runs and 1 do not see their default 4 stds (0.03266)
    assert blind["inconclusive"][0].startswith(
        "test_accuracy: within noise, but blind to a shift of 0.03266 (the default"
    )
    summary = verdict_metrics({**blind, "band_variant": "algo"})
    assert summary["verdict"] == "inconclusive" and "more candidate runs" in summary["inconclusive_test_accuracy"]
    wide = Params.model_validate({"compare": {"min_effect": {"test_accuracy": 0.1, "test_loss": 0.1}}})
    result = judge_candidate(wide, variant, values, [inside], churn, ["other"], control=False)
    assert result["verdict"] == "within_noise"
    assert [row["family"] for row in result["checks"]] == ["primary", "primary", "churn", "group"]
    assert "primary (2 checks, decides the verdict)" in result["correction"]
    group_drop = judge_candidate(
        wide, variant, values, [{**inside, "test_group_a_accuracy": 0.50}], churn, ["x"], control=False
    )
    assert group_drop["verdict"] == "within_noise" and group_drop["secondary_exceeding"] == 1
    assert group_drop["checks"][-1]["verdict"] == "exceeds_noise"
    accuracy_drop = judge_candidate(
        Params(), variant, values, [{**inside, "test_accuracy": 0.80}], churn, ["x"], control=False
    )
    assert accuracy_drop["verdict"] == "exceeds_noise" and accuracy_drop["checks"][0]["verdict"] == "exceeds_noise"
    control = judge_candidate(Params(), variant, values, [inside], churn, ["other"], control=True)
    assert control["verdict"] == "exceeds_noise" and control["bit_identical_to_control"] is False


def test_judge_candidate_on_a_tied_band_cannot_judge():
    from tracking.noise.verdict import judge_candidate

    values = {"test_accuracy": [356 / 360] * 3, "test_loss": [0.30, 0.31, 0.29]}
    variant = _variant(values)
    variant["bands"]["test_accuracy"]["source"] = "calibration:algo+impl"
    result = judge_candidate(
        Params(), {**variant, "name": "algo+impl"}, values, [{"test_accuracy": 352 / 360, "test_loss": 0.30}],
        _churn(3), ["x"], control=False,
    )  # fmt: skip
    assert result["verdict"] == "inconclusive" and result["checks"][0]["z"] is None
    assert result["inconclusive"][0] == (
        "test_accuracy: 3 identical values (0.988889) in calibration:algo+impl: no measured spread; "
        "raise calibration.repeats"
    )
    from tracking.noise.report import render_report

    summary = verdict_metrics({**result, "band_variant": "algo+impl"})
    assert "candidates_t_test_accuracy" not in summary
    assert summary["candidates_mean_gap_test_accuracy"] == pytest.approx(-4 / 360)
    report = render_report({**result, "band_variant": "algo+impl", "reason": "r", "calibration_runs": 3})
    assert "Inconclusive: test_accuracy" in report and "| n/a | n/a | inconclusive |" in report
    assert "- test_accuracy: the band has no spread (3 identical values (0.988889)" in report and "()" not in report


def test_report_names_the_band_s_run_count_and_bounds_a_capped_metric_s_interval():
    from tracking.noise.report import render_report
    from tracking.noise.verdict import judge_candidate

    metrics = Params().compare_metrics()
    values = {name: [0.90, 0.91, 0.92] for name in metrics}
    candidate = dict.fromkeys(metrics, 0.91)
    result = {
        **judge_candidate(Params(), _variant(values), values, [candidate], _churn(3), ["x"], False),
        "band_variant": "algo",
        "reason": "r",
        "calibration_runs": 3,
    }
    assert "(3 calibration runs): r." in render_report(result)  # the same whether its runs were reused or not
    near = {"test_accuracy": [0.99, 1.0, 0.995], "test_loss": [0.90, 0.91, 0.92]}
    ceiling = judge_candidate(Params(), _variant(near), near, [candidate], _churn(3), ["x"], False)
    report = render_report({**ceiling, "band_variant": "algo", "reason": "r", "calibration_runs": 3})
    assert "| primary | test_accuracy |" in report and ", 1.0000] |" in report and "1.01" not in report
    assert "beats a band run with probability" in report and "(bootstrap 95% interval" not in report  # issue 34


def test_fail_on_drift_fails_only_on_the_worse_direction_and_control_json_is_strict():
    """Issue 26: a significant improvement failed CI; CONTROL wrote Infinity and p = 0 to metrics/compare.json."""
    from tracking.noise.verdict import fails, headline, judge_candidate, verdict_metrics

    values = {"test_accuracy": [0.90, 0.91, 0.92, 0.91], "test_loss": [0.30, 0.31, 0.29, 0.30]}
    gate = Params.model_validate({"compare": {"fail_on_drift": True}})
    better = judge_candidate(
        gate, _variant(values), values, [{"test_accuracy": 0.99, "test_loss": 0.30}], _churn(4), ["x"], False
    )
    assert better["verdict"] == "exceeds_noise" and better["better"] == ["test_accuracy"] and not better["worse"]
    assert not fails(better, gate.compare) and "better: test_accuracy" in headline(better)
    worse = judge_candidate(
        gate, _variant(values), values, [{"test_accuracy": 0.80, "test_loss": 0.30}], _churn(4), ["x"], False
    )
    assert worse["worse"] == ["test_accuracy"] and fails(worse, gate.compare) and not fails(worse, Params().compare)
    tied = {name: [found[0]] * 4 for name, found in values.items()}
    control = judge_candidate(
        gate, _variant(tied), tied, [{"test_accuracy": 0.91, "test_loss": 0.30}], _churn(4, 0.0), ["abc"], True
    )
    summary = verdict_metrics({**control, "band_variant": "control"})
    assert control["verdict"] == "exceeds_noise" and summary["bit_identical_to_control"] is True
    assert json.dumps(summary, allow_nan=False) and "candidates_t_test_accuracy" not in summary
    assert headline(control).startswith("bit-identical")
    row = next(row for row in control["checks"] if row["metric"] == "test_accuracy")
    assert row["p_value"] is None and "CONTROL" in row["note"]


EMPTY = {"baseline": {}, "data_sha256": "d", "alpha": 0.05, "repeats": 3, "runs": [], "variants": {}}


def test_min_effect_must_name_a_judged_metric():
    with pytest.raises(Exception, match="min_effect"):
        Params.model_validate({"compare": {"min_effect": {"test_accuracy": -1}}})
    from tracking.errors import ParamsError
    from tracking.noise.record import NoiseRecord
    from tracking.noise.verdict import check_compare_metrics

    params = Params.model_validate({"compare": {"min_effect": {"val_accuracy": 0.01}}})
    with pytest.raises(ParamsError, match=r"compare\.min_effect\.val_accuracy: not a metric the compare stage judges"):
        check_compare_metrics(params, {"test_accuracy": 1.0, "test_loss": 0.1}, NoiseRecord.from_dict(EMPTY))
