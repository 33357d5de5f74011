"""What one difference is (`Change`), a group of them (`GroupDiff`), and the comparison of two runs' fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    key: str
    a: Any
    b: Any


@dataclass(frozen=True)
class GroupDiff:
    """One group's changed fields out of `compared`; `note` says what a change there means."""

    name: str
    compared: int
    changes: list[Change]
    note: str = ""

    @property
    def identical(self) -> bool:
        return not self.changes


def compare_fields(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, list[Change]]:
    """How many keys were compared and which differ (a key missing on one side counts as a change)."""
    keys = sorted(set(a) | set(b))
    return len(keys), [Change(key, a.get(key), b.get(key)) for key in keys if a.get(key) != b.get(key)]
