"""The data manifest (`data/prepared/manifest.json`, logged as `data/manifest.json`), read and written through one
typed class: what the prepare stage wrote, its full-content hash (what `data.sha256` pins) and its counts.

The prepare stage builds it, training, calibration, evaluate, the pin, `tracking diff` and `tracking rerun` read it;
each through `Manifest`, so its keys are named once.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from tracking.config.params import CLASSIFICATION
from tracking.data.arrays import Arrays, flat, n_rows, shapes, widths
from tracking.data.hashing import array_sha256, combine
from tracking.errors import DataError
from tracking.layout import PREPARE
from tracking.progress import Progress

MANIFEST = "manifest.json"
# Where a run logs the manifest of its data among its MLflow artifacts.
LOGGED_MANIFEST = "data/manifest.json"
REFRESH = f"re-create it with `dvc repro -f {PREPARE}`"


@dataclass(frozen=True)
class Origin:
    """What a manifest records of the arrays a data set is split from, read from them before the split (which
    consumes a loader's streamed copy as it writes the splits): their combined hash, the targets' shape, the class
    count of a classification and the outputs a model needs."""

    sha256: str
    target_shape: list[int] | dict[str, list[int]]
    classes: int | None
    n_outputs: int | dict[str, int]

    @classmethod
    def of(cls, arrays: dict[str, Arrays], task: str = CLASSIFICATION, progress: Progress | None = None) -> Origin:
        """The origin facts of `arrays` (x, y, maybe groups and sample_weight) for `task`; hashing them advances
        `progress`."""
        classes = (
            int(arrays["y"].max()) + 1 if task == CLASSIFICATION and not isinstance(arrays["y"], Mapping) else None
        )
        return cls(
            sha256=combine(
                {
                    name: array_sha256(array, progress)
                    for role, value in arrays.items()
                    for name, array in flat(role, value).items()
                }
            ),
            target_shape=_listed(shapes(arrays["y"])),
            classes=classes,
            n_outputs=classes if classes is not None else widths(arrays["y"]),
        )


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """Hashes of every array written (`arrays`, by `split/name`), their combined `content_sha256`, the source's
    name and hash, sample counts and feature shapes per split (by input name where `x` is a dict), and the
    outputs a model needs: `n_outputs` is the
    class count K for classification (which alone has `n_classes` and `class_counts`), the product of the target
    shape (1 for 1-D targets) for regression; where `y` is a dict, both are by output name (each output's values
    per sample), whatever the task."""

    source: str
    source_sha256: str
    content_sha256: str
    arrays: dict[str, str]
    task: str = CLASSIFICATION
    target_shape: list[int] | dict[str, list[int]] | None = None
    n_samples: dict[str, int]
    shapes: dict[str, list[int] | dict[str, list[int]]] = field(default_factory=dict)
    has_groups: bool = False
    n_outputs: int | dict[str, int]
    n_classes: int | None = None
    class_counts: dict[str, dict[str, int]] | None = None

    @classmethod
    def build(
        cls,
        splits: dict[str, dict[str, Arrays]],
        origin: Origin,
        source: str,
        task: str = CLASSIFICATION,
        progress: Progress | None = None,
    ) -> Manifest:
        """The manifest of `splits` (each split's arrays `x`, `y` and maybe `groups`) split from the arrays that
        `origin` describes, of the source named `source` (already redacted). Every array is hashed under its flat
        name, so a dict's keys are part of the content hash (`train/x.title`)."""
        hashes = {
            f"{split}/{name}": array_sha256(array, progress)
            for split, arrays in splits.items()
            for role, value in arrays.items()
            for name, array in flat(role, value).items()
        }
        return cls(
            source=source,
            source_sha256=origin.sha256,
            content_sha256=combine(hashes),
            arrays=hashes,
            task=task,
            target_shape=origin.target_shape,
            n_samples={split: n_rows(arrays["y"]) for split, arrays in splits.items()},
            shapes={split: _listed(shapes(arrays["x"])) for split, arrays in splits.items()},
            has_groups=all("groups" in arrays for arrays in splits.values()),
            n_outputs=origin.n_outputs,
            n_classes=origin.classes,
            class_counts=None
            if origin.classes is None
            else {split: _class_counts(arrays["y"], origin.classes) for split, arrays in splits.items()},
        )

    @classmethod
    def from_dict(cls, record: dict[str, Any], source: str = MANIFEST) -> Manifest:
        """The manifest from its JSON object (an older one without `n_outputs` has `n_classes`); another shape
        names `source` and the fix."""
        if not isinstance(record, dict):
            raise DataError(
                f"{source} is not a data manifest: a JSON {type(record).__name__}, not an object", fix=REFRESH
            )
        known = {spec.name for spec in fields(cls)}
        values = {key: value for key, value in record.items() if key in known}
        values.setdefault("n_outputs", record.get("n_classes"))
        try:
            return cls(**values)
        except TypeError as error:
            raise DataError(f"{source} is not a data manifest this version reads ({error})", fix=REFRESH) from None

    @classmethod
    def read(cls, prepared: Path) -> Manifest:
        """The manifest the prepare stage wrote into `prepared`."""
        path = prepared / MANIFEST
        if not path.is_file():
            raise DataError(f"{path} not found; run the {PREPARE} stage first (`dvc repro {PREPARE}`)")
        try:
            return cls.from_dict(json.loads(path.read_text()), str(path))
        except json.JSONDecodeError as error:
            raise DataError(f"{path} is not valid JSON ({error.msg}, line {error.lineno})", fix=REFRESH) from None
        except UnicodeDecodeError:
            raise DataError(f"{path} is not UTF-8 text", fix=REFRESH) from None

    def as_dict(self) -> dict[str, Any]:
        """The JSON object; a regression manifest has no class keys."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    def dumps(self) -> str:
        """The file's text, keys sorted, so the same data always writes the same bytes (DVC hashes the folder)."""
        return json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n"

    @property
    def total(self) -> int:
        """Samples over every split."""
        return sum(self.n_samples.values())

    def count_changes(self, after: Manifest) -> str:
        """Sample and per-class count changes from this manifest to `after`, e.g. 'samples 1797 -> 1897 (+100)'."""
        parts = []
        if self.total != after.total:
            parts.append(f"samples {self.total} -> {after.total} ({after.total - self.total:+d})")
        before_classes, after_classes = _totals(self.class_counts or {}), _totals(after.class_counts or {})
        for label in sorted(set(before_classes) | set(after_classes), key=int):
            old, new = before_classes.get(label, 0), after_classes.get(label, 0)
            if old != new:
                parts.append(f"class {label} {old} -> {new} ({new - old:+d})")
        return "; ".join(parts)


def _listed(found: tuple[int, ...] | dict[str, tuple[int, ...]]) -> list[int] | dict[str, list[int]]:
    """Shapes as JSON holds them: lists."""
    return {key: list(shape) for key, shape in found.items()} if isinstance(found, dict) else list(found)


def _class_counts(y: np.ndarray, n_classes: int) -> dict[str, int]:
    """How many labels of each class `y` holds: samples, or pixels and steps where each sample has several."""
    counts = np.bincount(np.asarray(y).ravel(), minlength=n_classes)
    return {str(label): int(counts[label]) for label in range(n_classes)}


def _totals(per_split: dict[str, dict[str, int]]) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for counts in per_split.values():
        totals.update(counts)
    return dict(totals)
