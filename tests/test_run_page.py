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
        f"{row['detectable']:.3g} at least 80% of the time, under normal noise, t with 3 degrees of freedom or 10% of "
        "runs 5 stds worse: **exceeds_noise**"
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


def test_the_calibration_page_tables_each_variant_s_band_and_says_identical_runs_are_identical():
    """Issue 50: the calibration parent run's page had no description and no metrics (the band was only in an
    artifact). The table's figures are the record's; a CONTROL band's zero spread reads as identical runs."""
    from tracking.noise.band_page import band_metrics, describe_band, shown_metrics
    from tracking.noise.record import NoiseRecord, Variant, metric_bands

    values = {"algo": [0.90, 0.91, 0.92], "control": [0.93, 0.93, 0.93], "algo+impl": [0.90, 0.92, 0.94]}
    runs = [
        {"variant": name, "metrics": {"test_accuracy": value, "test_accuracy_class_0": value}}
        for name, found in values.items()
        for value in found
    ]
    variants = {
        name: Variant(
            runs=[index for index, run in enumerate(runs) if run["variant"] == name],
            bands=metric_bands([run for run in runs if run["variant"] == name], name),
            churn={},
            weight_distance={},
            bit_identical=name == "control",
            weights_sha256=["w"],
        )
        for name in values
    }
    noise = NoiseRecord(baseline={}, data_sha256="d", alpha=0.05, repeats=3, runs=runs, variants=variants)
    shown = shown_metrics(noise, ["test_accuracy", "test_loss"])
    assert shown == ["test_accuracy"]  # only what some variant bands; per-class rows stay in noise.json
    assert shown_metrics(noise) == ["test_accuracy", "test_accuracy_class_0"]
    algo = variants["algo"].bands["test_accuracy"]
    metrics = band_metrics(noise, shown)
    assert metrics["band.algo.test_accuracy.mean"] == algo["mean"] and metrics["band.control.test_accuracy.std"] == 0
    assert len(metrics) == 3 * 5 and "band.algo-impl.test_accuracy.std" in metrics  # MLflow refuses a `+` in a name
    lines = describe_band(noise, shown, "7", "abc").splitlines()
    assert lines[0] == "**Noise band: 9 calibration runs over 3 variant(s)**"
    assert lines[4] == f"| algo | test_accuracy | 3 | 0.91 | 0.01 | {algo['low']:.4g} to {algo['high']:.4g} |"
    assert lines[5] == "| control | test_accuracy | 3 | 0.93 | 0 | identical runs |"


def test_an_accuracy_band_near_1_is_clipped_at_1_on_the_calibration_page():
    """Issue 67: the page showed an accuracy interval "0.9592 to 1.012" where reports/compare.md clips at 1, and
    drew no band."""
    from tracking.noise.band_page import band_figure, band_metrics, describe_band
    from tracking.noise.record import NoiseRecord, Variant, metric_bands

    runs = [{"variant": "algo", "metrics": {"test_accuracy": value}} for value in (0.96, 0.99, 1.0)]
    bands = metric_bands(runs, "algo")
    assert bands["test_accuracy"]["high"] > 1  # the record keeps the raw interval
    variant = Variant(
        runs=[0, 1, 2], bands=bands, churn={}, weight_distance={}, bit_identical=False, weights_sha256=["a", "b", "c"]
    )
    noise = NoiseRecord(baseline={}, data_sha256="d", alpha=0.05, repeats=3, runs=runs, variants={"algo": variant})
    assert band_metrics(noise, ["test_accuracy"])["band.algo.test_accuracy.high"] == 1.0
    row = describe_band(noise, ["test_accuracy"], "7", "abc").splitlines()[4]
    assert row.endswith(f"| {bands['test_accuracy']['low']:.4g} to 1 |"), row
    figure = band_figure(noise, ["test_accuracy"])  # the band drawn for the page, clipped as its table is
    (axis,) = figure.axes
    (interval,) = axis.collections[0].get_segments()
    assert max(interval[:, 1]) == 1.0 and axis.get_title() == "test_accuracy"
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["interval", "runs"]


def test_each_chart_s_legend_names_its_own_metric_s_outcome():
    """Issue 67: the test_accuracy chart labelled the candidate with the verdict that test_loss alone decided."""
    from tracking.noise.report import candidate_label

    checks = [
        {"family": "primary", "metric": "test_accuracy", "verdict": "inconclusive"},
        {"family": "primary", "metric": "test_loss", "verdict": "exceeds_noise"},
    ]
    result = {"verdict": "exceeds_noise", "checks": checks}
    assert candidate_label(result, "test_accuracy") == "candidate (test_accuracy: inconclusive)"


def test_a_long_note_is_shown_in_under_200_characters_and_whole_behind_its_link():
    """An inconclusive metric's note runs to some 450-600 characters (the shift it is blind to and where that comes
    from, what the test detects under which noise, the runs that would decide): the run page and the report show
    its gist with a link, and the report's last section holds it whole (issue 67)."""
    from tracking.noise.notes import SHOWN_CHARS, gist, said_note
    from tracking.noise.report import render_report

    result = _judged([{"test_accuracy": 0.80, "test_loss": 0.30}])
    note = next(line for line in result["inconclusive"] if line.startswith("test_loss"))
    assert len(note) > 300
    page = describe_verdict(result, "7", "abc123")
    shown = next(line for line in page.splitlines() if line.startswith("- Inconclusive: test_loss"))
    shown = shown.removeprefix("- Inconclusive: ").removesuffix(".")
    assert len(shown) <= SHOWN_CHARS
    assert shown.startswith("test_loss: within noise, but blind to a shift of ")
    assert shown.endswith("([in full](#/experiments/7/runs/abc123/artifacts/compare/compare.md))")
    report = render_report(result)
    listed = next(line for line in report.splitlines() if line.startswith("- Inconclusive: test_loss"))
    assert len(listed.removeprefix("- Inconclusive: ").removesuffix(".")) <= SHOWN_CHARS
    assert listed.endswith("([in full](#notes-in-full)).")
    assert f"- {note}" in report.split("## Notes in full", 1)[1]
    said = said_note(note, "reports/compare.md, Notes in full")
    assert len(said) <= SHOWN_CHARS and said.endswith(" (in full: reports/compare.md, Notes in full)")
    assert gist("test_x: short") == "test_x: short"  # a note that fits is kept whole
