"""A sweep judged as one family (`judge_sweep`): K candidates, each against the one calibration band, M metrics each.

Judged one at a time at alpha, a grid of candidates that change nothing calls one of them beyond noise far more
often than alpha (bench/sweep_family.py: 17-20% at 5 candidates, 38-43% at 20, 5 band runs and 3 runs a
candidate). Here the K·M tests are one family:

- Each candidate's per-metric test is the single experiment's (`tracking.noise.candidates.judge_values`: the
  prediction test for one run, the pooled two-sample t for several, its p calibrated for heavy tails); no second
  statistic.
- Which tests are beyond noise: Holm's step-down over all K·M p-values at alpha (the family-wise error, the chance
  of any false `exceeds_noise` in the sweep, at most alpha under any dependence, the shared band's included), or
  with `method="fdr"` Benjamini-Hochberg (the expected share of false ones among those called beyond noise at most
  alpha, proven for independent or positively regression-dependent tests: two-sided tests sharing one band are
  not proven so, and bench/sweep_family.py measures it only where nothing changes; more power, and no promise
  about the chance of one false alarm).
- Each candidate's verdict then comes from `tracking.noise.metric_family.judge_family`, the single experiment's rules,
  with the family's decisions handed in (a test the family procedure rejected as p 0, one it kept as p 1, so the
  one-test Holm inside reproduces the family's decision) at the family's levels: the power behind `within_noise`
  at alpha/(K·M) (Holm's first step), and the equivalence interval (two one-sided tests) at alpha/K. A
  candidate's `within_noise` needs every metric within (an intersection-union test, so the metrics need no
  correction, as the single verdict has none), and the K candidates' equivalence claims are Bonferroni-corrected:
  the chance that any candidate truly `min_effect` off passes by equivalence stays at most alpha/2 (the power
  route keeps the single verdict's promise per candidate: a true shift of `min_effect` is seen at least 80% of the
  time at the family's level). At K = 1 every level is the single verdict's, and so is every verdict
  (tests/test_sweep.py).
- Each candidate's gap on the `primary` metric gets a simultaneous interval: the verdict's own interval
  (`tracking.noise.metric_family.equivalence`, its critical t from `tracking.noise.tails`) at alpha/(K·M),
  Bonferroni, so one that excludes 0 is a test Holm rejects and all K cover at once wherever the family holds its
  level (docs/noise-statistics.md says where that is measured).

The band is the runs of the calibration variant that judges a change of configuration (ALGO's, or ALGO+IMPL's):
a sweep's candidates change a cause, so CONTROL's exact rule does not apply. Rows are ranked by the primary gap in the better direction of its mode (largest first where the mode is unknown;
gaps that are not numbers last). Where the family's verdict differs from the one a candidate got alone (given, or
`tracking.judge` on the same numbers), the row's note says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from tracking.errors import NoiseError
from tracking.names import as_logged
from tracking.noise.candidates import judge_values
from tracking.noise.groups import gap_in_range
from tracking.noise.judging import judge
from tracking.noise.metric_family import equivalence, family_verdict, judge_family, overall_verdict
from tracking.noise.metric_family import min_effect as smallest_shift
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN, WITHIN_TOLERANCE, Judgement, direction
from tracking.noise.statistics import holm
from tracking.noise.sweep_records import FDR, HOLM, METHODS, SweepCandidate, SweepRow, SweepVerdict

__all__ = [
    "FDR",
    "HOLM",
    "METHODS",
    "SweepCandidate",
    "SweepRow",
    "SweepVerdict",
    "judge_sweep",
    "rejections",
    "simultaneous_interval",
]


def judge_sweep(
    band: Mapping[str, Sequence[float]],
    candidates: Sequence[SweepCandidate],
    *,
    modes: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    min_effect: Mapping[str, float] | None = None,
    method: str = HOLM,
    primary: str | None = None,
) -> SweepVerdict:
    """Every candidate against the band as one family of K·M tests (the module's docstring says how); `modes`,
    `alpha` and `min_effect` as `tracking.judge` takes them, `method` `holm` (family-wise) or `fdr`, `primary` the
    metric that ranks (default: the first judged). Values as MLflow's SQL store hands them back are read as
    logged (its ±1.797e308 is an infinity)."""
    modes = modes or {}
    metrics = _refuse_bad_sweep(band, candidates, method, primary)
    primary = primary or metrics[0]
    singles = [judge(band, found.values, modes=modes, alpha=alpha, min_effect=min_effect) for found in candidates]
    logged = {metric: [as_logged(value) for value in band[metric]] for metric in metrics}
    raw = [
        [
            judge_values(
                metric, logged[metric], [as_logged(v) for v in found.values[metric]], alpha, "band", modes.get(metric)
            )
            for metric in metrics
        ]
        for found in candidates
    ]
    tested = [(k, m) for k, checks in enumerate(raw) for m, found in enumerate(checks) if found.p_value is not None]
    rejected = dict(zip(tested, rejections([raw[k][m].p_value for k, m in tested], alpha, method), strict=True))
    family = max(len(tested), 1)
    rows = []
    for k, (found, checks) in enumerate(zip(candidates, raw, strict=True)):
        decided = [
            replace(check, p_value=None if check.p_value is None else 0.0 if rejected[(k, m)] else 1.0)
            for m, check in enumerate(checks)
        ]
        judged = judge_family(
            decided, alpha / len(candidates), min_effects=min_effect or {}, equivalence_alpha=alpha / len(candidates)
        )
        judged = [replace(after, p_value=before.p_value) for after, before in zip(judged, checks, strict=True)]
        rows.append(
            _row(found, judged, singles[k].verdict, primary, (method, family, len(candidates)), alpha, min_effect or {})
        )
    ranked = sorted(rows, key=lambda row: _rank_key(row.gap, modes.get(primary)))
    return _verdict(ranked, modes, method, alpha, family, primary)


def rejections(p_values: Sequence[float], alpha: float, method: str) -> list[bool]:
    """Which of the family's p-values are beyond noise: Holm's step-down at alpha, or Benjamini-Hochberg's
    step-up at a false discovery rate of alpha (`method` `holm` or `fdr`). The bench's vectorised trials call it
    too."""
    if not p_values:
        return []
    if method == HOLM:
        return holm(list(p_values), alpha)
    from scipy import stats

    return [bool(found <= alpha) for found in stats.false_discovery_control(list(p_values), method="bh")]


def simultaneous_interval(found: Judgement, level: float) -> tuple[float, float] | None:
    """The gap's interval with the verdict's own statistic and critical t at `level` (the interval its two
    one-sided tests use, `tracking.noise.metric_family.equivalence` with no bound), within what a gap of the metric can
    be; None where the test has no finite scale (a band without spread, a value that is not a number)."""
    seen = equivalence(found, math.inf, level)
    return None if seen is None else gap_in_range(found.metric, seen)


def _row(
    found: SweepCandidate,
    judged: list[Judgement],
    alone: str,
    primary: str,
    sizes: tuple[str, int, int],
    alpha: float,
    declared: Mapping[str, float],
) -> SweepRow:
    """One candidate's row: the family's verdict of its `judged` checks, its primary gap and simultaneous
    interval at alpha over the family's tests (`sizes`: the method, the tests, the candidates), why the family's verdict differs from the one it got alone, and what would decide
    it where it is undecided."""
    verdict = overall_verdict(judged, False, None)
    family = sizes[1]
    single = found.single_verdict or alone
    main = next(check for check in judged if check.metric == primary)
    return SweepRow(
        name=found.name,
        verdict=verdict,
        checks=tuple(judged),
        gap=main.delta,
        interval=simultaneous_interval(main, alpha / family),
        single_verdict=single,
        note="" if single == verdict else _why(single, verdict, judged, sizes, alpha),
        metric=primary,
        changed=dict(found.changed),
        decide=_decide(judged, alpha / family, declared) if verdict == INCONCLUSIVE else "",
    )


def _why(single: str, verdict: str, judged: list[Judgement], sizes: tuple[str, int, int], alpha: float) -> str:
    """Why a candidate's family verdict differs from its verdict alone, in a line; `sizes`: the method, the tests
    in the family and its candidates."""
    method, family, candidates = sizes
    corrected = METHODS[method].format(tests=family, alpha=100 * alpha)
    if single in (EXCEEDS, WITHIN_TOLERANCE) and verdict not in (EXCEEDS, WITHIN_TOLERANCE):
        smallest = min((check for check in judged if check.p_value is not None), key=lambda check: check.p_value)
        return f"{single} at {alpha:.3g} alone ({smallest.metric} p = {smallest.p_value:.3g}), not after {corrected}"
    if verdict == EXCEEDS:
        beyond = ", ".join(check.metric for check in judged if check.verdict == EXCEEDS)
        return f"{beyond} beyond noise after {corrected}; alone the candidate was {single}"
    if verdict == INCONCLUSIVE:
        return (
            f"{single} alone, undecided at the family's levels (power at alpha/{family}, equivalence at "
            f"alpha/{candidates})"
        )
    return f"{single} alone, {verdict} after {corrected}"


def _decide(judged: list[Judgement], level: float, declared: Mapping[str, float]) -> str:
    """What would decide an undecided candidate: for each metric its test was blind on, the runs that let a test
    at the family's `level` see the smallest shift that matters (`tracking.noise.power.deciding_runs`, as the
    single verdict says it at its own level); for one that could not be tested, its reason."""
    from tracking.noise.power import deciding_runs

    found = []
    for check in judged:
        if check.verdict != INCONCLUSIVE:
            continue
        if check.p_value is None:
            found.append(f"{check.metric}: {check.note}")
            continue
        shift = smallest_shift(check.metric, check.band.mean, declared, check.power_std, check.spread)[0]
        runs = deciding_runs(shift, check.power_std, check.band.n, check.candidates, level, spread=check.spread)
        found.append(f"{check.metric}: {runs}")
    return "; ".join(found)


def _rank_key(gap: float, mode: str | None) -> tuple[bool, float]:
    """Sort key: gaps that are numbers first, best first by the mode (largest first without one)."""
    if not math.isfinite(gap):
        return True, 0.0
    return False, gap if mode == "min" else -gap


def _verdict(
    rows: list[SweepRow], modes: Mapping[str, str], method: str, alpha: float, family: int, primary: str
) -> SweepVerdict:
    """The sweep's verdict from its ranked rows: each candidate in one group (worse where any metric beyond noise
    is worse, better where every one is better, moved where one has no mode)."""
    groups: dict[str, list[str]] = {"better": [], "worse": [], "within": [], "undecided": [], "moved": []}
    for row in rows:
        if row.verdict == EXCEEDS:
            ways = {direction(check.delta, modes.get(check.metric)) for check in row.checks if check.verdict == EXCEEDS}
            group = "worse" if "worse" in ways else "better" if ways == {"better"} else "moved"
        else:
            group = "within" if row.verdict in (WITHIN, WITHIN_TOLERANCE) else "undecided"
        groups[group].append(row.name)
    return SweepVerdict(
        verdict=family_verdict([check for row in rows for check in row.checks]),
        rows=tuple(rows),
        better=tuple(groups["better"]),
        worse=tuple(groups["worse"]),
        within=tuple(groups["within"]),
        undecided=tuple(groups["undecided"]),
        method=method,
        alpha=alpha,
        family_size=family,
        primary=primary,
        moved=tuple(groups["moved"]),
    )


def _refuse_bad_sweep(
    band: Mapping[str, Sequence[float]], candidates: Sequence[SweepCandidate], method: str, primary: str | None
) -> list[str]:
    """The metrics judged (the first candidate's, in its order), or one line for what no family verdict can come
    from: no candidates, an unknown method, two candidates of one name (the table could not tell them apart),
    candidates that hold different metrics, or a primary metric not judged. What `tracking.judge` refuses (a
    metric the band lacks, a bad `min_effect`) it refuses for the first candidate it meets."""
    if not candidates:
        raise NoiseError(
            "the sweep holds no candidates: nothing to judge",
            fix="name the sweep's experiments (or its runs' tag or parent) so that at least one candidate is found",
        )
    if method not in METHODS:
        raise NoiseError(f"method {method!r} is not one of {', '.join(METHODS)}", fix="use holm (the default) or fdr")
    names = [found.name for found in candidates]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise NoiseError(
            f"{len(twice)} candidate name(s) given more than once ({', '.join(twice)}): the table could not tell "
            "them apart",
            fix="give each candidate a name of its own (its run id, or the experiment's name and a suffix)",
        )
    metrics = list(candidates[0].values)
    for found in candidates:
        if sorted(found.values) != sorted(metrics):
            raise NoiseError(
                f"candidate {found.name} holds {', '.join(found.values) or 'no metric'}, candidate "
                f"{candidates[0].name} {', '.join(metrics) or 'no metric'}: one family judges the same metrics",
                fix="give every candidate the values of the same metrics",
            )
    if not metrics:
        raise NoiseError(
            "the candidates hold no metric: nothing to judge", fix="give each candidate its metrics' values"
        )
    empty = [f"{found.name} ({metric})" for found in candidates for metric in metrics if len(found.values[metric]) == 0]
    if empty:
        raise NoiseError(
            f"no values for {', '.join(empty)}: a candidate is judged on at least one run",
            fix="leave out the candidates whose runs did not finish, or give their metrics' values",
        )
    if primary is not None and primary not in metrics:
        raise NoiseError(
            f"primary metric {primary} is not judged: the candidates hold {', '.join(metrics)}",
            fix="name one of the judged metrics as primary, or leave it out for the first",
        )
    return metrics
