"""Reproducible Keras training under DVC with its provenance logged to MLflow.

The public surface is small and light to import; TensorFlow and MLflow load only inside the functions
that need them. The Keras callback lives in `tracking.keras_callback`, which imports Keras.
Importing the package turns MLflow's usage telemetry off (unless the user turned it on): every stage and
command of ours imports it before MLflow.
"""

from tracking.env import telemetry_off_by_default
from tracking.errors import TrackingError
from tracking.params import Params, load_params
from tracking.process import reproducible_process, seed_frameworks
from tracking.seeds import Seeds, resolve_seeds
from tracking.tracker import Tracker

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
