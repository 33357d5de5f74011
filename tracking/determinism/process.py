"""Set up a reproducible process: call `reproducible_process` first thing, `seed_frameworks` after import.

The order matters: PYTHONHASHSEED only takes effect at interpreter start (so the process re-executes itself
once), and the backend and its import-time settings (oneDNN, XLA's flags) are read when Keras is imported.
"""

from __future__ import annotations

import os

from tracking import startup
from tracking.config.params import DeterminismParams, Params
from tracking.determinism.seeds import Seeds, ensure_hash_seed, resolve_seeds
from tracking.determinism.settings import EffectiveDeterminism, apply, configure_environment
from tracking.env import (
    CUBLAS_WORKSPACE_CONFIG,
    KERAS_BACKEND,
    PYTHONHASHSEED,
    TF_CPP_MIN_LOG_LEVEL,
    TF_ENABLE_ONEDNN_OPTS,
    XLA_FLAGS,
)

# What `reproducible_process` fixes in the environment, which a worker process must start with to match it.
PROCESS_VARIABLES = (
    PYTHONHASHSEED,
    KERAS_BACKEND,
    TF_ENABLE_ONEDNN_OPTS,
    TF_CPP_MIN_LOG_LEVEL,
    XLA_FLAGS,
    CUBLAS_WORKSPACE_CONFIG,
)


def reproducible_process(params: Params) -> Seeds:
    """Resolve the seeds, pin the hash seed, the backend and its import-time settings; import nothing heavy."""
    seeds = resolve_seeds(params.seeds)
    ensure_hash_seed(seeds.hash)
    configure_environment(params.determinism)
    return seeds


def seed_frameworks(params: Params, seeds: Seeds) -> EffectiveDeterminism:
    """Apply threads and op determinism, seed Python/NumPy/backend globals with `seeds.base`; return what is in force."""
    return apply_determinism(params.determinism, seeds)


def apply_determinism(determinism: DeterminismParams, seeds: Seeds) -> EffectiveDeterminism:
    """`seed_frameworks` for determinism settings that come from elsewhere than our params (a team's script). The
    backend is set up before Keras is imported, so a backend that is not installed is named, not a Keras traceback."""
    effective = apply(determinism)
    import keras

    startup.mark(startup.TENSORFLOW)
    keras.utils.set_random_seed(seeds.base)
    return effective


def process_environment() -> dict[str, str]:
    """The variables `reproducible_process` set here, for a worker process to start with (before its interpreter
    and TensorFlow read them), so that it trains as this process would."""
    return {name: os.environ[name] for name in PROCESS_VARIABLES if name in os.environ}
