"""The pipeline's stages, one module per stage named after it, and the names a DVC stage (`pipelines/*.py`)
imports: each stage's function, the params loader, and the entry point that turns a user error into one line and
an exit status. Each name loads its module on first use, so a stage process loads its own stage's code only; the
team's API is `tracking`'s.
"""

from tracking.facade import lazy_names

# Each stage's name and the module that defines it (relative to this package), in data-flow order, then what every
# stage uses. A DVC stage imports only these (tests/test_stage_deps.py).
_PUBLIC = {
    "prepare_data": ".prepare",
    "train_model": ".train",
    "evaluate_model": ".evaluate",
    "calibrate_baseline": ".calibrate",
    "compare_candidate": ".compare",
    "run_audit": ".audit",
    "load_params": "..config.params_file",
    "run_main": "..entry",
    "at_least": "..entry",
}

__all__ = sorted(_PUBLIC)

__getattr__ = lazy_names(__name__, _PUBLIC)
