"""Environment gatherer: allow-listed variables only, with secret-looking values redacted.

Nothing outside ALLOWED_PREFIXES/ALLOWED_NAMES is read, nor Terraform's TF_* variables. Even an allowed name is redacted when its name
says it holds a credential or any word of its value looks like a token (the rules: tracking/provenance/
redaction.py), so a `TF_API_TOKEN` never reaches a store; URLs in a value lose their user:password@ part.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from tracking.provenance.redaction import REDACTED, looks_secret, strip_url_userinfo

ALLOWED_PREFIXES = (
    "TF_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "XLA_",
    "OMP_",
    "MKL_",
    "KMP_",
    "ONEDNN_",
    "DNNL_",
    "OPENBLAS_",
    "NCCL_",
    "CUBLAS_",
    "DVC_EXP_",
    "KERAS_",
)
ALLOWED_NAMES = ("PYTHONHASHSEED", "DVC_ROOT", "MLFLOW_EXPERIMENT_NAME", "LANG", "LC_ALL")
# Terraform shares TensorFlow's TF_ prefix; its variables are not ours to record (TF_VAR_* inputs and
# TF_TOKEN_* hold credentials whose values need not look like tokens).
TERRAFORM_PREFIXES = (
    "TF_VAR_",
    "TF_TOKEN_",
    "TF_CLI_",
    "TF_LOG",
    "TF_INPUT",
    "TF_WORKSPACE",
    "TF_DATA_DIR",
    "TF_PLUGIN_CACHE",
    "TF_IN_AUTOMATION",
    "TF_REGISTRY_",
    "TF_IGNORE",
    "TF_APPEND_USER_AGENT",
    "TF_STATE_PERSIST_INTERVAL",
)
# Variables DVC sets to a git commit id, which the opaque-word rule would otherwise take for a token.
COMMIT_VALUED = ("DVC_EXP_BASELINE_REV",)
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def gather_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables, sorted, with secret-looking values replaced by '<redacted>'."""
    environ = os.environ if environ is None else environ
    kept = {}
    for name in sorted(environ):
        if name.startswith(TERRAFORM_PREFIXES) or not (name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)):
            continue
        value = strip_url_userinfo(environ[name])
        if name in COMMIT_VALUED and _COMMIT_ID.fullmatch(value):
            kept[name] = value
        else:
            kept[name] = REDACTED if looks_secret(name, value) else value
    return kept
