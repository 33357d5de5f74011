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
from tracking.redaction import names_secret, redact_line, redact_name
from tracking.yaml_text import flatten, param_text

ENV_REFERENCE = "env:"  # `data.kwargs.db_pw: env:DB_PW`
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A team's code named as "package.module:function" (`data.loader`, `model.builder`): judged by its tokens only,
# so a module named `secret_loader` is not taken for an assignment.
_CODE_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


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
    """A `ParamsError` for the first param of `tree` whose key names a credential (`names_secret`: `db_pw`,
    `apitoken`, `signingkey`, ...) or whose value holds one (a token, a URL's password, a signed URL, a JDBC or
    .pgpass password: what the redactor takes out), unless it is a reference, null, true/false or empty."""
    for key, value in flatten(tree).items():
        if reference(value) is not None or value is None or isinstance(value, bool) or value in ("", [], {}):
            continue
        text = param_text(value)
        if names_secret(key):
            why = "its name says it holds a credential"
        elif (redact_name if _CODE_SPEC.fullmatch(text) else redact_line)(text) != text:
            why = "its value holds a credential (a token, a password in a URL or connection string, a signature)"
        else:
            continue
        name = re.sub(r"[^A-Z0-9]+", "_", key.rsplit(".", 1)[-1].upper()).strip("_") or "SECRET"
        raise ParamsError(
            f"{path}: {key}: {why}; params are recorded in MLflow, dvc.lock and git, so a credential is never taken "
            "as a value",
            fix=f"write it as a reference, `{key.rsplit('.', 1)[-1]}: {ENV_REFERENCE}{name}`, and export {name} where "
            "the stage runs: the value is read from the environment then, and only the reference is recorded",
        )
