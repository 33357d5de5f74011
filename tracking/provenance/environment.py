"""Environment gatherer: allow-listed variables only, with secret-looking values redacted.

Nothing outside ALLOWED_PREFIXES/ALLOWED_NAMES is read: of the TF_* names only TensorFlow's own families
(TF_CPP_*, TF_XLA_*, TF_GPU_*, ...), never Terraform's or OpenTofu's (TF_VAR_*, TF_TOKEN_*, TF_ENCRYPTION).
Even an allowed name is redacted when its name says it holds a credential or its value holds what the rules
take out (tracking/redaction/), so a `TF_CPP_API_TOKEN` never reaches a store; URLs in a value
lose their user:password@ part.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from tracking.redaction import REDACTED, looks_secret, strip_url_userinfo

ALLOWED_PREFIXES = (
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
    "KERAS_",
    # TensorFlow's own families of TF_ variables. Terraform and OpenTofu share the TF_ prefix (TF_VAR_*,
    # TF_TOKEN_*, TF_ENCRYPTION, TF_CLI_ARGS, ...) and hold credentials whose values need not look like tokens,
    # so a TF_ name is taken only in these families or by its name in ALLOWED_NAMES.
    "TF_CPP_",
    "TF_XLA_",
    "TF_GPU_",
    "TF_CUDNN_",
    "TF_CUDA_",
    "TF_ENABLE_",
    "TF_DISABLE_",
    "TF_NUM_",
    "TF_USE_",
    "TF_MKL_",
    "TF_ONEDNN_",
    "TF_TRT_",
    "TF_JIT_",
    "TF_DUMP_",
)
# Of DVC's variables, the two it sets for an experiment; a `DVC_EXP_*` of the user's own (a note) is free text
# that no rule can tell a credential in ("tried with token hunter2..."), and is not DVC's to record.
ALLOWED_NAMES = (
    "PYTHONHASHSEED",
    "DVC_ROOT",
    "DVC_EXP_BASELINE_REV",
    "DVC_EXP_NAME",
    "MLFLOW_EXPERIMENT_NAME",
    "LANG",
    "LC_ALL",
    "TF_CONFIG",
    "TF_DETERMINISTIC_OPS",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_FORCE_UNIFIED_MEMORY",
    "TF_OVERRIDE_GLOBAL_THREADPOOL",
    "TF2_BEHAVIOR",
)
# Variables DVC sets to a git commit id, which the opaque-word rule would otherwise take for a token.
COMMIT_VALUED = ("DVC_EXP_BASELINE_REV",)
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def gather_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables, sorted, with secret-looking values replaced by '<redacted>'."""
    environ = os.environ if environ is None else environ
    kept = {}
    for name in sorted(environ):
        if not (name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)):
            continue
        value = strip_url_userinfo(environ[name])
        if name in COMMIT_VALUED and _COMMIT_ID.fullmatch(value):
            kept[name] = value
        else:
            kept[name] = REDACTED if looks_secret(name, value) else value
    return kept
