"""A study, not only a grid (the Google deep-learning tuning playbook's case): one hyperparameter under study (the
scientific one), the others (nuisance) re-tuned for each of its values, and each value's best compared with the
baseline with the noise that picking the best itself adds (`judge_study`).

Each value of the scientific hyperparameter is an arm: m candidates (its nuisance settings), each with N runs of
the metric. The arm's best is the candidate whose mean is best by the metric's mode, and its statistic is the
single verdict's t against the band (`tracking.noise.candidates.judge_values`). Picked as the best of m, that t is
the largest of m draws even where nothing matters, so it is judged against the distribution of the largest of m
such statistics sharing the one band (a max-t test, as Westfall and Young's): simulated, seeded, under the normal
and each heavier shape the verdict is calibrated for (`tracking.noise.tails.SHAPES`), the p the largest of theirs,
one-sided in the better direction and doubled (so at alpha it holds the two-sided verdict's alpha/2 per side). The
arms are one family, Holm-corrected at alpha. Beside each best gap: the gap the selection alone adds on average
where nothing matters (the expected best of m null gaps, in the band's std).

Where fresh runs of each arm's best are given (`confirmation`), those runs, free of the selection, are judged as
one family by `tracking.noise.sweep.judge_sweep` (Holm over the arms) and that verdict is the one to act on.

What it assumes: under the null hypothesis every run of every candidate is one more draw of the band's training
noise (no nuisance setting and no scientific value matters), with the noise's shape among those simulated; the
arm's best is chosen by its mean on these same runs; the statistic is free of location and scale, so the band's
std is not needed to simulate it. It says whether an arm's best beats the baseline beyond noise and selection, not
which of two arms is better (compare their confirmed runs for that), and `not shown` is not `within_noise`: no
power is claimed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracking.errors import NoiseError
from tracking.names import as_logged
from tracking.noise import tails
from tracking.noise.candidates import judge_values
from tracking.noise.policy import EXCEEDS
from tracking.noise.statistics import finite, holm
from tracking.noise.sweep import SweepCandidate, SweepVerdict, judge_sweep

# Simulated draws of the largest of m statistics per shape and design (seeded, cached per design).
DRAWS = 20_000
SEED = 661
NOT_SHOWN = "not_shown"


@dataclass(frozen=True)
class StudyArm:
    """One value of the scientific hyperparameter: its best candidate of `trials`, that candidate's gap and t
    against the band, the p of that t as the largest of `trials` (doubled one-sided), the gap that picking the best
    of `trials` adds on average where nothing matters, and the verdict after Holm over the arms."""

    value: str
    best: str
    trials: int
    gap: float
    t: float | None
    p_value: float | None
    selection_gap: float | None
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        """The arm as strict JSON holds it."""
        return {
            "value": self.value,
            "best": self.best,
            "trials": self.trials,
            "gap": finite(self.gap),
            "t": finite(self.t),
            "p_value": finite(self.p_value),
            "selection_gap": finite(self.selection_gap),
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class Study:
    """The study's verdict: its arms ranked by their best gap, those whose best beats the baseline beyond noise
    and selection, and the confirmed family where fresh runs of each arm's best were given."""

    scientific: str
    metric: str
    mode: str
    alpha: float
    arms: tuple[StudyArm, ...]
    better: tuple[str, ...]
    confirmed: SweepVerdict | None = None

    def as_dict(self) -> dict[str, Any]:
        """The study as strict JSON holds it."""
        return {
            "scientific": self.scientific,
            "metric": self.metric,
            "mode": self.mode,
            "alpha": self.alpha,
            "arms": [arm.as_dict() for arm in self.arms],
            "better": list(self.better),
            "confirmed": None if self.confirmed is None else self.confirmed.as_dict(),
        }

    def table(self) -> str:
        """The study as Markdown: each arm's best, its gap beside what the selection alone adds, p and verdict."""
        lines = [
            f"{self.scientific} under study ({len(self.arms)} values, nuisance settings re-tuned for each), "
            f"{self.metric} ({self.mode}), Holm over the values at alpha {self.alpha:g}:",
            "",
            f"| {self.scientific} | best of | best | gap | selection alone adds | p (best of m) | verdict |",
            "| --- | ---: | --- | ---: | ---: | ---: | --- |",
        ]
        for arm in self.arms:
            added = "-" if arm.selection_gap is None else f"{arm.selection_gap:+.4g}"
            p = "-" if arm.p_value is None else f"{arm.p_value:.3g}"
            lines.append(
                f"| {arm.value} | {arm.trials} | {arm.best} | {arm.gap:+.4g} | {added} | {p} | {arm.verdict} |"
            )
        return "\n".join(lines)


