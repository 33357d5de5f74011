"""Determinism settings: applied before and after TensorFlow is imported, then read back from it.

oneDNN changes CPU numerics and is read by TensorFlow at import time, so `configure_environment` must run
before the first `import tensorflow`; thread counts and op determinism are set right after it, before the
runtime starts. What is recorded is what TensorFlow reports, not what was asked.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass

from tracking.config.params import DeterminismParams
from tracking.env import TF_CPP_MIN_LOG_LEVEL, TF_DETERMINISTIC_OPS, TF_ENABLE_ONEDNN_OPTS
from tracking.errors import UsageError


@dataclass(frozen=True)
class EffectiveDeterminism:
    """Determinism as TensorFlow reports it after start-up."""

    op_determinism: bool
    intra_op_threads: int
    inter_op_threads: int
    onednn: bool


def configure_environment(params: DeterminismParams) -> None:
    """Set the variables TensorFlow reads at import; refuse if it is already imported with other ones."""
    wanted = "1" if params.onednn else "0"
    if "tensorflow" in sys.modules and os.environ.get(TF_ENABLE_ONEDNN_OPTS) != wanted:
        raise UsageError(
            "determinism.onednn must be applied before TensorFlow is imported",
            fix="call tracking.determinism.settings.configure_environment first",
        )
    os.environ[TF_ENABLE_ONEDNN_OPTS] = wanted
    os.environ.setdefault(TF_CPP_MIN_LOG_LEVEL, "2")
    os.environ.pop(TF_DETERMINISTIC_OPS, None)


def apply(params: DeterminismParams) -> EffectiveDeterminism:
    """Configure TensorFlow's threads and op determinism, then return the effective values."""
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config

    try:
        tf.config.threading.set_intra_op_parallelism_threads(params.intra_op_threads)
        tf.config.threading.set_inter_op_parallelism_threads(params.inter_op_threads)
    except RuntimeError:
        pass  # The runtime already started (a second run in one process); read back what is in force.
    if params.op_determinism:
        tf.config.experimental.enable_op_determinism()
    elif tf_config.is_op_determinism_enabled():
        tf_config.disable_op_determinism()
    return effective()


def effective() -> EffectiveDeterminism:
    """What TensorFlow has in force now."""
    import tensorflow as tf
    from tensorflow.python.framework import config as tf_config
    from tensorflow.python.util import _pywrap_util_port

    return EffectiveDeterminism(
        op_determinism=bool(tf_config.is_op_determinism_enabled()),
        intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
        inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
        onednn=bool(_pywrap_util_port.IsMklEnabled()),
    )


def as_record(requested: DeterminismParams, actual: EffectiveDeterminism) -> dict[str, dict[str, object]]:
    """Requested and effective settings side by side, for provenance."""
    return {"requested": requested.model_dump(), "effective": asdict(actual)}


def is_determinism_error(error: BaseException) -> bool:
    """Did TensorFlow refuse an op because op determinism is on (rather than fail for another reason)?"""
    return determinism_refusal(error) is not None


def determinism_refusal(error: BaseException) -> str | None:
    """The line of TensorFlow's message that mentions determinism, leaving out traceback lines (paths may too)."""
    for line in strip_ansi(str(error)).splitlines():
        line = line.strip()
        if "determinis" in line.lower() and not line.startswith(("File ", "[[", "Detected at node")):
            return re.sub(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\]", "", line)
    return None


def strip_ansi(text: str) -> str:
    """`text` without terminal colour codes (TensorFlow colours some of its messages)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
