"""Environment gatherer: allow-listed variables only, with secret-looking values redacted.

Nothing outside ALLOWED_PREFIXES/ALLOWED_NAMES is read. Even an allowed name is redacted when its name
says it holds a credential or any word of its value looks like a token, so a `TF_API_TOKEN` never reaches
a store; URLs in a value lose their user:password@ part.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

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
REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSWD|CREDENTIAL|API[_-]?KEY|PRIVATE|AUTH", re.IGNORECASE)
_TOKEN_PREFIX = re.compile(r"^(ghp_|gho_|ghs_|ghu_|github_pat_|glpat-|xox[abprs]-|sk-|AKIA|ASIA|hf_|eyJ)")
_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_\-+/=]{32,}$")
_WORD_SEPARATORS = re.compile(r"[\s,;]+")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)[^\s/@]+@", re.IGNORECASE)


def gather_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables, sorted, with secret-looking values replaced by '<redacted>'."""
    environ = os.environ if environ is None else environ
    kept = {}
    for name in sorted(environ):
        if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES):
            value = _URL_USERINFO.sub(r"\g<scheme>", environ[name])
            kept[name] = REDACTED if looks_secret(name, value) else value
    return kept


def looks_secret(name: str, value: str) -> bool:
    """A credential by its name, or a value with a word that looks like a token or assigns a secret-looking name."""
    if _SECRET_NAME.search(name):
        return True
    return any(_looks_like_token(word) for word in _WORD_SEPARATORS.split(value))


def _looks_like_token(word: str) -> bool:
    """A known token prefix, an assignment to a credential name, or a long opaque word with letters and digits.

    A command-line flag (`--xla_..._count=8`) is judged by its value only, so long flag names stay readable.
    """
    key, assigns, value = word.partition("=")
    if assigns and _SECRET_NAME.search(key):
        return True
    candidates = [value] if word.startswith("-") else [word, value] if assigns else [word]
    return any(_TOKEN_PREFIX.match(candidate) or _opaque(candidate) for candidate in candidates)


def _opaque(word: str) -> bool:
    shaped = _TOKEN_SHAPE.match(word) and not word.startswith("/")
    return bool(shaped and re.search(r"\d", word) and re.search(r"[A-Za-z]", word))