def judge_study(
    band: Mapping[str, Sequence[float]],
    arms: Mapping[str, Sequence[SweepCandidate]],
    *,
    metric: str,
    mode: str,
    scientific: str = "the scientific hyperparameter",
    alpha: float = 0.05,
    confirmation: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    min_effect: Mapping[str, float] | None = None,
) -> Study:
    """Each value's (`arms`: value -> its candidates) best against the band on `metric` (`mode` max or min), with
    the noise its selection adds (the module's docstring says how and what it assumes); `confirmation`, fresh runs
    of each value's best (value -> metric -> values), judged as one family by `judge_sweep`."""
    _refuse_bad_study(band, arms, metric, mode)
    baseline = [as_logged(value) for value in band[metric]]
    sign = 1.0 if mode == "max" else -1.0
    found = []
    for value, candidates in arms.items():
        checks = [
            judge_values(metric, baseline, [as_logged(v) for v in one.values[metric]], alpha, "band", mode)
            for one in candidates
        ]
        best = max(range(len(checks)), key=lambda index: _score(sign * checks[index].delta))
        sizes = tuple(sorted(check.candidates for check in checks))
        t = checks[best].z
        p = None if t is None or not math.isfinite(t) else best_of_p(sign * t, checks[best].band.n, sizes)
        added = None if checks[best].band.std <= 0 else selection_gap(checks[best].band.n, sizes)
        found.append((value, candidates[best].name, len(candidates), checks[best].delta, t, p, added))
    tested = [index for index, row in enumerate(found) if row[5] is not None]
    rejected = dict(zip(tested, holm([found[index][5] for index in tested], alpha), strict=True))
    std = float(np.std([v for v in baseline if math.isfinite(v)], ddof=1))
    study_arms = [
        StudyArm(
            value=value,
            best=best,
            trials=trials,
            gap=gap,
            t=t,
            p_value=p,
            selection_gap=None if added is None else sign * added * std,
            verdict=EXCEEDS if rejected.get(index) and sign * gap > 0 else NOT_SHOWN,
        )
        for index, (value, best, trials, gap, t, p, added) in enumerate(found)
    ]
    study_arms.sort(key=lambda arm: -_score(sign * arm.gap))
    confirmed = None
    if confirmation:
        fresh = [SweepCandidate(value, runs) for value, runs in confirmation.items()]
        confirmed = judge_sweep(band, fresh, modes={metric: mode}, alpha=alpha, min_effect=min_effect, primary=metric)
    return Study(
        scientific=scientific,
        metric=metric,
        mode=mode,
        alpha=alpha,
        arms=tuple(study_arms),
        better=tuple(arm.value for arm in study_arms if arm.verdict == EXCEEDS),
        confirmed=confirmed,
    )


def _score(gap: float) -> float:
    """A gap in the better direction, a gap that is not a number the worst."""
    return gap if math.isfinite(gap) else -math.inf


def best_of_p(t: float, runs: int, sizes: tuple[int, ...]) -> float:
    """The doubled one-sided p of `t` (in the better direction) as the largest of the statistics of candidates of
    `sizes` runs against one band of `runs` runs: the largest share of simulated maxima at least `t` over the
    normal and each of `tracking.noise.tails.SHAPES`, at most 1."""
    shares = [float(np.mean(maxima >= t)) for maxima in _maxima(runs, sizes)]
    return min(1.0, 2 * max(shares))


def selection_gap(runs: int, sizes: tuple[int, ...]) -> float:
    """The expected gap, in the band's std, between the best of candidates of `sizes` runs and a band of `runs`
    runs where nothing matters (normal noise): what the selection alone adds."""
    return float(_null_gaps(runs, sizes).mean())


def _normal(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(size)


@functools.lru_cache(maxsize=64)
def _draws(runs: int, sizes: tuple[int, ...]) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Per shape (the normal first, then `tracking.noise.tails.SHAPES`), seeded draws of the largest statistic of
    candidates of `sizes` runs against one band of `runs` runs, as the verdict computes each (the pooled t; the
    prediction t at one run), and of the best candidate's gap in the noise's std units."""
    rng = np.random.default_rng(SEED)
    found = []
    for draw in (_normal, *tails.SHAPES.values()):
        band = draw(rng, (DRAWS, runs))
        statistics, gaps = [], []
        for size in sizes:
            chosen = draw(rng, (DRAWS, size))
            spread = band.var(axis=1, ddof=1) * (runs - 1)
            if size > 1:
                spread = spread + chosen.var(axis=1, ddof=1) * (size - 1)
            gap = chosen.mean(axis=1) - band.mean(axis=1)
            statistics.append(gap / np.sqrt(spread / (runs + size - 2) * (1 / runs + 1 / size)))
            gaps.append(gap)
        statistics, gaps = np.array(statistics), np.array(gaps)
        best = gaps.argmax(axis=0)
        found.append((statistics[best, np.arange(DRAWS)], gaps[best, np.arange(DRAWS)]))
    return tuple(found)


def _maxima(runs: int, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """Per shape, the statistic of the candidate with the best mean, as `judge_study` picks it."""
    return [statistic for statistic, _ in _draws(runs, sizes)]


def _null_gaps(runs: int, sizes: tuple[int, ...]) -> np.ndarray:
    """The best candidate's gap under normal noise of std 1."""
    return _draws(runs, sizes)[0][1]


def _refuse_bad_study(
    band: Mapping[str, Sequence[float]], arms: Mapping[str, Sequence[SweepCandidate]], metric: str, mode: str
) -> None:
    """One line for a study no verdict can come from: no arms, an arm without candidates, a metric the band or a
    candidate lacks, or a mode that is neither max nor min."""
    if mode not in ("max", "min"):
        raise NoiseError(f"mode {mode!r} is neither max nor min", fix=f"say which way {metric} is better: max or min")
    if not arms or any(not candidates for candidates in arms.values()):
        empty = [value for value, candidates in arms.items() if not candidates]
        raise NoiseError(
            f"the study has no candidates for {', '.join(empty) or 'any value'}: nothing to compare",
            fix="give each value of the scientific hyperparameter at least one candidate (its nuisance settings)",
        )
    lacking = [one.name for candidates in arms.values() for one in candidates if not one.values.get(metric)]
    if metric not in band or lacking:
        where = "the band" if metric not in band else ", ".join(lacking)
        raise NoiseError(f"no values of {metric} in {where}", fix=f"give the band's and every candidate's {metric}")
