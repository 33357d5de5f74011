"""Noise statistics against hand-computed values and scipy."""

import math

import numpy as np
import pytest
from scipy import stats

from tracking.noise.knobs import LIBRARY, advising
from tracking.noise.metric_family import family_verdict, judge_family
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN, judge
from tracking.noise.statistics import (
    NoiseError,
    band_from_summary,
    band_from_values,
    churn,
    holm,
    off_diagonal_summary,
    pairwise_churn,
    pairwise_weight_distance,
    weight_distance,
)
from tracking.noise.tails import critical, p_value


def test_band_by_hand():
    band = band_from_values("acc", [0.90, 0.92, 0.94], alpha=0.05, source="hand")
    assert band.n == 3 and band.mean == pytest.approx(0.92) and band.ddof == 1
    assert band.std == pytest.approx(0.02)  # sqrt(((-.02)^2 + 0 + .02^2) / 2)
    # the verdict's critical t: t(0.975, 2) = 4.3027 from tables, widened for heavy-tailed noise
    assert critical(0.05, 3, 1) > 4.302652729911275
    half = critical(0.05, 3, 1) * 0.02 * math.sqrt(1 + 1 / 3)
    assert (band.low, band.high) == pytest.approx((0.92 - half, 0.92 + half))


def test_band_matches_scipy_prediction_interval():
    rng = np.random.default_rng(3)
    values = rng.normal(0.9, 0.01, 12)
    band = band_from_values("acc", values, alpha=0.1, source="scipy")
    scale = values.std(ddof=1) * math.sqrt(1 + 1 / 12)
    low, high = stats.t.interval(0.9, 11, loc=values.mean(), scale=scale)
    half = critical(0.1, 12, 1) * scale  # scipy's t interval, widened for heavy-tailed noise
    assert (band.low, band.high) == pytest.approx((values.mean() - half, values.mean() + half))
    assert band.low < low and high < band.high


def test_judge_inside_outside_and_p_value():
    band = band_from_summary("acc", mean=0.9, std=0.01, n=10, alpha=0.05, source="declared")
    inside, outside = judge(0.905, band), judge(0.95, band)
    scale = 0.01 * math.sqrt(1 + 1 / 10)  # the std of one new run minus the mean of 10
    assert inside.within_noise and inside.verdict == WITHIN and inside.z == pytest.approx(0.005 / scale)
    assert not outside.within_noise and outside.verdict == EXCEEDS and outside.z == pytest.approx(0.05 / scale)
    assert outside.p_value == pytest.approx(p_value(0.05 / scale, 10, 1))
    assert outside.p_value > 2 * stats.t.sf(0.05 / scale, 9)  # heavy tails: larger than the t distribution's
    assert (band.low < 0.905 < band.high) and not (band.low < 0.95 < band.high)
    # z and the interval agree: within noise exactly when inside mean +- t * scale
    edge = band.mean + critical(0.05, 10, 1) * scale
    assert judge(edge - 1e-9, band).within_noise and not judge(edge + 1e-9, band).within_noise


def test_judge_against_one_run_uses_the_difference_of_two_runs():
    band = band_from_summary("acc", mean=0.9, std=0.01, n=5, alpha=0.05, source="declared")
    found = judge(0.93, band, reference=0.91)
    assert found.reference_runs == 1 and found.delta == pytest.approx(0.02)
    assert found.scale == pytest.approx(0.01 * math.sqrt(2)) and found.z == pytest.approx(0.02 / (0.01 * math.sqrt(2)))
    assert found.p_value == pytest.approx(p_value(found.z, 5, 1, 1))
    assert found.p_value >= 2 * stats.t.sf(found.z, 4)


