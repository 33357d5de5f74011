"""Bands and group comparisons over existing MLflow runs, chosen by experiment and filter string.

Runs without the metric are skipped and counted; fewer than two runs is an error, and so are runs that mix
calibrations, variants, or calibration repeats with other runs (one band over them pools different spreads).
A band's interval is clipped to its metric's range; a band of identical runs has none. `compare_groups` puts two
groups side by side: each std, their ratio (without an interval: `NO_RATIO_INTERVAL`), Welch's t-test on the means
and the Brown-Forsythe test (Levene's test centred on the median) on the spreads, with the power the group sizes give
it; `compare_metric_groups` corrects every metric's tests together (Holm) and gives means and spreads each one of
judge's three outcomes: they differ, they agree (only where the test could see a difference that matters), or
inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracking.errors import NoiseError, RunSelectionError, TrackingServerError
from tracking.names import MLFLOW_PARENT_RUN_TAG, NOISE_VARIANT_TAG, tag_is
from tracking.noise.metric_family import min_effect
from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, WITHIN
from tracking.noise.statistics import DDOF, band_from_values, finite, format_p, holm, metric_range, tied
from tracking.store.reads import all_runs, experiment_named, run_metrics

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

# The fewest runs per group for a spread verdict: with 2 runs each run's deviation from the group's median is the
# same, so Brown-Forsythe compares two constants and calls any two spreads different (p < 1e-16); 3 is hardly
# better (one deviation is 0).
MIN_SPREAD_RUNS = 4
# The smallest std ratio that matters (either way): "spreads agree" needs Brown-Forsythe to detect it 80% of the time.
SPREAD_RATIO = 2.0
POWER = 0.8
# Why the std ratio has no interval (docs/noise-statistics.md#intervals-that-cover): issue 34's and the bench's
# figures for the F interval and the stratified percentile bootstrap, the two it printed.
NO_RATIO_INTERVAL = (
    "no interval: at 50 vs 50 runs under heavy-tailed noise the F interval covers 62% and a bootstrap's 90%, "
    "short of 95%"
)
# Simulated trials behind the power of Brown-Forsythe at the ratio shown (about ±0.02), and their seed.
SPREAD_TRIALS, SPREAD_SEED = 2000, 1


@dataclass(frozen=True)
class MetricValues:
    """One metric's values over the selected runs, and how many runs lacked it."""

    metric: str
    values: list[float]
    skipped: int


def fetch_metric_values(
    client: MlflowClient, experiment: str, filter_string: str, metrics: list[str]
) -> dict[str, MetricValues]:
    """The latest value of each metric in every run of `experiment` matching `filter_string`."""
    from mlflow.exceptions import MlflowException

    try:
        found = experiment_named(client, experiment)
    except MlflowException as err:
        raise TrackingServerError(
            f"MLflow store cannot be read ({str(err).splitlines()[0]}); check MLFLOW_TRACKING_URI"
        ) from err
    if found is None:
        raise RunSelectionError(
            f"MLflow experiment '{experiment}' not found; check --experiment (see `mlflow experiments search`)"
        )
    try:
        runs = all_runs(client, [found.experiment_id], filter_string)
    except MlflowException as err:
        raise RunSelectionError(
            f"filter {filter_string!r} rejected by MLflow: {str(err).splitlines()[0]}; fix the filter string "
            "(e.g. metrics.test_accuracy > 0.9, tags.\"noise.variant\" = 'algo')"
        ) from err
    _refuse_a_mix([run for run in runs if any(metric in run.data.metrics for metric in metrics)], filter_string)
    if not runs:
        matching = f" match filter {filter_string!r}" if filter_string else ""
        raise RunSelectionError(
            f"no runs in MLflow experiment '{experiment}'{matching}; run the pipeline there first "
            "(`dvc repro`) or change --experiment / the filter"
        )
    result = {}
    for metric in metrics:
        values = [logged[metric] for logged in map(run_metrics, runs) if metric in logged]
        result[metric] = MetricValues(metric, values, len(runs) - len(values))
    return result


