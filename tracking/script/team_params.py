"""A team's own params.yaml, any keys: read safely, flattened to DVC's dotted names, and its seeds found by a mapping.

The mapping names, for each of our sources of randomness, the team's key that holds its seed
(`{"base": "train.seed", "shuffle": "data.shuffle_seed"}`) or the seed itself; a source it leaves out is derived
from `base` as in our pipeline (tracking/determinism/seeds.py), and `base` defaults to our default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracking.config.params import SeedParams
from tracking.config.params_file import check_values
from tracking.determinism.seeds import SOURCES, Seeds, resolve_seeds
from tracking.errors import ParamsError
from tracking.yaml_text import flatten, parse_yaml

# What a mapping may name: the seeds a run derives the others from and each source's own.
SEED_NAMES = ("base", *(name for name in SOURCES if name != "hash"))
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class ScriptParams:
    """The team's params (dotted names as DVC shows them), the seeds resolved from them, and where each came from."""

    path: Path
    flat: dict[str, Any]
    seeds: Seeds
    origins: dict[str, str]


def read_params(path: Path, mapping: Mapping[str, str | int] | None) -> ScriptParams:
    """The params file at `path` (none is an empty one) and the seeds `mapping` finds in it; a bad key is one line."""
    raw = parse_yaml(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if raw is not None and not isinstance(raw, dict):
        raise ParamsError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}", fix="fix it there")
    check_values(path, dict(raw or {}))  # a YAML date or time named by its key, not a TypeError where it is logged
    flat = flatten(dict(raw or {}))
    chosen, origins = {}, {}
    for name, source in (mapping or {}).items():
        if name not in SEED_NAMES:
            raise ParamsError(
                f"tracking.start(seeds=...): unknown source of randomness {name!r}",
                fix=f"use one of: {', '.join(SEED_NAMES)}",
            )
        chosen[name], origins[name] = _seed_of(path, flat, name, source)
    return ScriptParams(path, flat, resolve_seeds(SeedParams(**chosen)), origins)


def _seed_of(path: Path, flat: dict[str, Any], name: str, source: str | int) -> tuple[int, str]:
    """The seed `source` names for `name` (a key of the params, or the seed itself) and how the record says so."""
    if isinstance(source, int) and not isinstance(source, bool):
        return _checked(f"tracking.start(seeds={{{name!r}: ...}})", source, "the call"), "given"
    if source not in flat:
        keys = ", ".join(sorted(flat)) or "none"
        raise ParamsError(
            f"{path}: no key {source!r} (tracking.start(seeds={{{name!r}: {source!r}}}))",
            fix=f"name a key of {path} holding an integer seed; its keys: {keys}",
        )
    return _checked(f"{path}: {source}", flat[source], str(path)), source


def _checked(where: str, value: Any, home: str) -> int:
    """`value` if it is a seed our streams take (an integer in [0, 2**31 - 1]), else one error line."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_SEED:
        raise ParamsError(
            f"{where}: expected an integer seed in [0, {MAX_SEED}], got {value!r}", fix=f"fix it in {home}"
        )
    return value
