"""What a team's model outputs (`prov.model.outputs`: logits, probabilities or values), as the script declares it
to `run.log_model` or its compiled loss does; `unknown` when nothing declares it, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracking.errors import UsageError

# What a model's outputs are, as `run.log_model(outputs=...)` declares them; `unknown` when nothing declares them.
OUTPUT_KINDS = ("logits", "probabilities", "values")
UNKNOWN_OUTPUTS = "unknown"


def declared_outputs(model: Any, outputs: str | Mapping[str, str] | None, classifier: bool | None) -> str:
    """`prov.model.outputs`: what the script declares (a kind, or `name: kind` per output), else what the compiled
    loss declares of a classifier's outputs (a Keras loss's `from_logits`, a loss named by string) or `values` for
    targets that are not class labels, else `unknown`: an uncompiled model, a loss per output or a loss function of
    the script's own declare nothing, and predicting would move the generators of a model that draws at inference."""
    from tracking.training.scoring import declared_output_kind

    if outputs is not None:
        declared = dict(outputs) if isinstance(outputs, Mapping) else {"": outputs}
        names = list(getattr(model, "output_names", None) or [])
        wrong = [f"{name}={kind!r}" for name, kind in declared.items() if kind not in OUTPUT_KINDS]
        wrong += [f"{name!r} is not an output" for name in declared if name and names and name not in names]
        if wrong:
            raise UsageError(
                f"run.log_model(outputs=...): {', '.join(wrong)}",
                fix=f"name one of {', '.join(OUTPUT_KINDS)}, or map output names ({', '.join(names)}) to them",
            )
        return "; ".join(f"{name}: {kind}" if name else kind for name, kind in declared.items())
    loss = getattr(model, "loss", None)
    if loss is None or isinstance(loss, (Mapping, list, tuple)) or classifier is None:
        return UNKNOWN_OUTPUTS
    return (declared_output_kind(model) or UNKNOWN_OUTPUTS) if classifier else "values"