def _refuse_a_mix(runs: list[Run], filter_string: str) -> None:
    """Stop when the runs mix calibration repeats of different calibrations or variants, or repeats with other runs:
    one band over them pools spreads that answer different questions (and the candidates' own changes)."""
    groups: dict[tuple[str, str], int] = {}
    for run in runs:
        variant = run.data.tags.get(NOISE_VARIANT_TAG)
        key = (run.data.tags.get(MLFLOW_PARENT_RUN_TAG, ""), variant) if variant else ("", "")
        groups[key] = groups.get(key, 0) + 1
    if len(groups) < 2:
        return
    found = "; ".join(
        f"{count} repeats of variant {variant} of calibration {parent[:8]}" if variant else f"{count} other runs"
        for (parent, variant), count in groups.items()
    )
    keys = [key for key in groups if key[1]]
    parent, variant = next((key for key in keys if key[1] == "algo"), keys[0])
    raise RunSelectionError(
        f"the runs {'matching ' + repr(filter_string) if filter_string else 'of the experiment'} mix {found}; "
        "a band over them pools different spreads",
        fix="select one calibration's variant, e.g. --filter "
        + _double_quoted(f"{tag_is(MLFLOW_PARENT_RUN_TAG, parent)} and {tag_is(NOISE_VARIANT_TAG, variant)}"),
    )


def _double_quoted(text: str) -> str:
    """`text` as a shell reads it back from double quotes, so a suggested filter pastes as printed: bash runs a
    backquoted name inside double quotes as a command unless its backquotes are escaped."""
    escaped = "".join(f"\\{char}" if char in '"$`\\' else char for char in text)
    return f'"{escaped}"'


def gap_in_range(name: str, interval: tuple[float, float]) -> tuple[float, float]:
    """A gap's interval within what a difference of two of the metric's values can be (±1 for an accuracy)."""
    low, high = metric_range(name)
    return max(interval[0], low - high), min(interval[1], high - low)


def in_range(band: dict[str, Any]) -> dict[str, Any]:
    """The band with its interval clipped to the metric's range (`metric_range`) and `clipped` saying what was
    clipped."""
    name = band["metric"]
    low, high = metric_range(name)
    clipped = [f"{side} {band[side]:.6g} to {bound:g}" for side, bound in (("low", low), ("high", high))
               if (band[side] < bound if side == "low" else band[side] > bound)]  # fmt: skip
    return {
        **band,
        "low": max(band["low"], low),
        "high": min(band["high"], high),
        "clipped": "; ".join(clipped) or None,
    }


def bands(
    client: MlflowClient, experiment: str, filter_string: str, metrics: list[str], alpha: float
) -> dict[str, Any]:
    """The band of each metric over the selected runs, with the count of runs skipped for lacking it."""
    source = f"mlflow:{experiment}" + (f" [{filter_string}]" if filter_string else "")
    out = {}
    for metric, found in fetch_metric_values(client, experiment, filter_string, metrics).items():
        band = band_from_values(metric, found.values, alpha, source)
        # Identical runs predict no interval for a new run: null bounds, and `interval` says why.
        row = in_range(band.as_dict()) if band.std > 0 else {**band.as_dict(), "low": None, "high": None}
        out[metric] = {**row, "skipped_runs": found.skipped}
        if left_out(found.values):
            out[metric]["left_out"] = left_out(found.values)
    return out


def left_out(values: Sequence[float], group: str = "") -> str:
    """The runs whose value is not a finite number, named in one line ('' when none): they are left out."""
    bad = [str(float(value)) for value in values if not math.isfinite(value)]
    if not bad:
        return ""
    named = ", ".join(f"{bad.count(kind)} {kind}" for kind in sorted(set(bad)))
    return f"{group + ': ' if group else ''}{len(bad)} of {len(values)} runs left out ({named})"


def _spread(values: list[float]) -> float:
    """The sample std of finite values, 0 exactly for a tied group (the tie rule, `tied`: float residue too)."""
    import numpy as np

    return 0.0 if tied(values) else float(np.std(values, ddof=DDOF))


