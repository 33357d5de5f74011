"""`tracking.judge`: the verdict on candidate runs against a band of runs, from plain numbers, so a team can judge
runs logged anywhere. The compare stage's primary family (`tracking.noise.verdict`), `tracking diff` and
`tracking judge` (`tracking.inspect.diff.metrics`) go through it too: one verdict, one path.

Each metric's candidate values are tested against its band's values (`tracking.noise.candidates.judge_values`:
the prediction test for one candidate run, the pooled two-sample t for several), the metrics are one family,
Holm-corrected at `alpha` and held to their smallest shift that matters (`tracking.noise.metric_family.judge_family`),
and the family gives one of three outcomes: `exceeds_noise`, `within_noise` (only where every test could see
the shift that matters) or `inconclusive` (with what would decide it); `within_tolerance` for a gap beyond noise
that two one-sided tests bound inside ± a named `min_effect` (real, too small to act on).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracking.errors import NoiseError
from tracking.names import as_logged
from tracking.noise.candidates import judge_values
from tracking.noise.knobs import knobs
from tracking.noise.metric_family import judge_family, overall_verdict
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, Judgement, direction
from tracking.noise.policy import judge as judge_value
from tracking.noise.statistics import Band


@dataclass(frozen=True)
class Verdict:
    """The verdict on a family of metrics: the word, each metric's judgement (in the order given), the metrics
    beyond noise in the worse and the better direction of their mode, and for each inconclusive metric what
    would decide it (`metric: note`)."""

    verdict: str
    checks: tuple[Judgement, ...]
    worse: tuple[str, ...]
    better: tuple[str, ...]
    inconclusive: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """The verdict as strict JSON holds it (no NaN or infinity)."""
        return {
            "verdict": self.verdict,
            "checks": [found.as_dict() for found in self.checks],
            "worse": list(self.worse),
            "better": list(self.better),
            "inconclusive": list(self.inconclusive),
        }


def judge(
    band: Mapping[str, Sequence[float] | Band],
    candidates: Mapping[str, Sequence[float]],
    *,
    modes: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    min_effect: Mapping[str, float] | None = None,
    control: bool = False,
    weights_identical: bool | None = None,
    source: str = "band",
    reference: Mapping[str, float] | None = None,
    equivalence_alpha: float | None = None,
) -> Verdict:
    """The verdict on candidate runs: `candidates` maps each metric to its values in the candidate runs, `band` to
    its values in the band's runs (or a declared `Band`, e.g. a published mean, std and n, which judges the first
    candidate value). `modes` says which way is better (`max` or `min`, Keras's word), `min_effect` the smallest
    shift that matters per metric (default: `tracking.noise.metric_family.min_effect`). `control` marks a CONTROL band
    (same seeds, configuration and environment: only equal values are noise) and `weights_identical` whether the
    candidate's weights are bit-identical to its runs'. `reference` holds, for a metric with a declared `Band`, one
    run's value to judge the candidate around instead of the band's mean (`tracking diff` of two other runs).
    `equivalence_alpha` is the level of the gap's interval that must lie inside ±min_effect for `within_noise` by
    equivalence (default `alpha`; the sequential design's looks set their own, `tracking.noise.sequential.look`).
    Values as MLflow's SQL store hands them back are read as logged: its ±1.797e308 is an infinity.

    >>> judge({"test_accuracy": [0.98, 0.985, 0.99, 0.985, 0.982]}, {"test_accuracy": [0.62]}).verdict
    'exceeds_noise'
    """
    modes = modes or {}
    _refuse_bad_inputs(band, candidates, min_effect or {})
    band = {
        metric: found if isinstance(found, Band) else [as_logged(v) for v in found] for metric, found in band.items()
    }
    candidates = {metric: [as_logged(value) for value in values] for metric, values in candidates.items()}
    checks = []
    for metric, values in candidates.items():
        found = band[metric]
        if isinstance(found, Band):
            checks.append(judge_value(float(values[0]), found, (reference or {}).get(metric), control))
        else:
            checks.append(judge_values(metric, found, values, alpha, source, modes.get(metric), control))
    judged = judge_family(checks, alpha, min_effect or {}, equivalence_alpha)
    ways = {found.metric: direction(found.delta, modes.get(found.metric)) for found in judged}
    beyond = [found.metric for found in judged if found.verdict == EXCEEDS]
    return Verdict(
        overall_verdict(judged, control, weights_identical),
        tuple(judged),
        tuple(metric for metric in beyond if ways[metric] == "worse"),
        tuple(metric for metric in beyond if ways[metric] == "better"),
        tuple(f"{found.metric}: {found.note}" for found in judged if found.verdict == INCONCLUSIVE),
    )


def _refuse_bad_inputs(
    band: Mapping[str, Sequence[float] | Band],
    candidates: Mapping[str, Sequence[float]],
    min_effect: Mapping[str, float],
) -> None:
    """One line for what no verdict can come from: a candidate metric the band lacks, a smallest shift that matters
    of a metric not judged (a misspelt name would leave the judged one at its default), or one that is not a number
    above 0 (no test sees a shift of 0, and NaN would be printed as one it detects)."""
    missing = [metric for metric in candidates if metric not in band]
    if missing:
        raise NoiseError(
            f"no band for {', '.join(missing)}: the band holds {', '.join(band) or 'no metric'}",
            fix="give the band runs' values of every metric judged, or leave it out of the candidates",
        )
    unjudged = sorted(metric for metric in min_effect if metric not in candidates)
    if unjudged:
        raise NoiseError(
            f"min_effect names {', '.join(unjudged)}, which is not judged: the candidates hold "
            f"{', '.join(candidates) or 'no metric'}",
            fix=f"name a judged metric ({knobs().min_effect.format(metric=next(iter(candidates), 'METRIC'))}): a "
            "misspelt name would leave the metric judged at its default shift",
        )
    for metric, value in min_effect.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise NoiseError(
                f"min_effect for {metric} is {value!r}: the smallest shift that matters must be a number above 0",
                fix=f"name a positive shift for {metric} ({knobs().min_effect.format(metric=metric)}) or leave it "
                "out for the default",
            )
