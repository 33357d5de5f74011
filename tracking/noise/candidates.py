"""The verdict of one or more candidate runs against the values of the band's runs (`judge_values`).

One candidate run: the prediction test of `tracking.noise.policy.judge`. Several (N > 1, for when a stage trains
them): the two-sample comparison of `tracking.noise.twosample`, the pooled t deciding (it is the prediction test
at N = 1), its p calibrated for heavy-tailed noise as the prediction test's is (`tracking.noise.tails`), with
Welch's p and the exact permutation p beside it. Either way the record carries the effect (the gap's Welch
interval from `MIN_GAP_RUNS` candidate runs on, and the probability that a candidate run beats a baseline run)
and what the band can see (the detectable shift once `judge_family` has set the family's level).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tracking.noise import tails
from tracking.noise.ceiling import ceiling_std
from tracking.noise.groups import gap_in_range, left_out
from tracking.noise.policy import (
    EXCEEDS,
    INCONCLUSIVE,
    PERMUTATION,
    POOLED,
    WITHIN,
    Judgement,
    judge,
    judge_control,
)
from tracking.noise.statistics import TIE, band_from_values
from tracking.noise.twosample import (
    MIN_GAP_RUNS,
    gap_interval,
    permutation_p,
    pooled_t,
    probability_of_beating,
    welch,
)


def judge_values(
    metric: str,
    band_values: Sequence[float],
    candidate_values: Sequence[float],
    alpha: float,
    source: str,
    mode: str | None = None,
    exact: bool = False,
) -> Judgement:
    """Candidate runs' values of `metric` against the band runs' values, at `alpha` for this one test (correct the
    family with `judge_family`). `exact` marks a CONTROL band: only values equal to its runs are noise. Band runs
    whose value is not a finite number are left out, and the note names them."""
    found = _judge_values(metric, band_values, candidate_values, alpha, source, mode, exact)
    dropped = left_out([math.nan if value is None else value for value in band_values], "band")
    return replace(found, note="; ".join(filter(None, [found.note, dropped]))) if dropped else found


def _judge_values(
    metric: str,
    band_values: Sequence[float],
    candidate_values: Sequence[float],
    alpha: float,
    source: str,
    mode: str | None,
    exact: bool,
) -> Judgement:
    """`judge_values` before the note on band runs left out."""
    band = band_from_values(metric, band_values, alpha, source)
    baseline = np.asarray([value for value in band_values if value is not None and math.isfinite(value)], dtype=float)
    candidates = np.asarray(candidate_values, dtype=float)
    if len(candidates) == 0:
        raise ValueError(f"judge_values({metric!r}) needs at least one candidate value")
    bad = candidates[~np.isfinite(candidates)]
    if len(bad):
        named = " or ".join(sorted({str(float(value)) for value in bad}))
        return replace(
            judge(math.nan, band),
            candidates=len(candidates),
            note=f"{metric} is {named} in {len(bad)} of {len(candidates)} candidate runs: nothing to judge "
            "(look at those runs' training)",
        )
    if exact and band.std == 0:
        # CONTROL: any candidate run unequal to its identical runs is drift, however many runs there are.
        return _with_beats(judge_control(candidates.tolist(), band), baseline, candidates, mode)
    ceiling = ceiling_std(baseline) if band.std > 0 else None
    if len(candidates) == 1 or band.std == 0:
        # A band without spread judges nothing but CONTROL: the candidates' own spread alone would say what
        # reseeding the baseline does without having measured it.
        found = judge(float(candidates.mean()), band, exact=exact)
        return _with_beats(replace(found, candidates=len(candidates), ceiling_std=ceiling), baseline, candidates, mode)
    test = pooled_t(baseline, candidates, alpha)
    assert test.t is not None  # the band has spread (band.std > 0), so the pooled variance is not 0
    common = {
        "metric": metric,
        "value": float(candidates.mean()),
        "reference": band.mean,
        "reference_runs": band.n,
        "delta": test.difference,
        "band": band,
        "candidates": len(candidates),
        "test": POOLED,
    }
    separate = welch(baseline, candidates, alpha)
    # The pooled t's p, calibrated for heavier-tailed noise than the normal (`tracking.noise.tails`).
    p_value = tails.p_value(test.t, len(baseline), len(candidates))
    found = Judgement(
        scale=test.scale,
        z=test.t,
        p_value=p_value,
        verdict=WITHIN if p_value > alpha else EXCEEDS,
        note="",
        permutation_p=permutation_p(baseline, candidates),
        welch_p=separate.p_value,
        interval=_interval(metric, baseline, candidates, alpha) if len(candidates) >= MIN_GAP_RUNS else None,
        ceiling_std=ceiling,
        **common,
    )
    return _with_beats(found, baseline, candidates, mode)


def _interval(metric: str, baseline: np.ndarray, candidates: np.ndarray, alpha: float) -> tuple[float, float] | None:
    """The gap's printed 1-α interval (`gap_interval`), within what a gap of the metric can be."""
    found = gap_interval(baseline, candidates, alpha)
    return None if found.low is None else gap_in_range(metric, (found.low, found.high))


