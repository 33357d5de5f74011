"""Names of the environment variables the project reads or sets, in one place."""

from __future__ import annotations

import os

MLFLOW_TRACKING_URI = "MLFLOW_TRACKING_URI"
# MLflow 3 sends usage telemetry unless this is true (mlflow/telemetry/utils.py::is_telemetry_disabled).
MLFLOW_DISABLE_TELEMETRY = "MLFLOW_DISABLE_TELEMETRY"
# MLflow prints "View run ... at: <server URL>" (its user:password@ included) unless this is true.
MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
PYTHONHASHSEED = "PYTHONHASHSEED"
TF_ENABLE_ONEDNN_OPTS = "TF_ENABLE_ONEDNN_OPTS"
TF_DETERMINISTIC_OPS = "TF_DETERMINISTIC_OPS"
TF_CPP_MIN_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
# Which framework Keras 3 runs on (tensorflow, jax or torch), read when `keras` is first imported.
KERAS_BACKEND = "KERAS_BACKEND"
# XLA's flags (JAX): read once, when JAX starts its first backend.
XLA_FLAGS = "XLA_FLAGS"
# cuBLAS's workspace: `:4096:8` makes its GEMMs deterministic (PyTorch's reproducibility notes); read at CUDA start.
CUBLAS_WORKSPACE_CONFIG = "CUBLAS_WORKSPACE_CONFIG"

# Ray sends usage statistics unless this is 0; the Ray executor sets it unless the user did.
RAY_USAGE_STATS_ENABLED = "RAY_USAGE_STATS_ENABLED"
# Ray's switch between a node others reach (1, Linux's default: its servers listen on the machine's address) and a
# machine of its own (0: on 127.0.0.1 only). Read when `ray` is imported; the executor sets 0 for a private Ray.
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

# Set by DVC for the commands of the stages it runs.
DVC_ROOT = "DVC_ROOT"
DVC_STAGE = "DVC_STAGE"  # the address of the stage whose command runs (`train`, `sub/dvc.yaml:train`)
DVC_EXP_NAME = "DVC_EXP_NAME"
DVC_EXP_BASELINE_REV = "DVC_EXP_BASELINE_REV"

# How much the library says on stderr: DEBUG, INFO (the default), WARNING or ERROR (tracking/log.py).
TRACKING_LOGLEVEL = "TRACKING_LOGLEVEL"

# The room, in MiB, a training must find free on each disk it writes to beyond its model and snapshot (16 unless
# set: metrics, provenance, plots, SQLite's log); lower it on a small disk watched otherwise (tracking/training/space.py).
TRACKING_FREE_SPACE_MB = "TRACKING_FREE_SPACE_MB"

# Set by our stages for the processes they start.
TRACKING_PROJECT_ROOT = "TRACKING_PROJECT_ROOT"
# Set by `tracking rerun` and `tracking calibrate` for the team's script they run: the experiment its run goes to
# (tracking.start's default is the project folder's name, which a temporary worktree does not have) and the run
# it re-creates (tagged `rerun_of`); `tracking rerun` sets the latter for the pipeline's stages too, whose train
# stage then leaves the weights' comparison to the rerun's own report.
TRACKING_EXPERIMENT = "TRACKING_EXPERIMENT"
TRACKING_RERUN_OF = "TRACKING_RERUN_OF"
# Set by `tracking calibrate` for each repeat of a team's script: JSON of the parent run, variant, repeat and key.
TRACKING_REPEAT = "TRACKING_REPEAT"
# Set in a kernel `tracking kernel install` made (tracking/script/kernel.py): its start-up variables came from params.
TRACKING_KERNEL = "TRACKING_KERNEL"
# That kernel's name in Jupyter's list when `--name` is not given (the rerun advice names it too).
DEFAULT_KERNEL = "tracking"


def telemetry_off_by_default() -> None:
    """Keep MLflow's usage telemetry off in this process and the ones it starts, unless the user set the switch.

    MLflow reads the variable once, when `mlflow` is imported, so this runs before anything imports it.
    """
    os.environ.setdefault(MLFLOW_DISABLE_TELEMETRY, "true")
