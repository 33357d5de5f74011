"""Reproducible Keras training under DVC with its provenance logged to MLflow.

The public surface is small and loads on first use (`tracking.Tracker` imports its module then), so that
`tracking --help` and the stages' own imports stay fast; TensorFlow and MLflow load only inside the functions
that need them. The Keras callback lives in `tracking.training.callback`, which imports Keras.
`tracking.start` opens the run of a team's own training script (tracking/script/run.py); the DVC stages in
`pipelines/` call one public function each (`prepare_data`, `train_model`, ...).
Importing the package turns MLflow's usage telemetry off (unless the user turned it on): every stage and
command of ours imports it before MLflow.
"""

from importlib import import_module
from typing import Any

from tracking.env import telemetry_off_by_default

telemetry_off_by_default()

# Each public name and the module that defines it (relative to this package). A DVC stage imports only these
# (tests/test_stage_deps.py): the pipeline's steps in data-flow order, then the pieces a team's script or stage uses.
_PUBLIC = {
    "prepare_data": ".data.prepare",
    "train_model": ".training.train",
    "evaluate_model": ".training.evaluation",
    "calibrate": ".noise.calibration",
    "compare_candidate": ".noise.compare",
    "judge": ".noise.judging",
    "Verdict": ".noise.judging",
    "run_audit": ".inspect.audit_run",
    "run_main": ".stage",
    "at_least": ".stage",
    "Params": ".config.params",
    "load_params": ".config.params_file",
    "CLASSIFICATION": ".config.params",
    "REGRESSION": ".config.params",
    "reproducible_process": ".determinism.process",
    "seed_frameworks": ".determinism.process",
    "Seeds": ".determinism.seeds",
    "resolve_seeds": ".determinism.seeds",
    "TrackingError": ".errors",
    "start": ".script.run",
    "ScriptRun": ".script.run",
    "Tracker": ".run.tracker",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'tracking' has no attribute {name!r}")
    return getattr(import_module(_PUBLIC[name], __name__), name)
