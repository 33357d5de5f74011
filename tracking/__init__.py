"""Reproducible Keras training under DVC with its provenance logged to MLflow.

The public surface is small and loads on first use (`tracking.judge` imports its module then), so that
`tracking --help` and the stages' own imports stay fast; TensorFlow and MLflow load only inside the functions
that need them. The Keras callback lives in `tracking.training.callback`, which imports Keras.
`tracking.start` opens the run of a team's own training script (tracking/script/run.py); the DVC stages in
`pipelines/` call one function each of `tracking.stages` (one module per stage: `prepare_data`, `train_model`, ...).
Importing the package turns MLflow's usage telemetry off (unless the user turned it on): every stage and
command of ours imports it before MLflow.
"""

from tracking.env import telemetry_off_by_default
from tracking.facade import lazy_names

telemetry_off_by_default()

# The team's API, each name and the module that defines it (relative to this package): a team's own script
# (`start`), its builders (the task names), runs judged from plain numbers (`judge`, `Verdict`) and the errors
# (`TrackingError`; `UserCodeError`, which a team's builder or loader raises to say in one line what to fix). The DVC
# stages' names are `tracking.stages`'.
_PUBLIC = {
    "start": ".script.run",
    "judge": ".noise.judging",
    "Verdict": ".noise.judging",
    "TrackingError": ".errors",
    "UserCodeError": ".errors",
    "CLASSIFICATION": ".config.params",
    "REGRESSION": ".config.params",
    "MULTILABEL": ".config.params",
}

__all__ = sorted(_PUBLIC)

__getattr__ = lazy_names(__name__, _PUBLIC)
