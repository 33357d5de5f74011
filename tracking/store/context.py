"""MLflow's context tags (user, source file, git commit, branch and remote) with every value passed through the
redactor. MLflow resolves them itself when a run starts and when a model is logged, and sends what it finds:
a branch named after a token reached the store that way. Handing these back as the call's own tags overrides
MLflow's values before anything is written, so its raw values never leave the process."""

from __future__ import annotations

from tracking.redaction import redact_name


def context_tags() -> dict[str, str]:
    """The tags MLflow's context providers give this process, each value redacted as a name from outside."""
    from mlflow.tracking.context import registry

    return {key: redact_name(str(value)) for key, value in registry.resolve_tags().items()}