def test_tied_band_cannot_judge_and_says_why():
    # issue 9 item 11: three repeats that all scored 356/360 gave "-inf sigma, p=0, exceeds band" for a 1-point gap
    tied = band_from_values("test_accuracy", [356 / 360] * 3, alpha=0.05, source="calibration:algo+impl")
    found = judge(352 / 360, tied)
    assert found.verdict == INCONCLUSIVE and found.within_noise is None and found.z is None and found.p_value is None
    assert "3 identical values" in found.note and "raise calibration.repeats" in found.note
    with advising(LIBRARY):  # a team's script: its calibration is `tracking calibrate`'s
        assert "calibrate with more runs (tracking calibrate --repeats N)" in judge(352 / 360, tied).note
    assert judge(352 / 360, tied, reference=356 / 360).verdict == INCONCLUSIVE
    loss = band_from_values("test_loss", [0.30, 0.32, 0.31], alpha=0.05, source="calibration:algo+impl")
    family = judge_family([found, judge(0.31, loss)], alpha=0.05)
    assert [row.verdict for row in family] == [INCONCLUSIVE, WITHIN] and family_verdict(family) == INCONCLUSIVE
    family = judge_family([found, judge(0.90, loss)], alpha=0.05)
    assert family_verdict(family) == EXCEEDS  # a metric that can be judged and exceeds still decides
    # one step of spread is enough to judge: 356, 356, 355 of 360
    stepped = band_from_values(
        "test_accuracy", [356 / 360, 356 / 360, 355 / 360], alpha=0.05, source="calibration:algo"
    )
    assert judge(353 / 360, stepped).verdict == WITHIN and judge(345 / 360, stepped).verdict == EXCEEDS


def test_control_band_zero_spread_is_a_measurement():
    band = band_from_values("acc", [0.9, 0.9, 0.9], alpha=0.05, source="calibration:control")
    assert judge(0.9, band, exact=True).verdict == WITHIN
    assert judge(0.9000001, band, exact=True).verdict == EXCEEDS
    assert judge(0.9000001, band).verdict == INCONCLUSIVE


def test_too_few_runs_is_an_error():
    with pytest.raises(NoiseError, match="has 1 run"):
        band_from_values("acc", [0.9, float("nan")], alpha=0.05, source="x")


def test_holm_by_hand():
    # sorted p: .01 <= .05/4 = .0125 rejects; .02 > .05/3 = .0167 stops
    assert holm([0.03, 0.01, 0.5, 0.02], alpha=0.05) == [False, True, False, False]
    # .01 <= .05/3, .012 <= .05/2, .04 <= .05/1: all rejected
    assert holm([0.04, 0.01, 0.012], alpha=0.05) == [True, True, True]
    assert holm([0.04, 0.04], alpha=0.05) == [False, False]


def test_churn_is_disagreement():
    assert churn(np.array([1, 2, 3, 4]), np.array([1, 2, 0, 0])) == 0.5
    assert churn(np.array([1, 2]), np.array([1, 2])) == 0.0


def test_weight_distance_is_scale_free():
    w = np.array([3.0, 4.0])
    assert weight_distance(w, 10 * w) == pytest.approx(0.0)
    assert weight_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(math.sqrt(2))


def test_pairwise_matrices_match_pair_by_pair():
    rng = np.random.default_rng(0)
    predictions = rng.integers(0, 5, size=(6, 200))
    weights = rng.normal(size=(6, 50))
    churns, distances = pairwise_churn(predictions), pairwise_weight_distance(weights)
    for i in range(6):
        for j in range(6):
            assert churns[i, j] == pytest.approx(churn(predictions[i], predictions[j]))
            assert distances[i, j] == pytest.approx(weight_distance(weights[i], weights[j]), abs=1e-5)
    summary = off_diagonal_summary(churns)
    assert summary["pairs"] == 15 and summary["max"] >= summary["mean"] > 0


def test_identical_runs_have_exactly_their_value_as_band_mean():
    value = 0.1  # three copies sum to a float whose third is not this value
    assert float(np.mean([value] * 3)) != value
    assert band_from_values("test_accuracy", [value] * 3, 0.05, "control").mean == value