def compare_groups(a: list[float], b: list[float], alpha: float) -> dict[str, Any]:
    """Two groups of one metric: stds and their ratio, Welch's t-test on the means and Brown-Forsythe (Levene's test centred on the median) on the spreads
    (`compare_metric_groups` adds the power of its verdict at the ratio shown).
    The p-values are uncorrected here; `compare_metric_groups` applies Holm over every metric and test."""
    import numpy as np
    from scipy import stats

    from tracking.noise.twosample import gap_interval, welch

    dropped = "; ".join(filter(None, (left_out(a, "A"), left_out(b, "B"))))
    a, b = [value for value in a if math.isfinite(value)], [value for value in b if math.isfinite(value)]
    if len(a) < 2 or len(b) < 2:
        raise NoiseError(
            f"each group needs at least 2 runs with a finite value of the metric; got {len(a)} and {len(b)}"
            f"{' (' + dropped + ')' if dropped else ''}: widen the filters or run more repeats"
        )
    std_a, std_b = _spread(a), _spread(b)
    means = welch(b, a, alpha)  # candidate minus baseline: A - B, as scipy's ttest_ind(a, b)
    interval = gap_interval(b, a, alpha)  # A - B's printed 1-alpha interval, as judge's
    flat = [name for name, std in (("A", std_a), ("B", std_b)) if std == 0]
    notes = [dropped] if dropped else []
    if len(a) < MIN_SPREAD_RUNS or len(b) < MIN_SPREAD_RUNS:
        notes.append(
            f"no spread verdict: it needs at least {MIN_SPREAD_RUNS} runs per group, got {len(a)} and {len(b)}"
        )
    if len(flat) == 2:
        notes.append("neither group has spread: no test of means or spreads")
    spread = stats.levene(a, b, center="median") if len(a) >= MIN_SPREAD_RUNS <= len(b) and len(flat) < 2 else None
    if len(flat) == 1:
        notes.append(f"{flat[0]} tied (no spread): no std ratio")
    ratio = None if flat else std_a / std_b
    return {
        "n_a": len(a),
        "n_b": len(b),
        "mean_a": float(np.mean(a)),
        "mean_b": float(np.mean(b)),
        "std_a": std_a,
        "std_b": std_b,
        "ddof": DDOF,
        "std_ratio_a_over_b": finite(ratio),
        "brown_forsythe_power_at_ratio": None,  # set by compare_metric_groups, at the level its verdict tests
        "brown_forsythe_power_at_ratio_that_matters": None,  # SPREAD_RATIO either way, set there too
        "welch_t": finite(means.t),  # None where values so large their variance overflows: no test, not "differ"
        "welch_p": finite(means.p_value),
        "gap_interval": None if interval.low is None else [interval.low, interval.high],
        "brown_forsythe_w": None if spread is None else finite(spread.statistic),
        "brown_forsythe_p": None if spread is None else finite(spread.pvalue),
        "note": "; ".join(notes),
    }


def compare_metric_groups(
    a: dict[str, list[float]], b: dict[str, list[float]], alpha: float
) -> dict[str, dict[str, Any]]:
    """`compare_groups` for each metric, with Holm-Bonferroni at `alpha` over every metric and test it prints (the
    means' and the spreads' of each metric), and a verdict per metric: `means_differ` / `spreads_differ` say whether
    Holm rejected (null: the test was not run), `means_verdict` / `spreads_verdict` give judge's three outcomes."""
    results = {metric: compare_groups(a[metric], b[metric], alpha) for metric in a}
    tests = [(metric, key) for metric in results for key in ("welch_p", "brown_forsythe_p")]
    tested = [(metric, key) for metric, key in tests if results[metric][key] is not None]
    rejected = dict(zip(tested, holm([results[m][k] for m, k in tested], alpha), strict=True))
    level = alpha / max(len(tested), 1)  # Holm's first step: the power of the verdict printed, a floor for later steps
    for metric, row in results.items():
        runs = (row["n_a"], row["n_b"])
        if row["brown_forsythe_p"] is not None:
            row["brown_forsythe_power_at_ratio"] = _spread_power(row["std_ratio_a_over_b"], *runs, level)
            row["brown_forsythe_power_at_ratio_that_matters"] = min(
                _spread_power(ratio, *runs, level) or 0.0 for ratio in (SPREAD_RATIO, 1 / SPREAD_RATIO)
            )
        row["means_differ"] = rejected.get((metric, "welch_p"))
        row["spreads_differ"] = rejected.get((metric, "brown_forsythe_p"))
        means, row["means_verdict"] = _means(metric, row, alpha)
        spreads, row["spreads_verdict"] = _spreads(row)
        row["verdict"] = f"{means}; {spreads}; Holm over {len(tested)} tests at alpha={alpha}" + (
            f" ({row['note']})" if row["note"] else ""
        )
    return results


