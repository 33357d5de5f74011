"""Software gatherer: interpreter, key library versions, the Keras backend with its CUDA/cuDNN, every package."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from itertools import chain
from pathlib import Path
from typing import Any

from tracking.determinism.backend import BACKEND_PACKAGES
from tracking.determinism.settings import build_record

KEY_PACKAGES = (*chain(*BACKEND_PACKAGES.values()), "keras", "numpy", "mlflow", "dvc", "scikit-learn", "tracking")


def gather_software(backend: bool = True) -> dict[str, Any]:
    """Versions that change numerics or behaviour; absent packages are left out, not guessed. The backend's build
    (its CUDA/cuDNN) only with `backend`: reading it imports the backend."""
    versions = {"python": platform.python_version()}
    versions.update({name: found for name in KEY_PACKAGES if (found := installed_version(name)) is not None})
    software = {
        "versions": versions,
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
    }
    return {**software, "backend": build_record()} if backend else software


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


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
