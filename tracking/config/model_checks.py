"""The checks of params.yaml that need the model or the data, made once the model is built and the data read:
`train.loss`, `train.metrics` and `train.loss_weights` against the model's output names, and `train.class_weight`
against the data's classes. tracking/config/params.py checks everything the file alone decides."""

from __future__ import annotations

from tracking.config.params import TrainParams
from tracking.errors import BadValue, ParamsError


def check_output_keys(train: TrainParams, outputs: list[str], path: str = "params.yaml") -> None:
    """A `BadValue` where a mapping of `train.loss`, `train.metrics` or `train.loss_weights` names an output the
    model does not have (`outputs`, its output names), or a `loss_weights` list has not one weight per output."""
    for key in ("loss", "metrics", "loss_weights"):
        value = getattr(train, key)
        if isinstance(value, dict):
            unknown = [name for name in value if name not in outputs]
            if unknown:
                raise BadValue(
                    path,
                    f"train.{key}",
                    f"a mapping keyed by the model's output names ({', '.join(outputs) or 'none: it declares no outputs'})",
                    unknown[0],
                    ": name an output the model has, or give one value for every output",
                )
    weights = train.loss_weights
    if isinstance(weights, list) and len(weights) != len(outputs):
        raise BadValue(
            path,
            "train.loss_weights",
            f"one weight per model output ({len(outputs)}: {', '.join(outputs)})",
            weights,
            ", or key them by output name",
        )


def check_class_weight(train_params: TrainParams, n_classes: int | dict[str, int]) -> None:
    """Refuse a `train.class_weight` for a model of several outputs (`n_classes` by output name), whose targets
    are not one label per sample, and a mapping that names a class the data lacks (labels are 0..K-1)."""
    weights = train_params.class_weight
    if weights is not None and isinstance(n_classes, dict):
        raise ParamsError(
            f"train.class_weight: weights the classes of one label per sample, but the data's y has several outputs "
            f"({', '.join(n_classes)})",
            fix="set train.class_weight: null and give the loader's sample_weight (one weight per sample) instead",
        )
    lacking = sorted(label for label in weights if label >= n_classes) if isinstance(weights, dict) else []
    if lacking:
        raise ParamsError(
            f"train.class_weight: class {lacking[0]} is not a class of the data, whose labels are 0..{n_classes - 1}",
            fix="weight only the data's classes (a class left out weighs 1.0)",
        )
