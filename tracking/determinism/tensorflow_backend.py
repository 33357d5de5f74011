"""TensorFlow as Keras's backend: oneDNN set before import, threads and op determinism right after, read back.

oneDNN changes CPU numerics and is read by TensorFlow at import time; thread counts and op determinism are set
before the runtime starts. What is recorded is what TensorFlow reports, not what was asked.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any

from tracking.config.params import DeterminismParams
from tracking.determinism.backend import TENSORFLOW, EffectiveDeterminism
from tracking.env import TF_CPP_MIN_LOG_LEVEL, TF_DETERMINISTIC_OPS, TF_ENABLE_ONEDNN_OPTS
from tracking.errors import UsageError

# The module whose import reads `import_time_environment`: once it is imported, those variables are too late.
STARTED_BY = "tensorflow"


def import_tensorflow() -> ModuleType:
    """`tensorflow`, imported without JAX where JAX is installed: TensorFlow's TFLite converter imports `jax` when it
    can (0.45 s more for every process that imports TensorFlow, which a training never uses). JAX is hidden from
    that one import only, so a team's own `import jax` afterwards works as ever."""
    if "tensorflow" in sys.modules or "jax" in sys.modules:
        import tensorflow

        return tensorflow
    sys.modules["jax"] = None  # type: ignore[assignment]  # `import jax` raises ImportError meanwhile
    try:
        import tensorflow
    finally:
        del sys.modules["jax"]
    return tensorflow


def import_time_environment(params: DeterminismParams) -> dict[str, str]:
    """The variables TensorFlow reads when it is imported."""
    return {TF_ENABLE_ONEDNN_OPTS: "1" if params.onednn else "0"}


def configure_environment(params: DeterminismParams) -> None:
    """Set the variables TensorFlow reads at import; refuse if it is already imported with other ones."""
    wanted = import_time_environment(params)[TF_ENABLE_ONEDNN_OPTS]
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
    tf = import_tensorflow()
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
    tf = import_tensorflow()
    from tensorflow.python.framework import config as tf_config
    from tensorflow.python.util import _pywrap_util_port

    return EffectiveDeterminism(
        op_determinism=bool(tf_config.is_op_determinism_enabled()),
        intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
        inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
        onednn=bool(_pywrap_util_port.IsMklEnabled()),
        backend=TENSORFLOW,
    )


def visible_gpus() -> list[dict[str, Any]]:
    """The GPUs TensorFlow sees, with their name and compute capability."""
    tf = import_tensorflow()

    found = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        capability = details.get("compute_capability")
        found.append(
            {
                "name": details.get("device_name", device.name),
                "device": device.name,
                "compute_capability": ".".join(map(str, capability)) if capability else None,
            }
        )
    return found


def build() -> dict[str, Any]:
    """TensorFlow's version and the CUDA/cuDNN it was built against (empty fields on a CPU-only build)."""
    tf = import_tensorflow()

    info = dict(tf.sysconfig.get_build_info())
    return {
        "version": tf.__version__,
        "is_cuda_build": bool(info.get("is_cuda_build", False)),
        "cuda_version": info.get("cuda_version"),
        "cudnn_version": info.get("cudnn_version"),
        "is_rocm_build": bool(info.get("is_rocm_build", False)),
    }
