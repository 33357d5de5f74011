"""The framework Keras runs on (`determinism.backend`): chosen before Keras is imported, then honoured and recorded.

Keras 3 reads `KERAS_BACKEND` once, at its first import, so a process picks its backend before anything imports
Keras; one that already runs on another is refused, never silently trained on it. Each backend has a module of its
own (`tensorflow_backend.py`, `jax_backend.py`, `torch_backend.py`) that knows its import-time variables, its
determinism and thread switches, how to read them back, the GPUs it sees and the CUDA it was built with;
tracking/determinism/settings.py hands each call to the one in use.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from tracking.config.params import Backend
from tracking.env import KERAS_BACKEND
from tracking.errors import UsageError

TENSORFLOW, JAX, TORCH = "tensorflow", "jax", "torch"
BACKENDS: tuple[str, ...] = get_args(Backend)
# The distribution each backend's version is recorded from (`prov.software.versions.*`).
BACKEND_PACKAGES = {TENSORFLOW: ("tensorflow", "tensorflow-cpu"), JAX: ("jax", "jaxlib"), TORCH: ("torch",)}


@dataclass(frozen=True)
class EffectiveDeterminism:
    """Determinism as the backend reports it after start-up; `details` holds the backend's own switches as it
    reports them (XLA's flags, cuDNN's benchmark mode, cuBLAS's workspace), recorded beside the common four."""

    op_determinism: bool
    intra_op_threads: int
    inter_op_threads: int
    onednn: bool
    backend: str = TENSORFLOW
    details: dict[str, str] = field(default_factory=dict)


def configured() -> str:
    """The backend Keras uses in this process: the running one once Keras is imported, else `KERAS_BACKEND`, else
    the `backend` of Keras's config file (`$KERAS_HOME/keras.json`, default `~/.keras`), else TensorFlow."""
    if "keras" in sys.modules:
        import keras

        return keras.config.backend()
    if os.environ.get(KERAS_BACKEND):
        return os.environ[KERAS_BACKEND]
    home = Path(os.environ.get("KERAS_HOME") or Path.home() / ".keras")
    try:
        return str(json.loads((home / "keras.json").read_text()).get("backend") or TENSORFLOW)
    except (OSError, ValueError, AttributeError):
        return TENSORFLOW


def select(backend: str) -> None:
    """Have Keras start on `backend` in this process and the ones it starts; refuse where Keras already runs on
    another or the environment asks for another (one of them would be silently ignored)."""
    if "keras" in sys.modules and configured() != backend:
        raise UsageError(
            f"determinism.backend is {backend}, but Keras already runs on {configured()} in this process",
            fix=f"set determinism.backend before Keras is imported (or start Python with {KERAS_BACKEND}={backend})",
        )
    chosen = os.environ.get(KERAS_BACKEND)
    if chosen and chosen != backend:
        raise UsageError(
            f"{KERAS_BACKEND}={chosen} in the environment, but determinism.backend is {backend} in params.yaml",
            fix=f"set it in params.yaml (`dvc exp run -S determinism.backend={chosen}`), or unset {KERAS_BACKEND}",
        )
    os.environ[KERAS_BACKEND] = backend
