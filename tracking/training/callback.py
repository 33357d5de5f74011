"""Keras adapter: a callback that logs each epoch's metrics to an open `Tracker`'s MLflow run.

It takes the tracker rather than opening a run itself: Keras calls no hook when `fit` raises, so a run
opened here could not be ended as FAILED, and a crashed run must never look finished.
"""

from __future__ import annotations

from typing import Any

import keras

from tracking import startup
from tracking.run.lifecycle import raise_if_interrupted
from tracking.run.tracker import Tracker


class InterruptCheck(keras.callbacks.Callback):
    """Raise a Ctrl-C or SIGTERM recorded during `fit` at the end of the batch, where stopping is safe."""

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        raise_if_interrupted()


class FirstStep(keras.callbacks.Callback):
    """Mark the end of the process's first training step, where a stage's start-up ends (`tracking.startup`)."""

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        startup.mark(startup.FIRST_STEP)


class MlflowMetricsCallback(keras.callbacks.Callback):
    """Log `logs` at the end of every epoch, with the epoch as MLflow's step and an `epoch_` prefix.

    Writes are queued so the store never holds up training; the run's end waits for them.
    """

    def __init__(self, tracker: Tracker) -> None:
        super().__init__()
        self.tracker = tracker

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if logs:
            self.tracker.log_metrics({f"epoch_{key}": value for key, value in logs.items()}, step=epoch, wait=False)
