"""The knobs a verdict's advice names, in the words of the route its run came by: params.yaml's keys on the pipeline
template's, the `tracking` commands' options on the library's (a team's script has no `calibration` or `compare`
section to edit).

`tracking diff` and `tracking judge` set the route of the run they judge (`advising`) around the noise policy,
whose notes read the knobs from here (`knobs()`), so no statistics function takes a route argument it never uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Knobs:
    """Each knob as advice names it: `min_effect` how to name a metric's smallest shift that matters and `named`
    where a named one came from (`{metric}` in both), `shift` where any metric's is named, `repeats` a calibration
    of more runs, `variants` a calibration of more noise variants (`{names}` in it)."""

    min_effect: str
    named: str
    shift: str
    repeats: str
    variants: str


# The pipeline template: params.yaml's sections.
TEMPLATE = Knobs(
    min_effect="compare.min_effect.{metric}",
    named="compare.min_effect.{metric}",
    shift="compare.min_effect",
    repeats="raise calibration.repeats",
    variants="add one of {names} to calibration.variants",
)
# A team's script under `tracking.start`: the options of `tracking judge` and `tracking calibrate`.
LIBRARY = Knobs(
    min_effect="tracking judge --min-effect {metric}=SHIFT",
    named="the shift named for {metric}",
    shift="tracking judge --min-effect",
    repeats="calibrate with more runs (tracking calibrate --repeats N)",
    variants="calibrate with one of {names} in tracking calibrate --variants",
)

_ROUTE: ContextVar[Knobs] = ContextVar("knobs", default=TEMPLATE)


def knobs() -> Knobs:
    """The knobs of the route whose run is being judged (the template's unless `advising` says otherwise)."""
    return _ROUTE.get()


@contextlib.contextmanager
def advising(route: Knobs) -> Iterator[None]:
    """Advice in the block names `route`'s knobs."""
    token = _ROUTE.set(route)
    try:
        yield
    finally:
        _ROUTE.reset(token)
