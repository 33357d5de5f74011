"""Names of the environment variables the project reads or sets, in one place."""

from __future__ import annotations

MLFLOW_TRACKING_URI = "MLFLOW_TRACKING_URI"
PYTHONHASHSEED = "PYTHONHASHSEED"
TF_ENABLE_ONEDNN_OPTS = "TF_ENABLE_ONEDNN_OPTS"
TF_DETERMINISTIC_OPS = "TF_DETERMINISTIC_OPS"
TF_CPP_MIN_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"

# Set by DVC for the commands of the stages it runs.
DVC_ROOT = "DVC_ROOT"
DVC_EXP_NAME = "DVC_EXP_NAME"
DVC_EXP_BASELINE_REV = "DVC_EXP_BASELINE_REV"

# Set by our stages for the processes they start.
TRACKING_PROJECT_ROOT = "TRACKING_PROJECT_ROOT"
