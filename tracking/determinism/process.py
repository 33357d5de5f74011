"""Set up a reproducible process: call `reproducible_process` first thing, `seed_frameworks` after import.

The order matters: PYTHONHASHSEED only takes effect at interpreter start (so the process re-executes itself
once), and oneDNN is read when TensorFlow is imported.
"""

from __future__ import annotations

from tracking import startup
from tracking.config.params import Params
from tracking.determinism.seeds import Seeds, ensure_hash_seed, resolve_seeds
from tracking.determinism.settings import EffectiveDeterminism, apply, configure_environment


def reproducible_process(params: Params) -> Seeds:
    """Resolve the seeds, pin the hash seed and TensorFlow's import-time settings; import nothing heavy."""
    seeds = resolve_seeds(params.seeds)
    ensure_hash_seed(seeds.hash)
    configure_environment(params.determinism)
    return seeds


def seed_frameworks(params: Params, seeds: Seeds) -> EffectiveDeterminism:
    """Apply threads and op determinism, seed Python/NumPy/TF globals with `seeds.base`; return what is in force."""
    import keras

    startup.mark(startup.TENSORFLOW)
    effective = apply(params.determinism)
    keras.utils.set_random_seed(seeds.base)
    return effective
