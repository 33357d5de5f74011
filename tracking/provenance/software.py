"""Software gatherer: interpreter, key library versions, TensorFlow's CUDA/cuDNN build, every package."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

KEY_PACKAGES = ("tensorflow", "tensorflow-cpu", "keras", "numpy", "mlflow", "dvc", "scikit-learn", "tracking")


def gather_software() -> dict[str, Any]:
    """Versions that change numerics or behaviour; absent packages are left out, not guessed."""
    versions = {"python": platform.python_version()}
    versions.update({name: found for name in KEY_PACKAGES if (found := installed_version(name)) is not None})
    return {
        "versions": versions,
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
        "tensorflow_build": tensorflow_build(),
    }


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


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
    """Every installed distribution as 'name==version', sorted: the full list goes to an artifact.

    Read from the `.dist-info` folder names (`name-version.dist-info`), which is as exact as the metadata
    and avoids parsing hundreds of METADATA files on every run.
    """
    found = {}
    for entry in sys.path:
        folder = Path(entry or ".")
        if not folder.is_dir():
            continue
        for info in folder.glob("*.dist-info"):
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            if version:
                found.setdefault(name.lower().replace("_", "-"), version)
    return [f"{name}=={version}" for name, version in sorted(found.items())]
