"""MLflow's own autologging beside a script's run: its Keras and TensorFlow parts paused while the run is open.

A team that already calls `mlflow.autolog()` or `mlflow.keras.autolog()` would otherwise get every epoch's metrics
under two or three names, a second model and dataset, and `fit`'s arguments as 26 more params beside its own (which
`tracking rerun` would then write into params.yaml); `mlflow.autolog()`'s TensorFlow part also ends `fit` with an
error where TensorBoard is not installed, as in the environment `make run` builds. `run.callback()` and
`run.log_model` log what those parts would. Every other autologging (scikit-learn's, say) is left as it is.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# MLflow's autologging integrations that patch Keras's `fit`.
KERAS_FLAVORS = ("keras", "tensorflow")


def pause_keras_autolog() -> Callable[[], None]:
    """Turn off MLflow's Keras and TensorFlow autologging where it is on, saying so in one line; return what turns
    each back on as it was configured."""
    from mlflow.utils.autologging_utils import AUTOLOGGING_INTEGRATIONS, get_autologging_config

    paused = {
        flavor: dict(AUTOLOGGING_INTEGRATIONS[flavor])
        for flavor in KERAS_FLAVORS
        if get_autologging_config(flavor, "disable", True) is False
    }
    for flavor in paused:
        _autolog(flavor)(disable=True)
    if paused:
        log.info(
            "tracking.start: MLflow's %s autologging is off while the run is open (run.callback() and "
            "run.log_model log its metrics and model once, without TensorBoard), and on again after it",
            " and ".join(f"mlflow.{flavor}" for flavor in paused),
        )

    def resume() -> None:
        for flavor, config in paused.items():
            autolog = _autolog(flavor)
            accepted = inspect.signature(autolog).parameters
            autolog(**{key: value for key, value in config.items() if key in accepted})
            AUTOLOGGING_INTEGRATIONS[flavor].update(config)  # with what MLflow keeps beside (`mlflow.autolog()`'s mark)

    return resume


def _autolog(flavor: str) -> Callable[..., None]:
    return importlib.import_module(f"mlflow.{flavor}").autolog
