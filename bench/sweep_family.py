"""A sweep judged as one family (issue 66), by Monte Carlo: false alarms, power, the winner's curse and its cure.

Each trial: n = 5 band runs and K candidates of N = 3 runs, test_accuracy under issue 47's four noise models
(`verdict_quality.FOUR_NOISE`: normal, t(3), 10% bad seeds 5 stds worse, accuracy capped at 356/360), test_loss
normal. Each check's p is the verdict's (`tracking.noise.tails.p_values`, vectorised as `verdict_quality.flagged`
is), the family's decision `tracking.noise.sweep.rejections`, which `judge_sweep` calls; `judge_sweep` itself runs
the first trials of each cell and must agree check for check. Rates: 95% Wilson interval and Monte Carlo error.

- `false-alarms`: K = 1, 5, 10, 20 candidates none of which changes anything: how often the sweep calls any
  candidate beyond noise, judged as one family (Holm over K·2 tests; Benjamini-Hochberg, which under no effect at
  all is the same error) and as K separate experiments (each its own Holm over 2 metrics, what each compare stage
  says today), and how often one of those separate verdicts is a "worse" (which fails CI under fail_on_drift).
  Goal: the family's rate at most 5% plus 1.96 Monte Carlo errors.
- `power`: one candidate truly 3 stds better (capped: worse, it cannot rise) among K: found by the family, against
  K separate experiments, at the default design and larger ones.
- `bias`: the best of 8 by its mean, then 3 fresh runs of it judged alone (`judge_confirmation`): the selected gap,
  the confirmed gap and the truth, and how often the confirmed gap's printed interval covers the truth.
- `study`: the tuning playbook's study (`tracking.noise.study.judge_study`), 3 values of a scientific
  hyperparameter with 8 nuisance settings each: how often a value is called better where none matters, and how
  often the one value 3 stds better is found, against each value's best judged as one plain candidate.
- `within`: K candidates without effect through `judge_sweep` itself at the default min_effect (normal noise):
  how often a candidate, and the whole sweep, is called within noise at the family's levels.
- `cost`: the trainings a sweep of 8 costs against 8 plain experiments, from params.yaml's defaults.
- `expected-best`: how often `expected_best`'s bootstrap band (the 2.5 to 97.5% percentiles of the curve over
  resampled trials) covers the true expected best of n normal trials: it is not a 95% interval for n above 1.

Run from the project root: `nice -n 10 .venv/bin/python bench/sweep_family.py [--trials 4000] [--only SECTION]`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verdict_quality import BAD_SHIFT, CAPPED, FOUR_NOISE, _capped_std, _wilson_bounds

from tracking.noise.policy import EXCEEDS, WITHIN, WITHIN_TOLERANCE
from tracking.noise.sweep import FDR, HOLM, SweepCandidate, judge_sweep, rejections

ALPHA = 0.05
BAND_RUNS, CANDIDATE_RUNS, CONFIRMATION_RUNS = 5, 3, 3
SWEEPS = (1, 5, 10, 20)
SHIFT = 3.0
# Each model's true std (the generator's units): t(3) is scaled to 1, 10% bad seeds at 5 stds spread more.
TRUE_STD = {
    "normal": 1.0,
    "t(3)": 1.0,
    "10% bad seeds at 5 stds": math.sqrt(1 + BAD_SHIFT**2 * 0.1 * 0.9),
    CAPPED: _capped_std(),
}
# Trials of each cell that also go through `judge_sweep`, check for check.
CHECKED = 40
# compare.min_effect far beyond any gap: no verdict asks what would decide it (only false alarms are counted).
FAR = 1e6


def rate(hits: int, trials: int) -> str:
    """hits/trials, its 95% Wilson interval and its Monte Carlo error, as text."""
    low, high = _wilson_bounds(hits, trials)
    share = hits / trials
    return f"{100 * share:.1f}% ({100 * low:.1f}-{100 * high:.1f}%, MC error {100 * math.sqrt(share * (1 - share) / trials):.1f})"


def draws(rng: np.random.Generator, noise: str, trials: int, k: int, n: int, runs: int, shifts: np.ndarray):
    """A trial's band and K candidates for both metrics: accuracy (the model's units) and loss (normal), the
    candidates' accuracy moved by `shifts` (one per candidate)."""
    draw = FOUR_NOISE[noise]
    band = draw(rng, (trials, n), 0.0)
    accuracy = np.stack([draw(rng, (trials, runs), float(shift)) for shift in shifts], axis=1)
    return band, accuracy, rng.standard_normal((trials, n)), rng.standard_normal((trials, k, runs))


