"""The one noise policy: which calibration band judges a metric, and the test of a value against it.

`tracking diff`, `tracking rerun` and the `compare` stage all use it, so one pair of runs gets the same band,
z and verdict from each of them.

Which band. Two sources of noise are calibrated (Zhuang et al. 2021): ALGO (the training seeds: init,
shuffle, dropout, augmentation) and IMPL (kernel numerics: op determinism off, other determinism settings,
software or hardware). What differs between a run and its reference decides the sources its band must hold:

- seeds differ, or a *cause* differs (data, configuration, code) -> ALGO. Under the null hypothesis that the
  change has no effect, a run with a changed cause is one more draw of the training randomness, as a
  reseeded run is; so a changed cause gets a verdict too: `exceeds_noise` means the change moved the metric
  beyond what reseeding does, `within_noise` that its effect cannot be told from noise;
- op determinism off on either side, changed determinism settings, software or hardware -> IMPL;
- nothing -> CONTROL, where anything but an equal value (and bit-identical weights) is drift.

The band is the smallest calibrated variant that holds those sources (`control`, `impl` or `algo`, then
`algo+impl`). A variant that lacks a needed source is never used, since its narrower band would call noise
drift: without a covering variant there is no verdict, and the reason names the variants to calibrate.

The test. A value v is compared with a reference r that averages m runs of the band's configuration:
the band's own mean (m = n) when the reference is the calibrated baseline itself (the compare stage, and
`tracking diff` when run A has the calibration's data and configuration), else one run's value (m = 1,
`tracking diff` of two other runs). Under noise, v - r has standard deviation sigma * sqrt(1 + 1/m), so

    z = (v - r) / (s * sqrt(1 + 1/m)),   p >= 2 * P(T_{n-1} > |z|),

with s the band's standard deviation (ddof=1) over its n runs, and p the larger of that and z's p under
heavier-tailed noise (`tracking.noise.tails`: t(3) noise, 10% bad seeds), so that one run's own tail does not
raise false alarms; v is within noise when p > alpha, i.e. inside r +- c * s * sqrt(1 + 1/m), c the critical t
of that p (for m = n the prediction interval of one new run). z is a t statistic, not a count of band stds:
reports call it t. Several candidate runs are judged by the two-sample
test of `tracking.noise.candidates`, which is this one at N = 1. The metrics judged together are one family,
Holm-corrected and held to the smallest shift that matters (`tracking.noise.metric_family`): the verdict has
three outcomes, beyond noise, within it, or not yet known.

No spread. Test accuracy moves in steps of one test example (1/360 on the default split), and a few repeats
often tie: a band of n identical values has s = 0 exactly (not the 1e-16 a float std leaves) and no measured
spread, so its z would be infinite for any
gap. Such a band does not give a verdict: the metric is `inconclusive` ("n identical values; raise
calibration.repeats"), and a family with no exceeding metric but one that cannot be judged is `inconclusive`.
Only CONTROL gives a verdict from zero spread, because there zero spread is the measured outcome (its repeats
are bit-identical by design): a value equal to its reference is within noise, any other exceeds it, with no
finite statistic (z and p None, never infinity or 0). A floor at
the metric's resolution was not chosen: nothing says the spread is as large as one step, and a binomial
model describes resampling the test set, not retraining on a fixed one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tracking.noise.knobs import knobs
from tracking.noise.statistics import Band, finite, same
from tracking.redaction import redact_param

ALGO, IMPL = "algo", "impl"
CONTROL = "control"
# The noise sources each calibration variant holds, smallest band first.
SOURCES: dict[str, frozenset[str]] = {
    CONTROL: frozenset(),
    IMPL: frozenset({IMPL}),
    ALGO: frozenset({ALGO}),
    "algo+impl": frozenset({ALGO, IMPL}),
}
WITHIN, EXCEEDS, INCONCLUSIVE = "within_noise", "exceeds_noise", "inconclusive"
# Beyond noise but smaller than the metric's `compare.min_effect`: a real difference too small to matter.
WITHIN_TOLERANCE = "within_tolerance"
# What each outcome a user can get means, in the order a family's verdict takes them (`family_verdict`).
OUTCOMES = {
    EXCEEDS: "a metric moved beyond noise (under CONTROL: any run unequal to its identical runs)",
    INCONCLUSIVE: "not decided: a metric could not be judged, or its test was blind to the shift that matters "
    "(each says what would decide it)",
    WITHIN_TOLERANCE: "a metric moved beyond noise, but its two one-sided tests bound the gap inside ± its named "
    "compare.min_effect: real, too small to act on",
    WITHIN: "no metric moved beyond noise, and the comparison could see the shift that matters",
}
# The tests behind a verdict: one candidate run against the band (prediction), several (the pooled two-sample t).
# Churn: the exact one-sided permutation test of the mean churn between candidate and band runs.
PREDICTION, POOLED, PERMUTATION = "prediction", "pooled_t", "permutation"
# The most distinct values a CONTROL note lists of the candidate runs that differ.
SHOWN = 5
# The params sections whose change is a cause: the data and the configuration trained.
CONFIG_SECTIONS = ("data.", "model.", "train.")
DETERMINISM = "determinism."


@dataclass(frozen=True)
class Differences:
    """What differs between a run and its reference: causes, seeds, and what changes kernel numerics."""

    causes: tuple[str, ...] = ()
    seeds: bool = False
    kernels: tuple[str, ...] = ()

    def sources(self) -> frozenset[str]:
        """The noise sources a band must hold to judge this difference."""
        return frozenset({ALGO} if self.causes or self.seeds else set()) | frozenset({IMPL} if self.kernels else set())


@dataclass(frozen=True)
class BandChoice:
    """The calibration variant that judges a difference (None: no calibrated variant covers it) and why."""

    variant: str | None
    reason: str


def choose_band(differences: Differences, available: Iterable[str]) -> BandChoice:
    """The smallest calibrated variant holding every noise source in play, and the reason in words."""
    needed = differences.sources()
    kernels = f" ({', '.join(differences.kernels)})" if differences.kernels else ""
    if differences.causes:
        reason = (
            f"{', '.join(differences.causes)} changed (without an effect it would vary as a reseeded run does){kernels}"
        )
    elif differences.seeds:
        reason = f"the runs differ in seeds{kernels}"
    elif differences.kernels:
        reason = f"same seeds and configuration; kernel numerics may differ{kernels}"
    else:
        reason = "same seeds, configuration and environment with op determinism: anything but equal is drift"
    offered = set(available)
    variant = next((name for name, held in SOURCES.items() if name in offered and held >= needed), None)
    if variant is None:
        covering = [name for name, held in SOURCES.items() if held >= needed]
        return BandChoice(
            None,
            f"{reason}; the calibration has no variant holding that noise "
            f"({knobs().variants.format(names=', '.join(covering))})",
        )
    return BandChoice(variant, reason)


def logged_text(key: str, value: Any) -> str:
    """A param value as MLflow holds it: text as is, anything else as JSON (null, true, [4, 4, 4]), secrets
    redacted (`Tracker.log_params`), so a logged run and a params file compare alike."""
    return redact_param(key, value)[0]


def changed_keys(a: Mapping[str, Any], b: Mapping[str, Any], prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """The flat params under `prefixes` whose values differ, compared as MLflow logs them."""
    keys = sorted(key for key in set(a) | set(b) if key.startswith(prefixes))
    return tuple(
        key
        for key in keys
        if (key in a) != (key in b) or (key in a and logged_text(key, a[key]) != logged_text(key, b[key]))
    )


@dataclass(frozen=True)
class Judgement:
    """One value (or the mean of `candidates` candidate runs) judged against a band around a reference that averages
    `reference_runs` runs, with what the band can see.

    `z` is the test's t statistic (the gap over its estimated standard deviation, not a count of band stds) and
    `test` names it: `prediction` (one candidate run) or `pooled_t` (several, with Welch's and the
    exact permutation p beside it). `interval` is the gap's 1-α interval (`gap_interval`), only from `MIN_GAP_RUNS` candidate
    runs on (`tracking.noise.twosample`), `detectable` the smallest true shift the test detects with 80% power at
    the level Holm's first step uses, the measured std's own error counted (set by `judge_family`), `beats` the
    probability that a candidate run beats a baseline run, without an interval (metrics with a mode).
    `ceiling_std` is the spread a shift off the band's ceiling brings, where its runs tie at an extreme
    (`tracking.noise.ceiling.ceiling_std`): `detectable`, the runs that would decide, the default shift that matters
    and the equivalence test's interval are stated for it (`tracking.noise.metric_family`).
    """

    metric: str
    value: float
    reference: float
    reference_runs: int
    delta: float
    scale: float | None
    z: float | None
    p_value: float | None
    verdict: str
    note: str
    band: Band
    candidates: int = 1
    test: str = PREDICTION
    permutation_p: float | None = None
    welch_p: float | None = None
    interval: tuple[float, float] | None = None
    detectable: float | None = None
    beats: dict[str, float] | None = None
    ceiling_std: float | None = None

    @property
    def within_noise(self) -> bool | None:
        return None if self.verdict == INCONCLUSIVE else self.verdict in (WITHIN, WITHIN_TOLERANCE)

    @property
    def power_std(self) -> float:
        """The std the power is stated for: the ceiling's where the band has one, else the band's."""
        return self.band.std if self.ceiling_std is None else self.ceiling_std

    @property
    def spread(self) -> str:
        """Whose std `power_std` is, as the lines name it: "ceiling" or "band"."""
        return "band" if self.ceiling_std is None else "ceiling"

    def as_dict(self) -> dict[str, Any]:
        """The judgement as JSON holds it: no NaN or infinity (None, the note says why)."""
        found = {**asdict(self), "band": self.band.as_dict()}
        for key in ("value", "delta", "scale", "z", "p_value"):
            found[key] = finite(found[key])
        return found


def judge(value: float, band: Band, reference: float | None = None, exact: bool = False) -> Judgement:
    """`value` against `band`, around `reference` (one run's value) or, when None, the band's mean of n runs.

    `exact` marks a CONTROL band, whose zero spread is a measurement: there only an equal value is noise, and a
    different one has no finite statistic (z and p are None, the verdict says drift). A value that is not a number
    cannot be judged. The verdict is that of this test alone; `judge_family` corrects it for the other metrics.
    """
    from tracking.noise import tails

    around = None if reference is None else 1  # what the test's reference averages: the band's runs, or one run
    runs = band.n if around is None else 1
    reference = band.mean if reference is None else reference
    delta = value - reference
    scale = band.std * math.sqrt(1 + 1 / runs)
    z: float | None = None
    p_value: float | None = None
    if not math.isfinite(value):
        scale, verdict = None, INCONCLUSIVE
        note = f"the candidate's value is {value}: nothing to judge (look at the run's training)"
    elif scale > 0:
        z = delta / scale
        p_value = tails.p_value(z, band.n, 1, around)
        verdict, note = (WITHIN if p_value > band.alpha else EXCEEDS), ""
    elif exact:
        return judge_control([value], band, None if around is None else reference)
    else:
        scale, verdict = None, INCONCLUSIVE
        note = f"{band.n} identical values ({band.mean:.6g}) in {band.source}: no measured spread; {knobs().repeats}"
    return Judgement(
        band.metric, value, reference, runs, delta, scale, z, p_value, verdict, note, band,
    )  # fmt: skip


def judge_control(values: Sequence[float], band: Band, reference: float | None = None) -> Judgement:
    """Candidate runs' finite `values` against a CONTROL band without spread, around `reference` (one run's value)
    or, when None, the band's value: its runs are identical by design, so zero spread is a measurement, and only a
    value equal to it (the tie rule, `tracking.noise.statistics.same`) is noise. Any run that differs is drift,
    however many runs there are (their own spread is not CONTROL's noise), with no finite statistic."""
    runs = band.n if reference is None else 1
    reference = band.mean if reference is None else reference
    value = math.fsum(values) / len(values)
    differ = [found for found in values if not same(found, reference)]
    several = len(values) > 1
    common = {
        "metric": band.metric,
        "value": value,
        "reference": reference,
        "reference_runs": runs,
        "delta": value - reference,
        "scale": 0.0,
        "band": band,
        "candidates": len(values),
        "test": POOLED if several else PREDICTION,
    }
    identical = f"the {band.n} identical runs ({band.mean:.6g})"
    if not differ:
        equal = f"all {len(values)} candidate runs equal" if several else "equal to"
        return Judgement(z=0.0, p_value=1.0, verdict=WITHIN, note=f"CONTROL: {equal} {identical}", **common)
    counts = {found: differ.count(found) for found in sorted(differ)}
    shown = [f"{found:.6g}" + (f" x{count}" if count > 1 else "") for found, count in counts.items()]
    shown = shown if len(shown) <= SHOWN else [*shown[:SHOWN], "..."]
    which = f"{len(differ)} of {len(values)} candidate runs ({', '.join(shown)})"
    return Judgement(
        z=None,
        p_value=None,
        verdict=EXCEEDS,
        note=f"CONTROL: {which if several else 'the value'} differ{'' if several else 's'} from {identical}, "
        "which any drift does; no finite statistic",
        **common,
    )


def direction(delta: float, mode: str | None) -> str:
    """Whether a gap is `better` or `worse` for a metric to `max` or `min` (Keras's `mode`); `same` for none,
    '' when the metric's mode is not known."""
    if mode not in ("max", "min"):
        return ""
    if delta == 0:
        return "same"
    return "better" if (delta > 0) == (mode == "max") else "worse"
