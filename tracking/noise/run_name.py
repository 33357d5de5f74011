"""A judged run's name as MLflow's run list shows it: its verdict and what changed, in front of its own name.

MLflow 3.17's run list shows each run's name without configuration; tags and params appear only as columns a user
adds. So the verdict goes where a user looks first, `exceeds_noise · train.learning_rate=1e-05 · slung-jinn`, and a
rerun is named `rerun of slung-jinn`. The verdict stays in its tag `noise.verdict` for searches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracking.noise.policy import OUTCOMES, changed_keys, logged_text

SEPARATOR = " · "
# The section of the params that holds a pipeline run's seeds: a candidate that differs only there says so by name.
SEEDS = "seeds."
RERUN_PREFIX = "rerun of "
# The changed params shown in the name, in characters: the rest are on the run's page (MLflow cuts the cell anyway).
MAX_CHANGES = 80


def judged_name(name: str, verdict: str, changes: Mapping[str, str]) -> str:
    """`name` with `verdict` and the params that differ from the baseline's (`changes`: key to logged value) in
    front; a verdict already there is replaced, so judging a run again does not stack them."""
    shown = ", ".join(f"{key}={value}" for key, value in changes.items())
    if len(shown) > MAX_CHANGES:
        shown = shown[: MAX_CHANGES - 1] + "…"
    return SEPARATOR.join(part for part in (verdict, shown, own_name(name)) if part)


def changes(reference: Mapping[str, Any], candidate: Mapping[str, Any], prefixes: tuple[str, ...]) -> dict[str, str]:
    """The flat params under `prefixes` the candidate holds otherwise than the reference, with the candidate's
    value as MLflow logs it (`unset` where it has none)."""
    return {
        key: logged_text(key, candidate[key]) if key in candidate else "unset"
        for key in changed_keys(reference, candidate, prefixes)
    }


def own_name(name: str) -> str:
    """The run's name without the verdict `judged_name` put in front of it."""
    parts = name.split(SEPARATOR)
    return parts[-1] if len(parts) > 1 and parts[0] in OUTCOMES else name


def rerun_name(original: str) -> str:
    """The name of a run that re-creates the run named `original`."""
    return RERUN_PREFIX + own_name(original)
