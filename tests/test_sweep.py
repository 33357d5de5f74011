"""A sweep judged as one family (issue 66): the same test as one experiment's, Holm or Benjamini-Hochberg over
every candidate and metric, simultaneous intervals, the expected best of n trials and the winner confirmed; at
their edges (ties, NaN, MLflow's stored infinity, zero spread, 2 to 20 runs, one candidate, duplicate names, an
empty sweep). Pure numbers, no training."""

import json
import math
import sys

import numpy as np
import pytest
from scipy import stats

from tracking.errors import NoiseError
from tracking.noise.judging import judge
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN
from tracking.noise.selection import expected_best, judge_confirmation
from tracking.noise.study import NOT_SHOWN, best_of_p, judge_study
from tracking.noise.sweep import FDR, SweepCandidate, judge_sweep, rejections

MODES = {"test_accuracy": "max", "test_loss": "min"}


def _runs(rng: np.random.Generator, n: int, shift: float = 0.0) -> dict[str, list[float]]:
    """n runs of the default family: test_accuracy (std 0.01) `shift` stds above 0.9, test_loss unmoved."""
    return {
        "test_accuracy": list(0.9 + 0.01 * (rng.standard_normal(n) + shift)),
        "test_loss": list(0.3 + 0.02 * rng.standard_normal(n)),
    }


def _sweep(rng: np.random.Generator, k: int, runs: int = 3, shifts: dict[int, float] | None = None):
    return [SweepCandidate(f"exp-{i}", _runs(rng, runs, (shifts or {}).get(i, 0.0)), {"lr": i}) for i in range(k)]


@pytest.mark.parametrize(("band_runs", "runs"), [(2, 1), (5, 3), (20, 20), (5, 1)])
def test_one_candidate_agrees_with_the_single_experiment_verdict(band_runs: int, runs: int):
    rng = np.random.default_rng(band_runs * 100 + runs)
    for shift in (0.0, 6.0):
        band, (candidate,) = _runs(rng, band_runs), _sweep(rng, 1, runs, {0: shift})
        found = judge_sweep(band, [candidate], modes=MODES)
        alone = judge(band, candidate.values, modes=MODES)
        assert found.rows[0].verdict == alone.verdict == found.verdict
        assert found.rows[0].checks == alone.checks and found.rows[0].note == ""
        assert found.family_size == 2 and found.method == "holm"


def test_holm_over_the_family_drops_what_one_test_alone_flags():
    rng = np.random.default_rng(7)
    band = _runs(rng, 5)
    candidates = _sweep(rng, 8)
    # a candidate whose test_accuracy p lies between alpha/16 and alpha: beyond noise alone, not in the family
    shift = next(
        shift
        for shift in np.arange(1.0, 8.0, 0.05)
        if 0.05 / 16
        < judge(band, {**candidates[0].values, "test_accuracy": _moved(band, shift)}).checks[0].p_value
        < 0.02
    )
    candidates[0] = SweepCandidate("exp-0", {**candidates[0].values, "test_accuracy": _moved(band, shift)})
    found = judge_sweep(band, candidates, modes=MODES)
    row = next(row for row in found.rows if row.name == "exp-0")
    assert row.single_verdict == EXCEEDS and row.verdict != EXCEEDS
    assert "exceeds_noise at 0.05 alone (test_accuracy p = " in row.note and "not after Holm over 16 tests" in row.note
    assert found.family_size == 16 and "Holm over 16 tests" in found.table()


def _moved(band: dict[str, list[float]], shift: float) -> list[float]:
    """Three candidate runs around the band's test_accuracy mean, `shift` band stds above it."""
    values = np.asarray(band["test_accuracy"])
    return list(values.mean() + values.std(ddof=1) * (shift + np.array([-0.5, 0.0, 0.5])))


