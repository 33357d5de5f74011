"""Environment gatherer: allow-listed variables only, with secret-looking values redacted.

Nothing outside ALLOWED_PREFIXES/ALLOWED_NAMES is read. Even an allowed name is redacted when its name
says it holds a credential or any word of its value looks like a token (the rules: tracking/provenance/
redaction.py), so a `TF_API_TOKEN` never reaches a store; URLs in a value lose their user:password@ part.
"""

from __future__ import annotations

import os
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


def gather_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables, sorted, with secret-looking values replaced by '<redacted>'."""
    environ = os.environ if environ is None else environ
    kept = {}
    for name in sorted(environ):
        if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES):
            value = strip_url_userinfo(environ[name])
            kept[name] = REDACTED if looks_secret(name, value) else value
    return kept
