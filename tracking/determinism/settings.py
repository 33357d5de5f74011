"""Determinism settings: applied before and after Keras's backend is imported, then read back from it.

Each backend reads some settings once, at import or start-up (TensorFlow's oneDNN switch, XLA's flags, cuBLAS's
workspace), so `configure_environment` runs before the first `import keras`; thread counts and op determinism are
set right after it, before the runtime starts. What is recorded is what the backend reports, not what was asked.
The backend's own module (tracking/determinism/<backend>_backend.py) knows how.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict
from types import ModuleType
from typing import Any

from tracking.config.params import DeterminismParams
from tracking.determinism import jax_backend, tensorflow_backend, torch_backend
from tracking.determinism.backend import (
    BACKEND_PACKAGES,
    BACKENDS,
    JAX,
    TENSORFLOW,
    TORCH,
    EffectiveDeterminism,
    configured,
    select,
)
from tracking.env import TF_CPP_MIN_LOG_LEVEL, TF_ENABLE_ONEDNN_OPTS
from tracking.errors import UsageError

# How to get each backend into the project's environment (docs/backends.md).
INSTALL = {
    TENSORFLOW: "`make venv` installs it (the cpu extra; `TF_BUILD=gpu` for CUDA)",
    JAX: "`make venv` installs JAX for CPUs (the jax extra); on a GPU machine, `uv pip install 'jax[cuda13]'`",
    TORCH: "`uv pip install torch` into the environment (about 2.5 GB of wheels from PyPI on Linux)",
}
BY_NAME: dict[str, ModuleType] = {TENSORFLOW: tensorflow_backend, JAX: jax_backend, TORCH: torch_backend}


def module(backend: str | None = None) -> ModuleType:
    """The module that sets up and reads `backend` (the configured one by default)."""
    name = backend or configured()
    if name not in BY_NAME:
        raise UsageError(f"Keras backend {name!r} is not supported", fix=f"use one of {', '.join(BACKENDS)}")
    return BY_NAME[name]


def import_time_environment(params: DeterminismParams) -> dict[str, str]:
    """The variables `params.backend` reads once, at import or start-up, with the values `params` asks for."""
    return module(params.backend).import_time_environment(params)


def started(backend: str) -> bool:
    """Whether `backend` already read its import-time variables in this process (too late to set them)."""
    started_by = module(backend).STARTED_BY
    return started_by is not None and started_by in sys.modules


def gpu_present() -> bool:
    """Whether the running backend sees a GPU in this process (repeats then train on its kernels)."""
    return bool(module().visible_gpus())


def build_record() -> dict[str, Any]:
    """The running backend, its version and the CUDA/cuDNN it reports (`prov.software.backend.*`)."""
    return {"name": configured(), **module().build()}


def configure_environment(params: DeterminismParams) -> None:
    """Choose the backend and set the variables it reads at import; refuse where it already runs with other ones."""
    select(params.backend)
    # Keras imports TensorFlow where it is installed, on any backend: quietly, and with the numerics of our default.
    os.environ.setdefault(TF_CPP_MIN_LOG_LEVEL, "2")
    os.environ.setdefault(TF_ENABLE_ONEDNN_OPTS, "0")
    module(params.backend).configure_environment(params)


def apply(params: DeterminismParams) -> EffectiveDeterminism:
    """Configure the backend's threads and op determinism, then return the effective values; a backend that is not
    installed is one line saying how to get it."""
    try:
        return module(params.backend).apply(params)
    except ModuleNotFoundError as err:
        if err.name is None or err.name.split(".")[0] not in BACKEND_PACKAGES[params.backend]:
            raise
        raise UsageError(
            f"determinism.backend is {params.backend}, but {err.name} is not installed in {sys.executable}",
            fix=INSTALL[params.backend],
        ) from err


def effective() -> EffectiveDeterminism:
    """What the running backend has in force now."""
    return module().effective()


def as_record(requested: DeterminismParams, actual: EffectiveDeterminism | None) -> dict[str, dict[str, object]]:
    """Requested and effective settings side by side, for provenance; the requested ones alone where `actual` is
    None (a process that trains nothing and leaves the backend unimported)."""
    if actual is None:
        return {"requested": requested.model_dump()}
    record = asdict(actual)
    details = record.pop("details")
    return {"requested": requested.model_dump(), "effective": {**record, **details}}


def is_determinism_error(error: BaseException) -> bool:
    """Did TensorFlow refuse an op because op determinism is on (rather than fail for another reason)?"""
    return determinism_refusal(error) is not None


def determinism_refusal(error: BaseException) -> str | None:
    """The line of TensorFlow's message that mentions determinism, leaving out traceback lines (paths may too)."""
    for line in strip_ansi(str(error)).splitlines():
        line = line.strip()
        if "determinis" in line.lower() and not line.startswith(("File ", "[[", "Detected at node")):
            return re.sub(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\]", "", line)
    return None


def strip_ansi(text: str) -> str:
    """`text` without terminal colour codes (TensorFlow colours some of its messages)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
