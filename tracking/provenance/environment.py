"""Environment gatherer: allow-listed variables only, with secret-looking values redacted.

Nothing outside ALLOWED_PREFIXES/ALLOWED_NAMES is read. Even an allowed name is redacted when its name
says it holds a credential or its value looks like a token, so a `TF_API_TOKEN` never reaches a store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

ALLOWED_PREFIXES = ("TF_", "CUDA_", "CUDNN_", "NVIDIA_", "XLA_", "OMP_", "MKL_", "KMP_", "ONEDNN_", "DNNL_",
                    "OPENBLAS_", "NCCL_", "CUBLAS_", "DVC_EXP_", "KERAS_")
ALLOWED_NAMES = ("PYTHONHASHSEED", "DVC_ROOT", "MLFLOW_EXPERIMENT_NAME", "LANG", "LC_ALL")
REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSWD|CREDENTIAL|API_?KEY|PRIVATE|AUTH", re.IGNORECASE)
_TOKEN_PREFIX = re.compile(r"^(ghp_|gho_|ghs_|ghu_|github_pat_|glpat-|xox[abprs]-|sk-|AKIA|ASIA|hf_|eyJ)")
_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_\-+/=]{32,}$")


def gather_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables, sorted, with secret-looking values replaced by '<redacted>'."""
    environ = os.environ if environ is None else environ
    kept = {}
    for name in sorted(environ):
        if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES):
            value = environ[name]
            kept[name] = REDACTED if looks_secret(name, value) else value
    return kept


def looks_secret(name: str, value: str) -> bool:
    """A credential by its name, a known token prefix, or a long opaque value with letters and digits."""
    if _SECRET_NAME.search(name) or _TOKEN_PREFIX.match(value):
        return True
    opaque = _TOKEN_SHAPE.match(value) and not value.startswith("/")
    return bool(opaque and re.search(r"\d", value) and re.search(r"[A-Za-z]", value))
