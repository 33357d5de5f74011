"""`calibration/noise.json`, the calibration's record, read and written through one typed class.

The calibrate stage writes it; the compare stage, `tracking diff`, `tracking plan` and the reports read it. Each
reads it here, so its keys are named once and a malformed or older file is one `error:` line, not a KeyError.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tracking.config.params import CLASSIFICATION
from tracking.errors import RunStateError
from tracking.layout import CALIBRATE, NOISE_FILE
from tracking.noise.statistics import CLASSIFICATION_CHURN, band_from_summary, band_from_values, strict

REFRESH = f"re-run the calibration (`dvc repro --force {CALIBRATE}`)"
# What a calibration's execution decided rather than measured (ids, places, reuse), for the record and for each
# repeat: logged with the record to MLflow and kept in this checkout's link (tracking/store/recorded.py), never in
# the DVC file, which every clone that trains the same repeats must write alike.
EXECUTION = ("parent_run_id", "executor", "reused")
REPEAT_EXECUTION = ("run_id", "where", "reused")
# Intervals stored with a calibration use this alpha; judging re-derives them at its own (compare.alpha), so
# changing that never re-runs the calibration.
STORED_ALPHA = 0.05


def metric_bands(runs: list[dict[str, Any]], variant: str, alpha: float = STORED_ALPHA) -> dict[str, dict[str, Any]]:
    """The band of every metric that at least two of `runs` (one variant's, each with its `metrics`) logged as a
    finite number; a metric a run lacks counts as NaN there."""
    values = {
        name: [run["metrics"].get(name, math.nan) for run in runs]
        for name in dict.fromkeys(name for run in runs for name in run["metrics"])
    }
    return {
        name: band_from_values(name, found, alpha, f"calibration:{variant}").as_dict()
        for name, found in values.items()
        if sum(math.isfinite(value) for value in found) >= 2
    }


@dataclass(frozen=True)
class Variant:
    """One noise variant's summary: its runs (indices into `NoiseRecord.runs`), each metric's band (as
    `Band.as_dict()` holds it), the pairwise churn and weight distances, and its distinct weight hashes."""

    runs: list[int]
    bands: dict[str, dict[str, Any]]
    churn: dict[str, Any]
    weight_distance: dict[str, Any]
    bit_identical: bool
    weights_sha256: list[str]
    impl_noise: Any = None


@dataclass(frozen=True, kw_only=True)
class NoiseRecord:
    """What a calibration measured: the baseline it trained (redacted flat params), the data's content hash, each
    repeat's run (`runs`: variant, repeat, seeds, metrics, weights hash; run id, where, whether reused) and each
    variant's summary. Bands are stored at `alpha`; `at_alpha` re-derives their intervals at another. Read from
    `calibration/noise.json`, it has no execution fields (`EXECUTION`); read from MLflow, it has them."""

    baseline: dict[str, Any]
    data_sha256: str
    alpha: float
    repeats: int
    simulate_impl_noise: bool = False
    gpu: bool = False
    parent_run_id: str | None = None
    executor: str | None = None
    reused: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]]
    task: str = CLASSIFICATION
    churn_measure: str = CLASSIFICATION_CHURN
    target_std: float | None = None
    variants: dict[str, Variant]

    @classmethod
    def from_dict(cls, record: dict[str, Any], source: str = NOISE_FILE.as_posix()) -> NoiseRecord:
        """The record from its JSON object; a missing key, a wrong shape or a band without a finite mean and std
        names `source` and the fix."""
        try:
            variants = {name: Variant(**summary) for name, summary in record["variants"].items()}
            known = {spec.name for spec in fields(cls)} - {"variants"}
            # A NaN metric (a diverged repeat) is stored as null (strict JSON); it reads back as NaN.
            runs = [{**run, "metrics": _nan_for_null(run["metrics"])} for run in record["runs"]]
            values = {key: value for key, value in record.items() if key in known}
            found = cls(**{**values, "runs": runs, "variants": variants})
        except (KeyError, TypeError, AttributeError) as error:
            raise RunStateError(
                f"{source} is not a calibration record this version reads ({error})", fix=REFRESH
            ) from None
        for name, variant in variants.items():
            for metric, band in variant.bands.items():
                bad = next((key for key in ("mean", "std") if not _finite(band.get(key))), None)
                if bad or band["std"] < 0:
                    bad = bad or "std"
                    raise RunStateError(
                        f"{source}: the {name} variant's band of {metric} has {bad} {band.get(bad)!r}: a band needs "
                        "a finite mean and a std >= 0, as a calibration writes them (was the file edited?)",
                        fix=REFRESH,
                    )
        return found

    @classmethod
    def read(cls, path: Path) -> NoiseRecord:
        """The record in `path`; a missing file or one that is not JSON is one line naming it and the fix."""
        if not path.is_file():
            raise RunStateError(
                f"{NOISE_FILE} not found ({path})", fix=f"run the calibration first (`dvc repro {CALIBRATE}`)"
            )
        try:
            return cls.from_dict(json.loads(path.read_text()), str(path))
        except json.JSONDecodeError as error:
            raise RunStateError(f"{path} is not valid JSON ({error.msg}, line {error.lineno})", fix=REFRESH) from None

    def as_dict(self) -> dict[str, Any]:
        """The JSON object, strict: every NaN or infinite float is null and named under `non_finite`."""
        return strict(asdict(self))

    def results(self) -> dict[str, Any]:
        """The JSON object without what the execution decided (`EXECUTION`): what `calibration/noise.json` holds."""
        full = self.as_dict()
        record = {key: value for key, value in full.items() if key not in EXECUTION}
        record["runs"] = [
            {key: value for key, value in run.items() if key not in REPEAT_EXECUTION} for run in full["runs"]
        ]
        return record

    def execution(self) -> dict[str, Any]:
        """What the execution decided (`EXECUTION`), each repeat's by its variant and number: the link's content."""
        record = {key: value for key, value in self.as_dict().items() if key in EXECUTION}
        record["runs"] = [
            {"variant": run["variant"], "repeat": run["repeat"], **{key: run.get(key) for key in REPEAT_EXECUTION}}
            for run in self.runs
        ]
        return record

    @staticmethod
    def whole(results: dict[str, Any], execution: dict[str, Any]) -> dict[str, Any]:
        """The JSON object from its two halves (`calibration/noise.json`'s `results`, a link's `execution`), as the
        calibrate stage logs it to MLflow."""
        runs = [{**run, **linked} for run, linked in zip(results["runs"], execution["runs"], strict=True)]
        return {**results, **execution, "runs": runs}

    def write(self, path: Path) -> None:
        """Write the record's results (`results`) to `path`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.results(), indent=2, allow_nan=False) + "\n")

    def variant(self, name: str) -> Variant:
        if name not in self.variants:
            raise RunStateError(
                f"{NOISE_FILE} has no {name} variant (it has {', '.join(self.variants) or 'none'})",
                fix=f"add {name} to calibration.variants and {REFRESH}",
            )
        return self.variants[name]

    def runs_of(self, name: str) -> list[dict[str, Any]]:
        """The runs of variant `name`, in the order the calibration trained them."""
        return [self.runs[index] for index in self.variant(name).runs]

    def band_values(self, name: str) -> dict[str, list[float]]:
        """Each metric variant `name` bands, with its value in each of the variant's runs (NaN where one lacks it)."""
        runs = self.runs_of(name)
        return {metric: [run["metrics"].get(metric, math.nan) for run in runs] for metric in self.variant(name).bands}

    def bands_everywhere(self, metric: str) -> bool:
        """Whether every variant has a band for `metric`."""
        return all(metric in variant.bands for variant in self.variants.values())

    def at_alpha(self, alpha: float) -> NoiseRecord:
        """The record with every band's interval re-derived at `alpha` (they are stored at another)."""
        variants = {
            name: replace(
                variant,
                bands={
                    metric: band_from_summary(
                        metric, band["mean"], band["std"], band["n"], alpha, band["source"]
                    ).as_dict()
                    for metric, band in variant.bands.items()
                },
            )
            for name, variant in self.variants.items()
        }
        return replace(self, variants=variants, alpha=alpha)


def _nan_for_null(metrics: dict[str, Any]) -> dict[str, float]:
    return {name: math.nan if value is None else value for name, value in metrics.items()}


def _finite(value: Any) -> bool:
    """Whether `value` is a finite real number (a JSON NaN, null or text is not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
