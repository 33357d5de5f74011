"""The baseline: a frozen copy of the training configuration, kept apart from params.yaml.

`tracking baseline` writes it; the `calibrate` stage reads only it, so editing `train.*` in params.yaml
changes the candidate and leaves the calibration cached.
"""

from __future__ import annotations

from pathlib import Path

from tracking.config.params import Params
from tracking.config.params_file import load_params
from tracking.errors import ParamsError
from tracking.yaml_text import yaml_editor

FROZEN_SECTIONS = ("data", "seeds", "determinism", "model", "train")
HEADER = "# Frozen baseline configuration, written by `tracking baseline`; calibration trains this, not params.yaml.\n"


def load_baseline(path: str | Path) -> Params:
    """The baseline params; a missing file says how to create it."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(
            f"{path}: baseline not found; run `tracking baseline` to freeze the current params.yaml as the baseline"
        )
    return load_params(path)


def freeze(params_path: Path, baseline_path: Path) -> None:
    """Write the training sections of `params_path` to `baseline_path`, as YAML that DVC reads back to the same values."""
    params = load_params(params_path)
    frozen = {name: section for name, section in params.model_dump(mode="json").items() if name in FROZEN_SECTIONS}
    with open(baseline_path, "w", encoding="utf-8") as handle:
        handle.write(HEADER)
        yaml_editor().dump(frozen, handle)