def statistics(band: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Per trial and candidate, the verdict's t of the candidate's runs against the band (the pooled t)."""
    n, runs = band.shape[1], candidates.shape[2]
    spread = band.var(axis=1, ddof=1)[:, None] * (n - 1) + (
        candidates.var(axis=2, ddof=1) * (runs - 1) if runs > 1 else 0
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        return (candidates.mean(axis=2) - band.mean(axis=1)[:, None]) / np.sqrt(
            spread / (n + runs - 2) * (1 / n + 1 / runs)
        )


def p_values(band: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Per trial and candidate, the verdict's p (`tracking.noise.tails.p_values` of `statistics`; NaN where the
    band's runs tie: `inconclusive`, out of the family)."""
    from tracking.noise.tails import p_values as calibrated

    t = statistics(band, candidates)
    found = calibrated(np.nan_to_num(t).ravel(), band.shape[1], candidates.shape[2]).reshape(t.shape)
    found[(band == band[:, :1]).all(axis=1)] = np.nan
    return found


def family(p: np.ndarray, method: str) -> np.ndarray:
    """Per trial, which of its K·M checks (p: trials x K x M) the family rejects (`rejections`)."""
    out = np.zeros(p.shape, dtype=bool)
    for trial in range(len(p)):
        flat = p[trial].ravel()
        tested = np.flatnonzero(~np.isnan(flat))
        chosen = out[trial].ravel()
        chosen[tested] = rejections(list(flat[tested]), ALPHA, method)
        out[trial] = chosen.reshape(p.shape[1:])
    return out


def separately(p: np.ndarray) -> np.ndarray:
    """Per trial and candidate, which checks its own verdict rejects (Holm over its M metrics: a family of one)."""
    return family(p.reshape(-1, 1, p.shape[2]), HOLM).reshape(p.shape)


def swept(noise: str, trial: int, band, accuracy, loss_band, loss, min_effect=None):
    """`judge_sweep` of one trial's band and candidates (c0, c1, ...), as the metrics' values they stand for."""
    centre, scale = (0.0, 1.0) if noise == CAPPED else (0.9, 0.01)
    names = range(accuracy.shape[1])
    return judge_sweep(
        {"test_accuracy": list(centre + scale * band[trial]), "test_loss": list(0.3 + 0.02 * loss_band[trial])},
        [
            SweepCandidate(
                f"c{k}",
                {
                    "test_accuracy": list(centre + scale * accuracy[trial, k]),
                    "test_loss": list(0.3 + 0.02 * loss[trial, k]),
                },
            )
            for k in names
        ],
        modes={"test_accuracy": "max", "test_loss": "min"},
        alpha=ALPHA,
        min_effect=min_effect,
    )


def checked(noise: str, band, accuracy, loss_band, loss, rejected: np.ndarray) -> tuple[int, int]:
    """How many of the first `CHECKED` trials `judge_sweep` decides check for check as the vectorised path does."""
    count, agree = min(CHECKED, len(band)), 0
    for trial in range(count):
        found = swept(noise, trial, band, accuracy, loss_band, loss, {"test_accuracy": FAR, "test_loss": FAR})
        rows = {row.name: row for row in found.rows}
        decided = [
            [check.verdict in (EXCEEDS, WITHIN_TOLERANCE) for check in rows[f"c{k}"].checks] for k in range(len(rows))
        ]
        agree += bool((np.array(decided) == rejected[trial]).all())
    return agree, count


def false_alarms(rng: np.random.Generator, trials: int) -> None:
    """K candidates, none of which changes anything: how often the sweep flags one."""
    print(
        f"no candidate changes anything; n={BAND_RUNS} band runs, N={CANDIDATE_RUNS} runs a candidate, 2 metrics, "
        f"alpha {ALPHA}, {trials} sweeps a cell (goal: the family at most 5% plus 1.96 MC errors):"
    )
    print(
        "| noise | K | family (Holm over 2K tests) | family (Benjamini-Hochberg) | K separate verdicts | a separate 'worse' | judge_sweep agrees |\n| --- | ---: | --- | --- | --- | --- | --- |"
    )
    for noise in FOUR_NOISE:
        for k in SWEEPS:
            band, accuracy, loss_band, loss = draws(rng, noise, trials, k, BAND_RUNS, CANDIDATE_RUNS, np.zeros(k))
            p = np.stack([p_values(band, accuracy), p_values(loss_band, loss)], axis=2)
            holm_flags, fdr_flags, alone = family(p, HOLM), family(p, FDR), separately(p)
            gaps = np.stack(
                [
                    accuracy.mean(axis=2) - band.mean(axis=1)[:, None],
                    loss.mean(axis=2) - loss_band.mean(axis=1)[:, None],
                ],
                axis=2,
            )
            worse = (alone & (gaps * np.array([1.0, -1.0]) < 0)).any(axis=(1, 2))
            agree, count = checked(noise, band, accuracy, loss_band, loss, holm_flags)
            share = holm_flags.any(axis=(1, 2)).mean()
            mark = "holds" if share <= ALPHA + 1.96 * math.sqrt(share * (1 - share) / trials) else "MISSES"
            print(
                f"| {noise} | {k} | {rate(int(holm_flags.any(axis=(1, 2)).sum()), trials)} {mark} | "
                f"{rate(int(fdr_flags.any(axis=(1, 2)).sum()), trials)} | {rate(int(alone.any(axis=(1, 2)).sum()), trials)} | "
                f"{rate(int(worse.sum()), trials)} | {agree} of {count} |"
            )


def power(rng: np.random.Generator, trials: int) -> None:
    """One candidate truly 3 stds off among K: how often the family finds it, and K separate verdicts would."""
    print(
        f"one candidate truly {SHIFT:g} stds better (capped accuracy: worse) among K, the others unchanged; found = "
        "its test_accuracy beyond noise in the right direction:"
    )
    print(
        "| noise | n, N | K | found by the family (Holm) | found alone (its own verdict) | another falsely flagged (family) |\n| --- | --- | ---: | --- | --- | --- |"
    )
    for noise in FOUR_NOISE:
        sign = -1.0 if noise == CAPPED else 1.0
        for n, runs in ((BAND_RUNS, CANDIDATE_RUNS), (10, 5), (20, 5)):
            for k in SWEEPS:
                shifts = np.zeros(k)
                shifts[0] = sign * SHIFT * TRUE_STD[noise]
                band, accuracy, loss_band, loss = draws(rng, noise, trials, k, n, runs, shifts)
                p = np.stack([p_values(band, accuracy), p_values(loss_band, loss)], axis=2)
                right = sign * (accuracy[:, 0].mean(axis=1) - band.mean(axis=1)) > 0
                flags, alone = family(p, HOLM), separately(p)
                others = flags[:, 1:].any(axis=(1, 2)) if k > 1 else np.zeros(trials, dtype=bool)
                print(
                    f"| {noise} | {n}, {runs} | {k} | {rate(int((flags[:, 0, 0] & right).sum()), trials)} | "
                    f"{rate(int((alone[:, 0, 0] & right).sum()), trials)} | {rate(int(others.sum()), trials)} |"
                )


def mean_interval(values: np.ndarray) -> str:
    """A mean with its 95% normal interval, in the true std's units."""
    half = 1.96 * values.std(ddof=1) / math.sqrt(len(values))
    return f"{values.mean():+.3f} ({values.mean() - half:+.3f} to {values.mean() + half:+.3f})"


def bias(rng: np.random.Generator, trials: int) -> None:
    """The best of 8 picked by its mean, then confirmed on fresh runs: the gaps against the truth."""
    from tracking.noise.twosample import gap_interval

    k = 8
    print(
        f"K={k} candidates, the best by its test_accuracy mean picked, then {CONFIRMATION_RUNS} fresh runs of it "
        "judged alone against the same band; gaps in the noise's true stds, mean (95% interval):"
    )
    print(
        "| noise | sweep | selected gap | confirmed gap | true shift of the selected | confirmed - true | the confirmed interval covers the true shift |\n| --- | --- | --- | --- | --- | --- | --- |"
    )
    for noise in FOUR_NOISE:
        cases = [("none changes anything", 0.0)]
        cases += (
            [] if noise == CAPPED else [(f"one {size:g} std{'s' * (size != 1)} better", size) for size in (1.0, SHIFT)]
        )
        for case, size in cases:
            std = TRUE_STD[noise]
            shifts = np.zeros(k)
            shifts[0] = size * std
            band, accuracy, _, _ = draws(rng, noise, trials, k, BAND_RUNS, CANDIDATE_RUNS, shifts)
            gaps = accuracy.mean(axis=2) - band.mean(axis=1)[:, None]
            chosen = gaps.argmax(axis=1)
            selected = gaps[np.arange(trials), chosen]
            truth = shifts[chosen]
            fresh = np.stack([FOUR_NOISE[noise](rng, (1, CONFIRMATION_RUNS), float(shift))[0] for shift in truth])
            confirmed = fresh.mean(axis=1) - band.mean(axis=1)
            covered = 0
            for trial in range(trials):
                found = gap_interval(band[trial], fresh[trial], ALPHA)
                covered += found.low is not None and found.low <= truth[trial] <= found.high
            print(
                f"| {noise} | {case} | {mean_interval(selected / std)} | {mean_interval(confirmed / std)} | "
                f"{mean_interval(truth / std)} | {mean_interval((confirmed - truth) / std)} | {rate(covered, trials)} |"
            )


def within(rng: np.random.Generator, trials: int) -> None:
    """K candidates without effect judged by `judge_sweep` itself at the default min_effect: how often each is
    called within noise in the family (its claims at the family's levels) and how often the whole sweep is."""
    print(
        f"no candidate changes anything, normal noise, default min_effect, judge_sweep itself ({trials} sweeps a "
        "row): a candidate within noise | the sweep within noise | a candidate undecided"
    )
    print(
        "| K | a candidate within noise | the sweep within noise | a candidate undecided |\n| ---: | --- | --- | --- |"
    )
    for k in SWEEPS:
        band, accuracy, loss_band, loss = draws(rng, "normal", trials, k, BAND_RUNS, CANDIDATE_RUNS, np.zeros(k))
        each = whole = undecided = 0
        for trial in range(trials):
            found = swept("normal", trial, band, accuracy, loss_band, loss)
            each += len(found.within)
            undecided += len(found.undecided)
            whole += found.verdict == WITHIN
        print(f"| {k} | {rate(each, trials * k)} | {rate(whole, trials)} | {rate(undecided, trials * k)} |")


def cost() -> None:
    """The trainings of a sweep of 8 against 8 plain experiments, from params.yaml's defaults."""
    from tracking.config.params_file import load_params

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    calibration = params.calibration.repeats * len(params.calibration.variants)
    runs = params.compare.candidate_repeats if isinstance(params.compare.candidate_repeats, int) else CANDIDATE_RUNS
    sweep = calibration + 8 * runs + CONFIRMATION_RUNS
    print(
        f"trainings (params.yaml: calibration.repeats {params.calibration.repeats} x {len(params.calibration.variants)} "
        f"variants = {calibration}, compare.candidate_repeats {runs}, {CONFIRMATION_RUNS} confirmation runs):"
    )
    print(
        f"- a sweep of 8: calibration once + 8 x {runs} candidate runs + {CONFIRMATION_RUNS} confirmation runs = {sweep}"
    )
    print(f"- 8 plain experiments reusing one calibration: {calibration} + 8 x {runs} = {calibration + 8 * runs}")
    print(f"- 8 plain experiments each calibrating anew: 8 x ({calibration} + {runs}) = {8 * (calibration + runs)}")


def study(rng: np.random.Generator, trials: int) -> None:
    """The playbook's study: 3 values of a scientific hyperparameter, 8 nuisance settings each; each value's best
    judged as the largest of 8 (`judge_study`), Holm over the values, against the best taken as one plain
    candidate; none matters, or every setting of one value is 3 stds better."""
    from tracking.noise.study import best_of_p, judge_study
    from tracking.noise.tails import p_values as calibrated

    values, settings = 3, 8
    print(
        f"a study: {values} values x {settings} nuisance settings, {CANDIDATE_RUNS} runs each, {BAND_RUNS} band runs; "
        "a value is called better when its best beats the band (Holm over the values at alpha 0.05):"
    )
    print(
        "| noise | study | judge_study: a value better | each value's best as one plain candidate | judge_study agrees |\n| --- | --- | --- | --- | --- |"
    )
    for noise in FOUR_NOISE:
        cases = [("none matters", 0.0)] + ([] if noise == CAPPED else [(f"one value {SHIFT:g} stds better", SHIFT)])
        for case, size in cases:
            shifts = np.zeros(values * settings)
            shifts[:settings] = size * TRUE_STD[noise]
            band, accuracy, _, _ = draws(rng, noise, trials, values * settings, BAND_RUNS, CANDIDATE_RUNS, shifts)
            n, runs = BAND_RUNS, CANDIDATE_RUNS
            gaps = (accuracy.mean(axis=2) - band.mean(axis=1)[:, None]).reshape(trials, values, settings)
            t = statistics(band, accuracy).reshape(trials, values, settings)
            best = gaps.argmax(axis=2)
            chosen = np.take_along_axis(t, best[..., None], axis=2)[..., 0]
            tied = (band == band[:, :1]).all(axis=1)
            found, plain = np.zeros(trials, dtype=bool), np.zeros(trials, dtype=bool)
            decided = []
            for trial in np.flatnonzero(~tied):
                p = [best_of_p(float(value), n, (runs,) * settings) for value in chosen[trial]]
                better = [flag and chosen[trial, k] > 0 for k, flag in enumerate(rejections(p, ALPHA, HOLM))]
                decided.append((trial, better))
                found[trial] = better[0] if size else any(better)
                alone = list(calibrated(chosen[trial], n, runs))
                flags = [flag and chosen[trial, k] > 0 for k, flag in enumerate(rejections(alone, ALPHA, HOLM))]
                plain[trial] = flags[0] if size else any(flags)
            agree = 0
            for trial, better in decided[:CHECKED]:
                arms = {
                    f"v{k}": [
                        SweepCandidate(f"v{k}-s{j}", {"test_accuracy": list(accuracy[trial, k * settings + j])})
                        for j in range(settings)
                    ]
                    for k in range(values)
                }
                judged = judge_study({"test_accuracy": list(band[trial])}, arms, metric="test_accuracy", mode="max")
                verdicts = {arm.value: arm.verdict == EXCEEDS for arm in judged.arms}
                agree += [verdicts[f"v{k}"] for k in range(values)] == better
            print(
                f"| {noise} | {case} | {rate(int(found.sum()), trials)} | {rate(int(plain.sum()), trials)} | "
                f"{agree} of {min(CHECKED, len(decided))} |"
            )


def expected_best_coverage(rng: np.random.Generator, trials: int) -> None:
    """How often `expected_best`'s 95% interval covers the true expected best of n normal trials."""
    from scipy import integrate, stats

    from tracking.noise.selection import expected_best

    print("expected_best's bootstrap band (2.5-97.5% percentiles) covers the true expected best of n normal trials:")
    for size in (8, 20):
        counts = sorted({1, 2, 4, size})
        hits = dict.fromkeys(counts, 0)
        for _ in range(trials):
            for n, _mean, low, high in expected_best(list(rng.standard_normal(size)), "max", counts):
                truth = integrate.quad(lambda x, n=n: x * n * stats.norm.pdf(x) * stats.norm.cdf(x) ** (n - 1), -9, 9)[
                    0
                ]
                hits[n] += low <= truth <= high
        print(f"- {size} trials: " + "; ".join(f"n={n}: {rate(hits[n], trials)}" for n in counts))


# Each section's trials: --trials divided by this (their trials cost more).
SHARE = {"power": 2, "bias": 2, "study": 2, "within": 20, "expected-best": 8}
SECTIONS = {
    "false-alarms": false_alarms,
    "power": power,
    "bias": bias,
    "study": study,
    "within": within,
    "cost": lambda rng, trials: cost(),
    "expected-best": expected_best_coverage,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000, help="sweeps a cell (default 4000)")
    parser.add_argument("--only", action="append", choices=list(SECTIONS), help="run only these sections")
    args = parser.parse_args()
    for index, (name, section) in enumerate(SECTIONS.items()):
        if args.only and name not in args.only:
            continue
        started = time.perf_counter()
        trials = max(args.trials // SHARE.get(name, 1), 1)
        section(np.random.default_rng(66 + index), trials)
        print(f"({name}: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
        print()


if __name__ == "__main__":
    main()