def test_a_run_whose_secret_params_were_logged_redacted_is_still_the_calibrated_baseline():
    """noise.json keeps the baseline's params as params.yaml holds them; the run's, as MLflow logged them."""
    from tracking.inspect.diff.bands import trained_baseline
    from tracking.noise.record import NoiseRecord
    from tracking.redaction import redact_param

    baseline = {"data.loader": "team_data:load", "data.kwargs.api_token": "xoxp-1-secret", "train.epochs": 2}
    logged = {key: redact_param(key, value)[0] for key, value in baseline.items()}
    assert logged["data.kwargs.api_token"] == "<redacted>"
    noise = NoiseRecord(baseline=baseline, data_sha256="d", alpha=0.05, repeats=3, runs=[], variants={})
    assert trained_baseline(noise, logged, "d")
    assert not trained_baseline(noise, {**logged, "train.epochs": "3"}, "d")
    assert not trained_baseline(noise, logged, "other data")


def test_the_calibration_record_round_trips_strictly_and_refuses_what_it_cannot_read(tmp_path):
    """calibration/noise.json is read and written through one class: a NaN metric is stored as null (strict JSON,
    named under non_finite) and reads back as NaN; a file of another shape is one line naming it and the fix."""
    import json

    from tracking.errors import RunStateError
    from tracking.noise.record import NoiseRecord, Variant

    band = band_from_values("test_loss", [0.3, 0.31, 0.29], 0.05, "calibration:algo").as_dict()
    runs = [{"variant": "algo", "repeat": i, "metrics": {"test_loss": v, "test_mae": m}}
            for i, (v, m) in enumerate([(0.3, 1.0), (0.31, float("nan")), (0.29, 2.0)])]  # fmt: skip
    variant = Variant(runs=[0, 1, 2], bands={"test_loss": band}, churn={}, weight_distance={},
                      bit_identical=False, weights_sha256=["a", "b", "c"])  # fmt: skip
    record = NoiseRecord(baseline={"train.epochs": 2}, data_sha256="d", alpha=0.05, repeats=3, runs=runs,
                         variants={"algo": variant})  # fmt: skip
    path = tmp_path / "calibration" / "noise.json"
    record.write(path)
    stored = json.loads(path.read_text())
    assert stored["runs"][1]["metrics"]["test_mae"] is None
    assert stored["non_finite"] == {"runs.1.metrics.test_mae": "nan"}
    read = NoiseRecord.read(path)
    assert math.isnan(read.runs[1]["metrics"]["test_mae"]) and read.band_values("algo") == {
        "test_loss": [0.3, 0.31, 0.29]
    }
    assert read.at_alpha(0.01).variant("algo").bands["test_loss"]["high"] > band["high"]
    with pytest.raises(RunStateError, match=r"noise\.json has no control variant \(it has algo\); add control"):
        read.variant("control")
    path.write_text(json.dumps({**stored, "variants": {"algo": {"runs": [0]}}}))
    with pytest.raises(
        RunStateError, match=r"is not a calibration record this version reads .*dvc repro --force calibrate"
    ):
        NoiseRecord.read(path)
    path.write_text("{")
    with pytest.raises(RunStateError, match=r"is not valid JSON"):
        NoiseRecord.read(path)
    for std in (float("nan"), None, "0.1", -0.1):  # as a hand edit leaves it: a band that would judge nothing
        broken = {
            **stored["variants"]["algo"],
            "bands": {"test_loss": {**stored["variants"]["algo"]["bands"]["test_loss"], "std": std}},
        }
        path.write_text(json.dumps({**stored, "variants": {"algo": broken}}))
        with pytest.raises(
            RunStateError, match=r"the algo variant's band of test_loss has std .*dvc repro --force calibrate"
        ):
            NoiseRecord.read(path)
