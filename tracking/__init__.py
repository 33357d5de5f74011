"""Reproducible Keras training under DVC with its provenance logged to MLflow.

The public surface is small and light to import; TensorFlow and MLflow load only inside the functions
that need them. The Keras callback lives in `tracking.training.callback`, which imports Keras.
Importing the package turns MLflow's usage telemetry off (unless the user turned it on): every stage and
command of ours imports it before MLflow.
"""

from tracking.config.params import Params, load_params
from tracking.determinism.process import reproducible_process, seed_frameworks
from tracking.determinism.seeds import Seeds, resolve_seeds
from tracking.env import telemetry_off_by_default
from tracking.errors import TrackingError
from tracking.run.tracker import Tracker

telemetry_off_by_default()

__all__ = [
    "Params",
    "Seeds",
    "Tracker",
    "TrackingError",
    "load_params",
    "reproducible_process",
    "resolve_seeds",
    "seed_frameworks",
]