def _with_beats(found: Judgement, baseline: np.ndarray, candidates: np.ndarray, mode: str | None) -> Judgement:
    """The judgement with the probability that a candidate run beats a baseline run (metrics with a mode)."""
    if mode not in ("max", "min"):
        return found
    return replace(found, beats={"probability": probability_of_beating(baseline, candidates, mode)})


def judge_churn(matrix: np.ndarray, candidates: int, alpha: float, exact: bool = False) -> Judgement:
    """The candidate runs' churn against the band runs, one-sided: more churn than reseeding gives is drift.

    `matrix` is the pairwise churn of the N candidate runs (first) and the n band runs. The statistic is the mean
    churn between the two groups; under the null hypothesis every run is a draw of the same training randomness,
    so every split of the n + N runs into groups of these sizes is as likely, and p is the share of splits whose
    statistic is at least the observed one: exact, and judged against the distribution of the statistic itself
    (not of single pairs). With few runs the smallest p, 1 / C(n+N, N), can stay above alpha: then it cannot judge.
    CONTROL (`exact`): any churn is drift.
    """
    matrix = np.asarray(matrix, dtype=float)
    total = len(matrix)
    splits = [list(chosen) for chosen in itertools.combinations(range(total), candidates)]
    statistics = np.array([_cross_mean(matrix, chosen) for chosen in splits])
    observed = float(statistics[0])  # the first split is the candidates themselves
    band = band_from_values("churn", statistics, alpha, f"churn between groups over the {len(splits)} splits")
    common = {"metric": "churn", "value": observed, "reference": band.mean, "reference_runs": total - candidates}
    common |= {"delta": observed - band.mean, "scale": None, "z": None, "band": band, "candidates": candidates}
    if exact:
        drift = observed > 0
        return Judgement(
            p_value=None,
            verdict=EXCEEDS if drift else WITHIN,
            note=f"CONTROL: {'churn where the runs are identical' if drift else 'no churn'}",
            test=PERMUTATION,
            **common,
        )
    p_value = float(np.mean(statistics >= observed - TIE * float(np.abs(statistics).max())))  # ties: one rule
    if 1 / len(splits) > alpha:
        return Judgement(
            p_value=None,
            verdict=INCONCLUSIVE,
            note=f"{total} runs split {len(splits)} ways: the smallest p, {1 / len(splits):.3g}, is above alpha {alpha}",
            test=PERMUTATION,
            **common,
        )
    return Judgement(
        p_value=p_value, verdict=WITHIN if p_value > alpha else EXCEEDS, note="", test=PERMUTATION, **common
    )


def _cross_mean(matrix: np.ndarray, chosen: list[int]) -> float:
    """The mean of `matrix` between the runs `chosen` and the others."""
    others = np.setdiff1d(np.arange(len(matrix)), chosen)
    return float(matrix[np.ix_(chosen, others)].mean())