def _means(metric: str, row: dict[str, Any], alpha: float) -> tuple[str, str]:
    """The means' line and outcome: they differ (Holm rejects Welch's t), agree where the gap's 1-`alpha` interval
    lies inside ± the smallest shift that matters (`tracking.noise.metric_family.min_effect`'s default, from group
    B's mean and std: two one-sided tests, as judge's equivalence), else inconclusive; without a test (neither group
    has spread), inconclusive."""
    if row["welch_p"] is None:
        return "means inconclusive: no test of means", INCONCLUSIVE
    tested = f"Welch p={format_p(row['welch_p'])}"
    if row["means_differ"]:
        return f"means differ ({tested})", EXCEEDS
    tolerance, origin = min_effect(metric, row["mean_b"], {}, row["std_b"] or 0.0)
    low, high = row["gap_interval"] or (-math.inf, math.inf)
    inside = tolerance > 0 and -tolerance <= low and high <= tolerance
    seen = f"the gap's {100 * (1 - alpha):.3g}% interval, {low:.4g} to {high:.4g}"
    if inside:
        return f"means agree within ±{tolerance:.4g} ({tested}; {seen}, lies inside it: {origin})", WITHIN
    return f"means inconclusive ({tested}; {seen}, reaches beyond ±{tolerance:.4g}: {origin})", INCONCLUSIVE


def _spreads(row: dict[str, Any]) -> tuple[str, str]:
    """The spreads' line and outcome: they differ (Holm rejects Brown-Forsythe), agree only where Brown-Forsythe
    detects a std ratio of `SPREAD_RATIO` at least `POWER` of the time at these group sizes, else inconclusive;
    without a test (too few runs, no spread in either group), inconclusive."""
    if row["brown_forsythe_p"] is None:
        return "spreads inconclusive: no spread verdict", INCONCLUSIVE
    tested = f"Brown-Forsythe p={format_p(row['brown_forsythe_p'])}"
    if row["spreads_differ"]:
        return f"spreads differ ({tested})", EXCEEDS
    power = row["brown_forsythe_power_at_ratio_that_matters"]
    sees = f"it detects a std ratio of {SPREAD_RATIO:g} {power:.1%} of the time at n={row['n_a']} vs {row['n_b']}"
    if power >= POWER:
        return f"spreads agree ({tested}; {sees})", WITHIN
    return f"spreads inconclusive ({tested}; {sees}, under {POWER:.0%}: run more)", INCONCLUSIVE


def _spread_power(ratio: float | None, n_a: int, n_b: int, alpha: float) -> float | None:
    """How often Brown-Forsythe at `alpha` flags a true std ratio of `ratio` with groups this size, for normal
    runs (SPREAD_TRIALS seeded trials, so about ±0.02)."""
    import numpy as np
    from scipy import stats

    if ratio is None or not math.isfinite(ratio) or ratio == 0:
        return None
    rng = np.random.default_rng(SPREAD_SEED)
    xa, xb = rng.normal(0, ratio, (SPREAD_TRIALS, n_a)), rng.normal(0, 1, (SPREAD_TRIALS, n_b))
    return float(np.mean(stats.levene(xa, xb, center="median", axis=1).pvalue < alpha))
