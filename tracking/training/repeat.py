"""One repeat's training and its scores, with nothing logged: what a calibration repeat, a candidate's extra run
and the GPU check (bench/gpu_check.py) each train, so all of them take the train stage's path bit for bit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tracking.config.params import CLASSIFICATION, Params
from tracking.data.hashing import weights_sha256
from tracking.determinism.seeds import Seeds
from tracking.training.fitting import fit_model
from tracking.training.model import Built, idle_after_fit
from tracking.training.scoring import score_model
from tracking.training.task_scores import flat_metrics, summary_metrics


@dataclass(frozen=True)
class Trained:
    """One repeat's test metrics, predictions (classes, or values for regression) and flattened weights."""

    metrics: dict[str, float]
    predicted: np.ndarray
    weights: np.ndarray
    weights_sha256: str
    idle: dict[str, str]  # seeds whose generators never drew (`idle_after_fit`), recorded as unused


def train_and_score(
    built: Built,
    params: Params,
    seeds: Seeds,
    splits: dict[str, dict],
    n_outputs: int | dict[str, int],
    within_batch_seed: int | None,
    task: str = CLASSIFICATION,
    root: Path = Path("."),
) -> Trained:
    """Train one repeat's built model (frameworks already seeded) as the train stage trains, validation included,
    and score it on the test set as evaluate scores the candidate, compiled metrics too; `root` is the project's,
    where the team's `train.augment` module is found."""
    model = built.model
    fit_model(model, params, seeds, splits["train"], splits.get("val"), within_batch_seed=within_batch_seed, root=root)
    idle = idle_after_fit(model, seeds, params)
    result = score_model(model, seeds, splits["test"], task, n_outputs)
    model_weights = model.get_weights()
    # classes as int16, values (regression, several outputs) as float32
    predicted = result["predicted"].astype(np.int16 if result["predicted"].dtype.kind in "iu" else np.float32)
    return Trained(
        flat_metrics(summary_metrics(result)),
        predicted,
        np.concatenate([w.ravel() for w in model_weights]).astype(np.float32),
        weights_sha256(model_weights),
        idle,
    )
