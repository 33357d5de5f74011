"""Noise statistics: how much a metric moves by chance, and whether a new value moved more than that.

- A `Band` summarises n runs of one metric: mean, sample standard deviation (ddof=1) and a prediction interval
  for one new run, mean ± c · s · sqrt(1 + 1/n), with c the verdict's critical t (`tracking.noise.tails`: the
  largest of t(1-α/2, n-1) and the quantiles of the same statistic under heavier-tailed noise).
- Predictive churn is the fraction of examples whose predicted class differs between two runs
  (disagreement, not agreement); for regression its analogue is the mean absolute difference between two
  runs' test predictions divided by the standard deviation of the test targets (`REGRESSION_CHURN`).
- Ties: two values closer than `TIE` of their magnitude are one value (`tied`, `same`), in every command that
  judges, bands or compares: a spread inside float32's rounding error is residue, not noise.
- Weight distance is the L2 distance between two runs' flattened weights, each scaled to unit length.
- Pairwise matrices of both come from one matrix product, so 1,000 runs stay fast.

Which band judges a value, and the test itself, are the policy of `tracking.noise.policy`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tracking.config.params import MULTILABEL, REGRESSION
from tracking.errors import NoiseError

# What a metric can be, by its name: outside it an interval says nothing (accuracy above 1).
_UNIT_RANGE = ("accuracy", "_fpr", "_fnr", "churn")


def metric_range(name: str) -> tuple[float, float]:
    """The values a metric can take, by its name: accuracies, error rates and churn in [0, 1], losses at 0 or
    above, anything else unbounded."""
    return (0.0, 1.0) if any(part in name for part in _UNIT_RANGE) else (0.0, math.inf) if "loss" in name else (
        -math.inf, math.inf
    )  # fmt: skip


DDOF = 1
CLASSIFICATION_CHURN = "fraction of test predictions whose class differs between two runs"
MULTILABEL_CHURN = "fraction of test label decisions (present or not) that differ between two runs"
REGRESSION_CHURN = "mean absolute difference of two runs' test predictions / std of the test targets"
# The tie rule: values closer than this share of the larger magnitude are one value. It is float32's rounding error,
# 2**-24 (Keras computes metrics in float32; a value logged as float32(355/360) lies 6.6e-9 from the float64 one), so
# float residue is never taken for spread, while values float32 tells apart (0.9 and 0.9000001) stay apart; 1e-12
# (float64 residue alone) missed the float32 case.
TIE = float(np.finfo(np.float32).eps) / 2
# A band without spread has no interval that predicts a new run: what its zero width means instead.
IDENTICAL = (
    "none: the {n} runs are identical (no spread); as CONTROL only an equal value is noise, any other band of "
    "identical runs judges nothing (raise the repeats)"
)


@dataclass(frozen=True)
class Band:
    """The spread of one metric over n runs, with the interval one new run falls in with probability 1-α."""

    metric: str
    n: int
    mean: float
    std: float
    alpha: float
    low: float
    high: float
    source: str
    ddof: int = DDOF
    interval: str = "prediction interval for one new run (t, widened for heavy-tailed noise)"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def residue(gap: float, magnitude: float) -> bool:
    """Whether `gap` is float residue of values of size `magnitude` (`TIE`): the one tie rule."""
    return abs(gap) <= TIE * abs(magnitude)


def tied(values: Sequence[float]) -> bool:
    """Whether the finite `values` are one value by the tie rule (`residue`), so they have no spread."""
    array = np.asarray(values, dtype=float)
    return residue(float(array.max() - array.min()), float(np.abs(array).max()))


def same(a: float, b: float) -> bool:
    """Whether two finite values are one value by the tie rule (`residue`)."""
    return tied([a, b])


def band_from_values(metric: str, values: Sequence[float], alpha: float, source: str) -> Band:
    """The band of `values` (one per run); at least two finite values are needed."""
    array = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(array) < 2:
        raise NoiseError(
            f"metric '{metric}' has {len(array)} run(s) in {source}; a band needs at least 2: "
            "select more runs or run more repeats"
        )
    # Tied values (`tied`) have no spread and their median as mean: a float sum divided by n can miss the mean by one
    # ulp and leave a std of about 1e-16 (five runs at 355/360), or a float32 value 6.6e-9 off (`TIE`), either of which
    # would judge any gap as far beyond noise.
    if tied(array):
        return band_from_summary(metric, float(np.median(array)), 0.0, len(array), alpha, source)
    return band_from_summary(metric, float(array.mean()), float(array.std(ddof=DDOF)), len(array), alpha, source)


def band_from_summary(metric: str, mean: float, std: float, n: int, alpha: float, source: str) -> Band:
    """A band from declared statistics (e.g. a published mean, std and n). A std within the tie rule's residue of
    the mean (`residue`; a record written before the rule) is no spread: the band's runs are identical, and its
    zero-width interval says so instead of predicting a new run."""
    from tracking.noise.tails import critical

    if n < 2 or not std >= 0 or not 0 < alpha < 1:
        raise NoiseError(
            f"band for '{metric}' needs n >= 2, std >= 0 and 0 < alpha < 1; got n={n}, std={std}, alpha={alpha}"
        )
    if residue(std, mean):
        return Band(metric, n, mean, 0.0, alpha, mean, mean, source, interval=IDENTICAL.format(n=n))
    half = critical(alpha, n, 1) * std * math.sqrt(1 + 1 / n)
    return Band(metric=metric, n=n, mean=mean, std=std, alpha=alpha, low=mean - half, high=mean + half, source=source)


def format_p(p_value: float | None) -> str:
    """A p-value as reports print it: three significant digits, never 0 (`< 1e-16` below double precision's
    resolution of a tail probability near 1), `n/a` for none."""
    if p_value is None:
        return "n/a"
    return "< 1e-16" if p_value < 1e-16 else f"{p_value:.3g}"


def finite(value: float | None) -> float | None:
    """`value` as JSON can hold it: None for NaN or infinity (JSON has neither), the float otherwise."""
    return None if value is None or not math.isfinite(value) else float(value)


def strict(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as strict JSON holds it: every NaN or infinite float becomes None, and `non_finite` names each
    (its path, e.g. `runs.3.metrics.test_loss`, and what it was), so a reader sees why the value is null."""
    found: dict[str, str] = {}

    def clean(value: Any, path: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            found[path] = str(value)
            return None
        if isinstance(value, dict):
            return {key: clean(item, f"{path}.{key}" if path else str(key)) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [clean(item, f"{path}.{index}") for index, item in enumerate(value)]
        return value

    cleaned = clean(record, "")
    return {**cleaned, "non_finite": found} if found else cleaned


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm-Bonferroni step-down: which hypotheses are rejected, controlling the family-wise error at alpha."""
    order = np.argsort(p_values)
    rejected = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected


def churn(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of examples whose predicted class differs between two runs (disagreement)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise NoiseError(f"predictions differ in shape ({a.shape} vs {b.shape}); compare runs on the same test set")
    return float(np.mean(a != b))


def regression_churn(a: np.ndarray, b: np.ndarray, target_std: float) -> float:
    """Mean absolute difference between two runs' predictions, in standard deviations of the test targets."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise NoiseError(f"predictions differ in shape ({a.shape} vs {b.shape}); compare runs on the same test set")
    return float(np.mean(np.abs(a - b)) / _scale(target_std))


def weight_distance(a: np.ndarray, b: np.ndarray) -> float:
    """L2 distance between two flattened weight vectors after scaling each to unit length."""
    ua, ub = _unit(np.asarray(a, dtype=np.float64).ravel()), _unit(np.asarray(b, dtype=np.float64).ravel())
    return float(np.linalg.norm(ua - ub))


def pairwise_churn(predictions: np.ndarray) -> np.ndarray:
    """(R, R) churn between every pair of R runs' predicted classes, given as an (R, N, ...) integer array: a
    sample's every label (a mask's pixels, a multi-hot row's labels) counts as one prediction."""
    predictions = np.asarray(predictions)
    predictions = predictions.reshape(len(predictions), -1)
    runs, examples = predictions.shape
    agree = np.zeros((runs, runs), dtype=np.float64)
    for label in np.unique(predictions):
        hits = (predictions == label).astype(np.float32)
        agree += hits @ hits.T
    return 1.0 - agree / examples


def pairwise_regression_churn(predictions: np.ndarray, target_std: float) -> np.ndarray:
    """(R, R) `regression_churn` between every pair of R runs' predictions, given as an (R, N, ...) array."""
    flat = np.asarray(predictions, dtype=np.float64).reshape(len(predictions), -1)
    matrix = np.stack([np.abs(row[None, :] - flat).mean(axis=1) for row in flat])
    return matrix / _scale(target_std)


def pairwise_disagreement(predictions: np.ndarray, task: str, target_std: float | None = None) -> np.ndarray:
    """The task's pairwise churn: predicted classes for classification, scaled differences for regression."""
    if task == REGRESSION:
        return pairwise_regression_churn(predictions, target_std if target_std is not None else 1.0)
    return pairwise_churn(predictions)


def churn_measure(task: str) -> str:
    """What churn means for `task`, as the reports state it."""
    return {REGRESSION: REGRESSION_CHURN, MULTILABEL: MULTILABEL_CHURN}.get(task, CLASSIFICATION_CHURN)


def pairwise_weight_distance(weights: np.ndarray, block: int = 128) -> np.ndarray:
    """(R, R) unit-normalised L2 distances between R runs' flattened weights, given as (R, P).

    Uses ||u_i - u_j|| = sqrt(2 - 2 cos_ij) with the Gram matrix accumulated in float64, block by block:
    float32 would leave distances near 1e-3 between identical runs, and a float64 copy of all the
    weights would double the memory.
    """
    weights = np.asarray(weights)
    runs = len(weights)
    gram = np.empty((runs, runs), dtype=np.float64)
    for start in range(0, runs, block):
        rows = weights[start : start + block].astype(np.float64)
        for other in range(0, runs, block):
            gram[start : start + block, other : other + block] = (
                rows @ weights[other : other + block].astype(np.float64).T
            )
    norms = np.sqrt(np.diag(gram))
    norms[norms == 0] = 1.0
    cosine = np.clip(gram / norms[:, None] / norms[None, :], -1.0, 1.0)
    distance = np.sqrt(np.clip(2.0 - 2.0 * cosine, 0.0, None))
    np.fill_diagonal(distance, 0.0)
    return distance


def off_diagonal_summary(matrix: np.ndarray) -> dict[str, float]:
    """Mean and max over distinct pairs (the upper triangle) of a pairwise matrix."""
    upper = matrix[np.triu_indices(len(matrix), k=1)]
    if upper.size == 0:
        raise NoiseError("a pairwise matrix needs at least 2 runs")
    return {"mean": float(upper.mean()), "max": float(upper.max()), "pairs": int(upper.size)}


def _scale(target_std: float) -> float:
    """The targets' std as a divisor: constant targets leave the differences unscaled rather than infinite."""
    return float(target_std) if target_std and math.isfinite(target_std) else 1.0


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(vector)
    return vector / norm if norm else vector