def test_a_real_winner_is_found_ranked_first_with_a_simultaneous_interval():
    rng = np.random.default_rng(3)
    band = _runs(rng, 5)
    candidates = _sweep(rng, 10, shifts={4: 8.0})
    found = judge_sweep(band, candidates, modes=MODES)
    assert found.verdict == EXCEEDS and found.better == ("exp-4",) and found.rows[0].name == "exp-4"
    best = found.rows[0]
    alone = judge(band, candidates[4].values, modes=MODES)
    low, high = best.interval
    assert low <= best.gap <= high and low > 0  # excludes 0: Holm rejects it too
    single = alone.checks[0].interval
    assert high - low > single[1] - single[0]  # wider than one test's interval
    assert len(found.within) + len(found.undecided) == 9 and found.primary == "test_accuracy"
    table = found.table()
    assert "| 1 | exp-4 | lr=4 |" in table and "95% simultaneous interval" in table
    assert json.dumps(found.as_dict(), allow_nan=False)


def test_ranking_follows_the_primary_metric_mode():
    rng = np.random.default_rng(11)
    band = _runs(rng, 5)
    candidates = _sweep(rng, 4)
    found = judge_sweep(band, candidates, modes=MODES, primary="test_loss")
    gaps = [row.gap for row in found.rows]
    assert gaps == sorted(gaps) and found.primary == "test_loss"
    unmoded = judge_sweep(band, candidates)
    assert [row.gap for row in unmoded.rows] == sorted((row.gap for row in unmoded.rows), reverse=True)
    moved = judge_sweep(band, [*candidates, SweepCandidate("far", _runs(rng, 3, 10.0))])
    assert moved.verdict == EXCEEDS and moved.moved == ("far",) and not moved.better and not moved.worse
    assert "moved: far" in moved.table()
    worse = judge_sweep(band, [*candidates, SweepCandidate("far", _runs(rng, 3, -10.0))], modes=MODES)
    assert worse.worse == ("far",) and worse.rows[-1].name == "far"


def test_fdr_rejects_at_least_what_holm_does():
    rng = np.random.default_rng(5)
    p = list(rng.uniform(0, 0.02, 10)) + list(rng.uniform(0, 1, 10))
    holm, fdr = rejections(p, 0.05, "holm"), rejections(p, 0.05, FDR)
    assert all(b for a, b in zip(holm, fdr, strict=True) if a) and sum(fdr) > sum(holm)
    band = _runs(rng, 5)
    found = judge_sweep(band, _sweep(rng, 6, shifts={1: 6.0, 2: 6.0}), modes=MODES, method=FDR)
    assert found.method == FDR and "false discovery rate" in found.table()


def test_ties_zero_spread_nan_and_stored_infinity():
    rng = np.random.default_rng(13)
    band = _runs(rng, 5)
    tied = {**band, "test_accuracy": [0.95] * 5}
    found = judge_sweep(tied, _sweep(rng, 3), modes=MODES)
    assert found.verdict == INCONCLUSIVE and all(row.interval is None for row in found.rows)
    assert "5 identical values" in found.rows[0].decide
    candidates = _sweep(rng, 3)
    candidates[1] = SweepCandidate("diverged", {**candidates[1].values, "test_loss": [0.3, math.nan, 0.31]})
    candidates[2] = SweepCandidate("stored", {**candidates[2].values, "test_accuracy": [sys.float_info.max] * 3})
    found = judge_sweep(band, candidates, modes=MODES)
    assert found.rows[-1].name == "stored" and math.isnan(found.rows[-1].gap)  # read as logged: infinite, last
    assert "| 3 | stored | - | not a number | - | inconclusive |" in found.table()
    diverged = next(row for row in found.rows if row.name == "diverged")
    assert diverged.verdict == INCONCLUSIVE and "nan in 1 of 3 candidate runs" in diverged.decide
    assert found.family_size == 4  # the untested checks stay out of Holm's ordering
    assert json.dumps(found.as_dict(), allow_nan=False)
    equal = _sweep(rng, 2)
    equal[1] = SweepCandidate("exp-1", equal[0].values)
    same = judge_sweep(band, equal, modes=MODES)
    assert same.rows[0].gap == same.rows[1].gap and [row.name for row in same.rows] == ["exp-0", "exp-1"]


