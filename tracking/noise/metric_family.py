"""A family of metrics judged together: Holm's correction, each metric held to its smallest shift that matters
(`compare.min_effect`, or its default), and the family's one verdict.

The metrics judged together are one family, Holm-corrected at alpha; one `exceeds_noise` makes the family's
verdict. A gap beyond noise whose 1-α interval lies inside ± the metric's named `compare.min_effect` is
`within_tolerance`; a gap within noise is `within_noise` only where the test detects the smallest shift that
matters (named, or its default: `min_effect`) with 80% power, or where the gap's 1-α interval lies inside ± that
shift (`equivalence`: two one-sided tests), else `inconclusive`, saying which runs would decide it: the verdict has
three outcomes, beyond noise, within it, or not yet known. A value that is not a number is `inconclusive`, with its
reason, and stays out of Holm's ordering (it never hides behind, or is hidden by, another metric).

The default shift that matters is the larger of an anchor in the metric's units (two points of an accuracy, a tenth
of the band's mean otherwise) and `DEFAULT_STDS` of the band's std (the ceiling's, `tracking.noise.ceiling`, where
its runs tie at an extreme): the default design (5 calibration runs, 3 candidate runs, two metrics) detects 3.79
band stds 80% of the time under every noise shape its test is calibrated for, so at that design a candidate
without effect is `within_noise` whenever no metric is flagged (measured: 92.6-95.3% under normal, t(3), 10% bad
seeds and a capped accuracy; docs/noise-statistics.md), where the anchors alone left test_loss blind (on the digits
pipeline a tenth of its mean is a fifth of its std) and the verdict `inconclusive`.

Under a ceiling, the interval the equivalence test and `within_tolerance` read is widened to the ceiling's std, as
the power statement is: the band's tied runs understate the spread a shift off the ceiling brings, and a true drop of
min_effect passed the narrower interval 3.2-5.6% of the time where two one-sided tests allow 2.5% (0.2-0.9% now).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from tracking.noise.knobs import knobs
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN, WITHIN_TOLERANCE, Judgement
from tracking.noise.statistics import holm

# The default shift that matters where `compare.min_effect` names none: the larger of an anchor (two points of an
# accuracy, a metric whose name holds "accuracy"; else a tenth of the band's mean) and DEFAULT_STDS band stds, which
# the default design detects at least 80% of the time (3.79 stds for two metrics at 5 calibration runs and 3
# candidate runs, under normal noise, t(3) and 10% bad seeds): a smaller default could only come out inconclusive.
ACCURACY_MIN_EFFECT = 0.02
RELATIVE_MIN_EFFECT = 0.1
DEFAULT_STDS = 4.0


def min_effect(
    metric: str, band_mean: float, declared: Mapping[str, float], std: float = 0.0, spread: str = "band"
) -> tuple[float, str]:
    """The smallest shift of `metric` that matters, and where it comes from: its `compare.min_effect` entry in
    `declared`, else the default: the larger of `DEFAULT_STDS` times `std` (the band's, or the ceiling's as
    `spread` names it) and the anchor (`ACCURACY_MIN_EFFECT` for an accuracy, else `RELATIVE_MIN_EFFECT` of the
    band's mean; 0 for a band centred on 0 without spread, which no test can be said to see)."""
    route = knobs()
    if metric in declared:
        return float(declared[metric]), route.named.format(metric=metric)
    name = f"name {route.min_effect.format(metric=metric)} to change it"
    if "accuracy" in metric:
        anchor, anchored = ACCURACY_MIN_EFFECT, "two points of an accuracy"
    else:
        anchor, anchored = RELATIVE_MIN_EFFECT * abs(band_mean), f"{RELATIVE_MIN_EFFECT:.0%} of the band mean"
    stds = DEFAULT_STDS * std if math.isfinite(std) else 0.0
    if stds > anchor:
        return stds, f"the default, {DEFAULT_STDS:g} {spread} stds (above {anchored}); {name}"
    return anchor, f"the default, {anchored} (at least {DEFAULT_STDS:g} {spread} stds); {name}"


def judge_family(
    judgements: Sequence[Judgement],
    alpha: float,
    min_effects: Mapping[str, float] | None = None,
    equivalence_alpha: float | None = None,
) -> list[Judgement]:
    """The judgements with Holm-Bonferroni applied at `alpha` over those that could be judged (the others keep
    their `inconclusive` and its reason), each with the shift it detects with 80% power at alpha/k (k tested).

    `min_effects` None: a family reported beside the verdict, judged on noise alone. A mapping (empty or not): the
    family that decides the verdict, each metric held to its smallest shift that matters (`min_effect`): a gap
    within noise is `within_noise` only where the test detects that shift with 80% power or the gap's 1-alpha
    interval lies inside ± it (or the band is CONTROL's, which sees any shift), otherwise `inconclusive`, saying what would decide it; a significant gap
    whose interval lies inside ± the metric's entry in `min_effects` is `within_tolerance`. `equivalence_alpha`
    (default `alpha`) is the level of the interval that shows a gap within noise to lie inside ± its shift.
    """
    from tracking.noise.power import detectable_shift

    tested = [index for index, found in enumerate(judgements) if found.p_value is not None]
    rejected = holm([judgements[index].p_value for index in tested], alpha) if tested else []
    verdicts = dict(zip(tested, rejected, strict=False))
    level = alpha / max(len(tested), 1)
    out = []
    for index, found in enumerate(judgements):
        if index in verdicts:
            found = replace(found, verdict=EXCEEDS if verdicts[index] else WITHIN)
        if found.band.std > 0:
            seen = detectable_shift(found.band.n, found.candidates, level, found.reference_runs)
            found = replace(found, detectable=seen * found.power_std)
        if min_effects is not None:
            tolerance, origin = min_effect(found.metric, found.band.mean, min_effects, found.power_std, found.spread)
            found = _held_to(
                found, min_effects.get(found.metric), tolerance, origin, level, alpha, equivalence_alpha or alpha
            )
        out.append(found)
    return out


def _held_to(
    found: Judgement,
    named: float | None,
    tolerance: float,
    origin: str,
    level: float,
    alpha: float,
    equivalence_alpha: float,
) -> Judgement:
    """`found` held to the smallest shift that matters (`tolerance`, from `origin`), its test at `level`: a gap
    within noise is `within_noise` where the test sees that shift 80% of the time, or where the gap's
    1-`equivalence_alpha` interval lies inside ±tolerance (`equivalence`), else inconclusive, with the runs that would decide it; a gap
    beyond noise whose interval lies inside ± the shift the team `named` in compare.min_effect is within tolerance
    (`_tolerated`; a default never turns a gap beyond noise into tolerance). CONTROL's zero spread (scale 0) is a measurement: any gap there is
    drift, however small, and an equal value is seen to be equal."""
    from tracking.noise.power import DETECTED, ceiling_clause, deciding_runs

    if found.scale == 0:
        return found
    if found.verdict == EXCEEDS and named is not None:
        return _tolerated(found, named, alpha)
    if found.verdict != WITHIN or found.detectable is None or found.detectable <= tolerance:
        return found
    seen = equivalence(found, tolerance, equivalence_alpha)
    if seen is not None:
        note = (
            f"within ±{tolerance:.4g} ({origin}): the verdict's test bounds the gap to {seen[0]:.4g} to "
            f"{seen[1]:.4g} ({_one_sided(equivalence_alpha)}), inside it"
        )
        return replace(found, note="; ".join(filter(None, [found.note, note])))
    note = (
        f"within noise, but blind to a shift of {tolerance:.4g} ({origin}): the test detects "
        f"{found.detectable:.4g} {DETECTED}{ceiling_clause(found.band.std, found.ceiling_std)}; "
        f"{deciding_runs(tolerance, found.power_std, found.band.n, found.candidates, level, spread=found.spread)}"
    )
    return replace(found, verdict=INCONCLUSIVE, note="; ".join(filter(None, [found.note, note])))


def _tolerated(found: Judgement, named: float, alpha: float) -> Judgement:
    """A gap beyond noise is `within_tolerance` only where its 1-`alpha` interval excludes 0 and lies inside
    ±`named` (`equivalence`), so a true shift of `named` is called tolerable at most alpha/2 of the time; else it
    stays `exceeds_noise`, saying so when the gap itself came out below `named`."""
    seen = equivalence(found, named, alpha)
    tests = _one_sided(alpha)
    if seen is not None and (seen[0] > 0 or seen[1] < 0):
        note = (
            f"beyond noise, too small to act on: the verdict's test bounds the gap to {seen[0]:.4g} to "
            f"{seen[1]:.4g} ({tests}), which excludes 0 and lies inside ±{named:.4g} ({knobs().shift})"
        )
        return replace(found, verdict=WITHIN_TOLERANCE, note="; ".join(filter(None, [found.note, note])))
    if abs(found.delta) >= named:
        return found
    note = (
        f"the gap {abs(found.delta):.4g} is below {knobs().shift} {named:.4g}, but the verdict's test does not "
        f"bound it inside that ({tests}): not shown to be too small to act on"
    )
    return replace(found, note="; ".join(filter(None, [found.note, note])))


def _one_sided(alpha: float) -> str:
    """How a note names `_verdict_interval`: by the error its two one-sided tests hold (a true shift at a bound
    passes at most alpha/2 of the time, measured), not as a "95% interval", which the report's gap interval is
    (`tracking.noise.twosample.gap_interval`): the widened critical t over-covers as an interval (98.4% with one
    candidate run) and the pooled t under-covers where a change moved the spread."""
    return f"two one-sided tests at {100 * alpha / 2:.3g}% each"


def _verdict_interval(found: Judgement, alpha: float) -> tuple[float, float] | None:
    """The gap's 1-`alpha` interval with the verdict's own statistic and critical t (`tracking.noise.tails`), its
    scale at least the ceiling's std where the band has one (`Judgement.ceiling_std`, as `power_std`); None
    where the test has no finite scale (CONTROL, a band without spread, a value that is not a number)."""
    from tracking.noise import tails

    if found.scale is None or found.scale <= 0 or not math.isfinite(found.delta):
        return None
    around = tails.other_runs(found.reference_runs, found.band.n)
    scale = found.scale
    if found.ceiling_std is not None:
        # The ceiling's std in the band's place, as the power statement takes it (module docstring).
        scale = max(scale, found.ceiling_std * math.sqrt(1 / found.reference_runs + 1 / found.candidates))
    half = tails.critical(alpha, found.band.n, found.candidates, around) * scale
    return found.delta - half, found.delta + half


def equivalence(found: Judgement, tolerance: float, alpha: float) -> tuple[float, float] | None:
    """The gap's 1-`alpha` interval (`_verdict_interval`) where it lies inside ±`tolerance`, else None: Schuirmann's
    (1987) two one-sided tests at alpha/2 each, so a true shift of `tolerance` or more is called within it at most
    alpha/2 of the time."""
    seen = _verdict_interval(found, alpha) if tolerance > 0 else None
    return seen if seen is not None and -tolerance <= seen[0] and seen[1] <= tolerance else None


def family_verdict(judgements: Sequence[Judgement]) -> str:
    """`exceeds_noise` if any exceeds; else `inconclusive` if any could not be judged or could not see the shift
    that matters; else `within_tolerance` if a gap was beyond noise but its interval inside ± its minimum effect; else
    `within_noise`."""
    verdicts = {found.verdict for found in judgements}
    return next((verdict for verdict in (EXCEEDS, INCONCLUSIVE, WITHIN_TOLERANCE) if verdict in verdicts), WITHIN)


def overall_verdict(judgements: Sequence[Judgement], control: bool, weights_identical: bool | None) -> str:
    """The verdict of the family that decides it (`family_verdict`); against CONTROL, weights that are not
    bit-identical are drift whatever the metrics say. The compare stage, `tracking diff` and `tracking judge` all
    give this one."""
    return EXCEEDS if control and weights_identical is False else family_verdict(judgements)
