"""The verdict where a user looks: the candidate run's description in the MLflow UI (issue 36)."""

import json

import numpy as np

from tracking.config.params import Params
from tracking.names import MAX_TAG_CHARS
from tracking.noise.judged_view import SECTION, view_state
from tracking.noise.run_page import describe_verdict
from tracking.noise.statistics import band_from_values
from tracking.noise.verdict import judge_candidate

BAND = {"test_accuracy": [0.90, 0.91, 0.92, 0.91, 0.90], "test_loss": [0.30, 0.31, 0.29, 0.30, 0.31]}


def _judged(candidates: list[dict[str, float]], band: dict[str, list[float]] = BAND) -> dict:
    """The compare stage's record of a verdict on `candidates` against `band`'s runs (ALGO, no churn to speak of)."""
    runs = len(next(iter(band.values())))
    variant = {
        "name": "algo",
        "bands": {name: band_from_values(name, v, 0.05, "test").as_dict() for name, v in band.items()},
        "weights_sha256": ["abc"],
    }
    churn = np.full((runs + len(candidates),) * 2, 0.02)
    np.fill_diagonal(churn, 0.0)
    result = judge_candidate(Params(), variant, band, candidates, churn, ["x"] * len(candidates), False)
    return {**result, "band_variant": "algo", "reason": "train.learning_rate changed", "calibration_runs": runs}


def test_the_description_leads_with_the_verdict_its_band_and_what_it_could_detect():
    result = _judged([{"test_accuracy": 0.80, "test_loss": 0.30}])
    lines = describe_verdict(result, "7", "abc123").splitlines()
    first, accuracy, loss, why, charts = lines[0], lines[2], lines[3], lines[-3], lines[-1]
    assert first == (
        "**Noise verdict: exceeds_noise** (worse: test_accuracy), against the **algo** band of 5 calibration runs"
    )
    row = next(row for row in result["checks"] if row["metric"] == "test_accuracy")
    assert row["interval"] is None  # one candidate run has no spread of its own for the gap's interval
    assert accuracy == (
        f"- test_accuracy 0.8000, band mean 0.9080 (std {row['band']['std']:.2g}): gap {row['delta']:+.4g}, "
        f"t {row['z']:+.2f}, p {row['p_value']:.3g}; detects a shift of "
        f"{row['detectable']:.3g} 80% of the time: **exceeds_noise**"
    )
    assert loss.startswith("- test_loss 0.3000") and loss.endswith("**inconclusive**")
    assert why == (
        "Why this band: train.learning_rate changed. Full report: "
        "[compare/compare.md](#/experiments/7/runs/abc123/artifacts/compare/compare.md)."
    )
    assert charts == (
        "Every run of the experiment on test_accuracy, test_loss: [chart view](#/experiments/7/runs?"
        "compareRunsMode=CHART&viewStateShareKey=tracking-judged-metrics&workflowType=machine_learning)."
    )


def test_several_candidates_are_named_as_their_mean_and_a_band_without_spread_says_why():
    tied = {"test_accuracy": [0.9] * 3, "test_loss": [0.30, 0.31, 0.29]}
    result = _judged([{"test_accuracy": 0.9, "test_loss": 0.30}, {"test_accuracy": 0.9, "test_loss": 0.31}], tied)
    text = describe_verdict(result, "1", "r")
    assert text.startswith("**Noise verdict: inconclusive**, against the **algo** band of 3 calibration runs, for ")
    assert "for the mean of 2 candidate runs\n" in text
    assert "- test_accuracy 0.9000, band mean 0.9000 (std 0): gap +0, t n/a, p n/a: **inconclusive**" in text
    assert "- Inconclusive: test_accuracy: 3 identical values (0.9) in calibration:algo: no measured spread" in text
    wide = describe_verdict({**result, "reason": "x" * 2 * MAX_TAG_CHARS}, "1", "r")
    assert len(wide) == MAX_TAG_CHARS and wide.startswith("**Noise verdict: inconclusive**")


def test_the_shared_view_charts_the_judged_metrics_first_and_shows_the_verdict_as_a_column():
    state = json.loads(view_state(["test_accuracy", "test_loss"]))
    (section,) = state["compareRunSections"]
    assert section["name"] == SECTION and section["display"] is True
    charts = state["compareRunCharts"]
    assert [(chart["type"], chart["metricKey"]) for chart in charts] == [("BAR", "test_accuracy"), ("BAR", "test_loss")]
    assert {chart["metricSectionId"] for chart in charts} == {section["uuid"]}
    assert state["selectedColumns"] == ["tags.`noise.verdict`", "metrics.`test_accuracy`", "metrics.`test_loss`"]
