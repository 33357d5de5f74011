"""A facade's names loaded on first use: `tracking` (the team's) and `tracking.stages` (the DVC stages') each map
their public names to the modules that define them, so importing a facade stays light and a stage process loads
its own code only (on the ground floor: both facades use it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, public: Mapping[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: each name in `public` from its module (relative to `package`),
    imported on first use; any other name is an AttributeError, as for any module."""

    def attribute(name: str) -> Any:
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(public[name], package), name)

    return attribute
