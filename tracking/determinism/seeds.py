"""One seed per source of randomness in training, each derivable from `seeds.base` so it can be varied alone.

An unset seed `name` is derived as the first four bytes (big-endian) of SHA-256 of "<base>:<name>",
masked to 31 bits: stable across Python versions and machines, and independent between names.
The data split is not among them: its seed is `data.split_seed`, so varying `seeds.base` keeps the test set.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import asdict, dataclass

from tracking.config.params import SeedParams
from tracking.env import PYTHONHASHSEED

SOURCES = ("init", "shuffle", "dropout", "augment", "hash")


@dataclass(frozen=True)
class Seeds:
    """The seeds as used; `hash` is Python's PYTHONHASHSEED."""

    base: int
    init: int
    shuffle: int
    dropout: int
    augment: int
    hash: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def derive_seed(base: int, name: str) -> int:
    """The documented derivation of seed `name` from `base`."""
    digest = hashlib.sha256(f"{base}:{name}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def resolve_seeds(params: SeedParams) -> Seeds:
    """Explicit seeds as given, unset ones derived from `base`."""
    chosen = {name: getattr(params, name, None) for name in SOURCES}
    return Seeds(
        base=params.base,
        **{name: derive_seed(params.base, name) if value is None else value for name, value in chosen.items()},
    )


def ensure_hash_seed(seed: int) -> None:
    """Re-execute this interpreter with PYTHONHASHSEED=`seed` unless it already runs with it.

    The hash seed is fixed at interpreter start-up, so setting it later has no effect on this process.
    """
    if os.environ.get(PYTHONHASHSEED) == str(seed):
        return
    env = {**os.environ, PYTHONHASHSEED: str(seed)}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