@pytest.mark.parametrize(
    ("candidates", "method", "primary", "expected"),
    [
        ([], "holm", None, "the sweep holds no candidates"),
        ([SweepCandidate("a", {"test_loss": [0.3]})] * 2, "holm", None, "given more than once (a)"),
        ([SweepCandidate("a", {"test_loss": [0.3]})], "bonferroni", None, "method 'bonferroni' is not one of"),
        ([SweepCandidate("a", {"test_loss": [0.3]}), SweepCandidate("b", {"x": [1]})], "holm", None, "one family"),
        ([SweepCandidate("a", {"test_loss": [0.3]})], "holm", "test_accuracy", "primary metric test_accuracy"),
        ([SweepCandidate("a", {"test_loss": []})], "holm", None, "no values for a (test_loss)"),
        ([SweepCandidate("a", {"auc": [0.3]})], "holm", None, "no band for auc"),
        ([SweepCandidate("a", {"test_loss": [0.3]})], "holm", {"test_los": 0.1}, "min_effect names test_los"),
    ],
)
def test_a_sweep_that_cannot_be_judged_is_one_error_line(candidates, method, primary, expected):
    effect = primary if isinstance(primary, dict) else None
    primary = None if effect else primary
    with pytest.raises(NoiseError) as raised:
        judge_sweep({"test_loss": [0.3, 0.31, 0.29]}, candidates, method=method, primary=primary, min_effect=effect)
    assert expected in str(raised.value) and "\n" not in str(raised.value).strip()


def test_expected_best_of_n_trials():
    values = [0.80, 0.85, 0.90, 0.88, 0.70, math.nan]
    curve = expected_best(values, "max")
    assert [n for n, *_ in curve] == [1, 2, 3, 4, 5]  # the NaN trial left out
    assert curve[0][1] == pytest.approx(np.mean([0.80, 0.85, 0.90, 0.88, 0.70]))
    means = [mean for _, mean, _, _ in curve]
    assert means == sorted(means) and means[-1] < 0.90
    assert all(low <= mean <= high for _, mean, low, high in curve)
    assert expected_best(values, "max", [100])[0][1] == pytest.approx(0.90, abs=1e-4)
    lowest = expected_best([0.3, 0.2, 0.4], "min", [1, 3])
    assert lowest[0][1] == pytest.approx(0.3) and lowest[1][1] < lowest[0][1]
    assert expected_best([0.5], "max", [1, 4]) == [(1, 0.5, 0.5, 0.5), (4, 0.5, 0.5, 0.5)]
    with pytest.raises(NoiseError, match="none of the 2 trial values"):
        expected_best([math.nan, math.inf], "max")
    with pytest.raises(NoiseError, match="neither max nor min"):
        expected_best([0.5], "best")


def test_the_winner_confirmed_on_fresh_runs():
    rng = np.random.default_rng(17)
    band = _runs(rng, 5)
    found = judge_sweep(band, _sweep(rng, 8), modes=MODES)
    fresh = _runs(rng, 3)
    confirmed = judge_confirmation(band, found.rows[0], fresh, modes=MODES)
    alone = judge(band, fresh, modes=MODES)
    assert confirmed.verdict == alone.verdict and confirmed.checks == alone.checks
    assert confirmed.selected_gap == found.rows[0].gap and confirmed.confirmed_gap == alone.checks[0].delta
    assert confirmed.selection_bias == pytest.approx(confirmed.selected_gap - confirmed.confirmed_gap)
    assert confirmed.confirmed_interval == alone.checks[0].interval and confirmed.runs == 3
    assert json.dumps(confirmed.as_dict(), allow_nan=False)
    with pytest.raises(NoiseError, match="hold no test_accuracy"):
        judge_confirmation(band, found.rows[0], {"test_loss": [0.3]})


