"""The baseline: a frozen copy of the training configuration, kept apart from params.yaml.

`tracking baseline` writes it; the `calibrate` stage reads only it, so editing `train.*` in params.yaml
changes the candidate and leaves the calibration cached.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracking.config.params import Params
from tracking.config.params_file import load_params
from tracking.errors import ParamsError, UserCodeError
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


@contextmanager
def blamed_on_baseline(params: Params, baseline: Params) -> Iterator[None]:
    """A `UserCodeError` in the block (building or checking the baseline's model) said of the baseline file, which
    is what was built, not params.yaml; where the baseline names another builder than params.yaml (a template's
    baseline.yaml never frozen from the team's params), saying so, with `tracking baseline` as the fix."""
    try:
        yield
    except UserCodeError as err:
        path = params.calibration.baseline
        frozen, current = baseline.model.builder, params.model.builder
        said = err.problem.replace("params.yaml", path)
        if frozen != current:
            raise UserCodeError(
                f"{path}: the frozen baseline builds '{frozen}', but params.yaml names '{current}', so it was not "
                f"frozen from this params.yaml; building it failed: {said}",
                fix="freeze params.yaml as the baseline with `tracking baseline`, then `dvc repro`",
            ) from err
        fix = (err.fix or "").replace("params.yaml", path)
        raise UserCodeError(
            f"{path} (the frozen baseline): {said}",
            fix=f"{fix + ', or ' if fix else ''}freeze params.yaml again with `tracking baseline`",
        ) from err
