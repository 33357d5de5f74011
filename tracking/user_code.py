"""A team's own code named in params.yaml as "package.module:function": found, imported and described.

Modules are searched at the project root first (so a team's `models/resnet.py` is `models.resnet:build`),
then among installed packages. What was imported is recorded (file hash, package version) so a run says which
version of the team's code trained it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import sys
from pathlib import Path
from typing import Any, Callable

from tracking.errors import UserCodeError


def load_callable(spec: str, key: str, root: Path) -> Callable[..., Any]:
    """The function `spec` names; a `UserCodeError` naming `key` when it does not import or is not callable."""
    module_name, _, attribute = spec.partition(":")
    module = import_module(module_name, key, root)
    found = getattr(module, attribute, None)
    if found is None:
        raise UserCodeError(f"{key}: module '{module_name}' ({getattr(module, '__file__', '?')}) has no '{attribute}'; "
                            f"name a function defined there, e.g. '{module_name}:build', in params.yaml")
    if not callable(found):
        raise UserCodeError(f"{key}: '{spec}' is a {type(found).__name__}, not a function; name a callable in params.yaml")
    return found


def import_module(module_name: str, key: str, root: Path) -> Any:
    """Import `module_name` with the project root first on the path."""
    root_entry = str(root.resolve())
    if root_entry not in sys.path:
        sys.path.insert(0, root_entry)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            raise UserCodeError(f"{key}: no module '{module_name}' at the project root ({root_entry}) or among installed "
                                "packages; check the spelling in params.yaml or install the package") from err
        raise UserCodeError(f"{key}: module '{module_name}' failed to import: {err}; install what it needs") from err
    except Exception as err:  # the user's module raised while importing: show its error, not ours
        raise UserCodeError(f"{key}: module '{module_name}' raised {type(err).__name__} while importing: {err}; "
                            "fix the module") from err


def describe_callable(spec: str, function: Callable[..., Any], root: Path) -> dict[str, str]:
    """Where `function` came from: its module's file (relative to the project when inside it), SHA-256, package version."""
    module = sys.modules.get(getattr(function, "__module__", ""), None)
    file = Path(getattr(module, "__file__", "") or "")
    record = {"spec": spec}
    if file.is_file():
        resolved = file.resolve()
        inside = resolved.is_relative_to(root.resolve()) and "site-packages" not in resolved.parts
        record["file"] = str(resolved.relative_to(root.resolve())) if inside else str(resolved)
        record["file_sha256"] = hashlib.sha256(resolved.read_bytes()).hexdigest()
        if not inside:
            record["package_version"] = _distribution_version(spec.partition(":")[0])
    return record


def _distribution_version(module_name: str) -> str:
    """The installed distribution version that provides `module_name`'s top-level package, or 'unknown'."""
    top = module_name.split(".")[0]
    for distribution in importlib.metadata.packages_distributions().get(top, []):
        try:
            return f"{distribution} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"