def test_within_noise_in_the_family_is_held_at_its_level():
    """A candidate equal to the band's mean is within noise alone and in a family of one; in a family of 20 its
    equivalence interval is at alpha/20, so with a tight min_effect it becomes undecided, saying what decides it."""
    rng = np.random.default_rng(19)
    band = {"test_accuracy": list(0.9 + 0.01 * rng.standard_normal(20))}
    mean = float(np.mean(band["test_accuracy"]))
    close = SweepCandidate("close", {"test_accuracy": [mean - 0.005, mean, mean + 0.005]})
    others = [SweepCandidate(f"o{i}", {"test_accuracy": list(0.9 + 0.01 * rng.standard_normal(3))}) for i in range(19)]
    effect = {"test_accuracy": 0.018}
    alone = judge_sweep(band, [close], modes=MODES, min_effect=effect)
    assert alone.rows[0].verdict == WITHIN
    family = judge_sweep(band, [close, *others], modes=MODES, min_effect=effect)
    row = next(row for row in family.rows if row.name == "close")
    assert row.verdict == INCONCLUSIVE and row.single_verdict == WITHIN
    assert "undecided at the family's levels (power at alpha/20, equivalence at alpha/20)" in row.note
    assert "more" in row.decide and "not a number" not in family.table()


def test_a_study_judges_each_value_best_with_the_noise_its_selection_adds():
    rng = np.random.default_rng(23)
    band = {"test_accuracy": list(0.9 + 0.01 * rng.standard_normal(5))}
    arms = {
        f"lr={lr}": [
            SweepCandidate(f"lr{lr}-d{d}", {"test_accuracy": list(0.9 + 0.01 * (rng.standard_normal(3) + shift))})
            for d in range(4)
        ]
        for lr, shift in ((1, 0.0), (2, 8.0), (3, 0.0))
    }
    fresh = {"lr=2": {"test_accuracy": list(0.98 + 0.01 * rng.standard_normal(3))}}
    found = judge_study(band, arms, metric="test_accuracy", mode="max", scientific="lr", confirmation=fresh)
    assert found.arms[0].value == "lr=2" and found.better == ("lr=2",) and found.arms[0].trials == 4
    assert all(arm.verdict == NOT_SHOWN for arm in found.arms[1:])
    assert all(arm.selection_gap > 0 for arm in found.arms)  # the best of 4 gains by chance alone
    assert found.confirmed.better == ("lr=2",) and "| lr | best of |" in found.table()
    assert json.dumps(found.as_dict(), allow_nan=False)
    tied = judge_study({"test_accuracy": [0.9] * 5}, arms, metric="test_accuracy", mode="max")
    assert all(arm.p_value is None and arm.verdict == NOT_SHOWN for arm in tied.arms)
    for arms_, metric, mode, expected in (
        ({}, "test_accuracy", "max", "no candidates for any value"),
        ({"a": []}, "test_accuracy", "max", "no candidates for a"),
        (arms, "test_loss", "max", "no values of test_loss in the band"),
        (arms, "test_accuracy", "up", "neither max nor min"),
    ):
        with pytest.raises(NoiseError, match=expected):
            judge_study(band, arms_, metric=metric, mode=mode)


def test_the_best_of_m_p_holds_its_level():
    """Fresh null sweeps (a seed of their own): the best of 8 candidates' statistic, judged as the largest of 8,
    is flagged at most alpha of the time (Wilson's upper end), where taken as one test it is flagged far more."""
    rng = np.random.default_rng(29)
    trials, runs, sizes = 2000, 5, (3,) * 8
    band, chosen = rng.standard_normal((trials, runs)), rng.standard_normal((trials, 8, 3))
    spread = band.var(axis=1, ddof=1)[:, None] * (runs - 1) + chosen.var(axis=2, ddof=1) * 2
    gaps = chosen.mean(axis=2) - band.mean(axis=1)[:, None]
    t = (gaps / np.sqrt(spread / 6 * (1 / 5 + 1 / 3)))[np.arange(trials), gaps.argmax(axis=1)]
    flagged = sum(best_of_p(float(value), runs, sizes) <= 0.05 for value in t)
    alone = int((t > stats.t.ppf(0.975, 6)).sum())
    assert flagged / trials < 0.034 and alone / trials > 0.1
