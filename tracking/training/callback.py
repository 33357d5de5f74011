"""Keras adapter: a callback that logs each epoch's metrics to an open `Tracker`'s MLflow run.

It takes the tracker rather than opening a run itself: Keras calls no hook when `fit` raises, so a run
opened here could not be ended as FAILED, and a crashed run must never look finished.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import keras

from tracking import startup
from tracking.progress import Progress
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


log = logging.getLogger(__name__)


class EpochProgress(keras.callbacks.Callback):
    """One line per epoch as the train stage runs: `epoch 3/20: accuracy 0.9652, loss 0.1234, ... (0.2 s)`, and
    within an epoch that takes long, a line at most every 30 s (`epoch 1/20: trained 1,200 of 5,000 steps in 30 s,
    about 1 min 35 s left`).

    Keras's own progress bar stays off (`fit(verbose=0)`): under DVC's pipe it would print a line per update.
    The line reads the logs Keras hands every callback, so training is the same with or without it."""

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._started = time.monotonic()
        self._steps = Progress(
            f"epoch {epoch + 1}/{self.params.get('epochs', '?')}", "step", "", self.params.get("steps")
        )
        self._step = 0

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """A line within a long epoch (a first epoch over many GB) at most every `EVERY_S` seconds."""
        self._steps.advance(batch + 1 - self._step)
        self._step = batch + 1

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        shown = ", ".join(f"{key} {float(value):.4g}" for key, value in (logs or {}).items())
        took = time.monotonic() - self._started
        log.info("epoch %d/%s: %s (%.1f s)", epoch + 1, self.params.get("epochs", "?"), shown, took)


@dataclass
class EpochSteps:
    """A run's step axis for per-epoch metrics: the next epoch of any `fit` of the run is the next step, so a second
    phase (a team's fine-tuning after its frozen phase) continues the first rather than logging steps 0..n over it."""

    next: int = 0


class MlflowMetricsCallback(keras.callbacks.Callback):
    """Log `logs` at the end of every epoch, with the run's epoch count (`steps`, shared by every callback of the
    run) as MLflow's step and an `epoch_` prefix.

    Writes are queued so the store never holds up training; the run's end waits for them.
    """

    def __init__(self, tracker: Tracker, steps: EpochSteps | None = None) -> None:
        super().__init__()
        self.tracker = tracker
        self.steps = steps or EpochSteps()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        step, self.steps.next = self.steps.next, self.steps.next + 1
        if logs:
            self.tracker.log_metrics({f"epoch_{key}": value for key, value in logs.items()}, step=step, wait=False)
