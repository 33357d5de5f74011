"""Secrets by reference in params: a value written `env:NAME` is read from the environment when the stage runs,
and only the reference is recorded (MLflow, dvc.lock, git, a rerun); a value or key that looks like a
credential is refused before any run opens, with that fix, rather than stored or silently redacted (a redacted
param could not be re-created by `tracking rerun`).

As Hydra's `${oc.env:NAME}` and Kubernetes' `secretKeyRef` do: the configuration names the credential, the
environment holds it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracking.errors import ParamsError
from tracking.redaction import redact_name, why_secret
from tracking.yaml_text import flatten

ENV_REFERENCE = "env:"  # `data.kwargs.db_pw: env:DB_PW`
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def reference(value: Any) -> str | None:
    """The environment variable a param's value refers to (`env:NAME` -> NAME), or None when it is a value."""
    if isinstance(value, str) and value.startswith(ENV_REFERENCE) and _NAME.fullmatch(value[len(ENV_REFERENCE) :]):
        return value[len(ENV_REFERENCE) :]
    return None


def resolved(kwargs: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """`kwargs` (nested, under the dotted `prefix`: `data.kwargs.`) with every `env:NAME` replaced by NAME's
    value in the environment; a `ParamsError` naming the key when NAME is not set."""
    found: dict[str, Any] = {}
    for key, value in kwargs.items():
        if isinstance(value, Mapping):
            found[key] = resolved(value, f"{prefix}{key}.")
            continue
        name = reference(value)
        if name is not None and name not in os.environ:
            raise ParamsError(
                f"params.yaml: {prefix}{key} is {value}, but {name} is not set in the environment",
                fix=f"export {name} where the stage runs (`export {name}=...` before `dvc repro`)",
            )
        found[key] = value if name is None else os.environ[name]
    return found


def referenced_values(kwargs: Mapping[str, Any]) -> set[str]:
    """The values the environment gives `kwargs`' references: what an error from the code given them must not print."""
    names = {reference(value) for value in flatten(dict(kwargs)).values()}
    return {os.environ[name] for name in names if name and len(os.environ.get(name, "")) >= 4}


def refuse_credentials(path: Path | str, tree: dict[str, Any]) -> None:
    """A `ParamsError` for the first param of `tree` that holds a credential by the one rule (`why_secret`: its key,
    its value's form, or both), unless it is a reference. The line names the key (a token in it replaced), why,
    and the fix, in words the redactor leaves readable."""
    for key, value in flatten(tree).items():
        why = why_secret(key, value)
        if why is None:
            continue
        shown = redact_name(key)
        if shown != key:
            fix = (
                "rename the key for what its value is for, and give the token as a value written "
                f"`{ENV_REFERENCE}NAME`, with NAME exported where the stage runs"
            )
        else:
            name = re.sub(r"[^A-Z0-9]+", "_", key.rsplit(".", 1)[-1].upper()).strip("_") or "SECRET"
            fix = (
                f"write its value as the reference `{ENV_REFERENCE}{name}` and export {name} where the stage runs: "
                "the value is read from the environment then, and only the reference is recorded"
            )
        raise ParamsError(
            f"{path}: {shown} is refused, {why}; params are recorded in MLflow, dvc.lock and git, so a credential is "
            "never taken as a value",
            fix=fix,
        )
