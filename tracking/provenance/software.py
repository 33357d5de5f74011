"""Software gatherer: interpreter, key library versions, TensorFlow's CUDA/cuDNN build, every package."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

KEY_PACKAGES = ("tensorflow", "tensorflow-cpu", "keras", "numpy", "mlflow", "dvc", "scikit-learn", "tracking")


def gather_software() -> dict[str, Any]:
    """Versions that change numerics or behaviour; absent packages are left out, not guessed."""
    versions = {"python": platform.python_version()}
    for name in KEY_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"versions": versions, "python_implementation": platform.python_implementation(),
            "executable": sys.executable, "tensorflow_build": tensorflow_build()}


def tensorflow_build() -> dict[str, Any]:
    """CUDA/cuDNN versions TensorFlow was built against (empty fields on a CPU-only build)."""
    import tensorflow as tf

    info = dict(tf.sysconfig.get_build_info())
    return {
        "is_cuda_build": bool(info.get("is_cuda_build", False)),
        "cuda_version": info.get("cuda_version"),
        "cudnn_version": info.get("cudnn_version"),
        "is_rocm_build": bool(info.get("is_rocm_build", False)),
    }


def installed_packages() -> list[str]:
    """Every installed distribution as 'name==version', sorted: the full list goes to an artifact."""
    seen = {(dist.metadata["Name"] or "").lower(): dist.version for dist in metadata.distributions()}
    return [f"{name}=={version}" for name, version in sorted(seen.items()) if name]
