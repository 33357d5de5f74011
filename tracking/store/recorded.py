"""The runs the project's outputs name, checked against the store: a deleted or replaced `mlflow.db` leaves
outputs that DVC takes as up to date while the runs they name are gone.

`outputs/run.json` names the train stage's run (evaluate and compare log to it), `calibration/noise.json` the
calibration's parent run. DVC tracks neither the store nor the runs, so after `rm mlflow.db` a `dvc repro` says
"up to date" and the next stage that reads those runs fails. `tracking doctor` lists such runs; a stage that
reads them calls `require_recorded_runs` first, which names each missing run and the `dvc repro --force` that
makes it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.errors import RunStateError
from tracking.layout import CALIBRATE, NOISE_FILE, RUN_FILE, TRAIN
from tracking.store.reads import present_run

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

# Each file that names a run: the key holding its id, and the stage that writes it (and re-creates the run).
NAMED_BY = {RUN_FILE: ("run_id", TRAIN), NOISE_FILE: ("parent_run_id", CALIBRATE)}


@dataclass(frozen=True)
class RecordedRun:
    """A run an output file names: the file (relative to the project), the run's id, the stage that made both."""

    file: Path
    run_id: str
    stage: str

    def describe(self, uri: str) -> str:
        return f"{self.file} names MLflow run {self.run_id}, which {uri} does not hold"


def read_run_file(root: Path) -> dict[str, Any]:
    """`outputs/run.json` as the train stage wrote it (an object naming its run's id); a file that is not is one
    line naming it and the `dvc repro` that writes it again."""
    path = root / RUN_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        record, why = None, f"not JSON ({err})"
    else:
        why = "no run_id in it"
    if not isinstance(record, dict) or not isinstance(record.get("run_id"), str) or not record["run_id"]:
        raise RunStateError(
            f"{RUN_FILE} is damaged ({why})", fix=f"write it again with `dvc repro --force --single-item {TRAIN}`"
        )
    return record


def recorded_runs(root: Path, files: tuple[Path, ...] = tuple(NAMED_BY)) -> list[RecordedRun]:
    """The runs that `files` (those present and readable) name."""
    found = []
    for file in files:
        key, stage = NAMED_BY[file]
        try:
            run_id = json.loads((root / file).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(run_id, str) and run_id:
            found.append(RecordedRun(file, run_id, stage))
    return found


def missing_runs(
    client: MlflowClient | None, root: Path, files: tuple[Path, ...] = tuple(NAMED_BY)
) -> list[RecordedRun]:
    """The recorded runs the store behind `client` lacks or holds as deleted; all of them when `client` is None
    (no store at all: its file was deleted)."""
    return [
        recorded
        for recorded in recorded_runs(root, files)
        if client is None or present_run(client, recorded.run_id) is None
    ]


def fix_for(gone: list[RecordedRun]) -> str:
    """The commands that re-create the runs `gone` names: each stage forced, then the rest of the pipeline."""
    stages = " ".join(dict.fromkeys(recorded.stage for recorded in gone))
    return f"re-create them with `dvc repro --force --single-item {stages}` then `dvc repro`"


def require_recorded_runs(
    client: MlflowClient | None, root: Path, uri: str, files: tuple[Path, ...] = tuple(NAMED_BY)
) -> None:
    """Stop with one line when a run that `files` name is gone from the store at `uri` (`client` None: no store)."""
    gone = missing_runs(client, root, files)
    if gone:
        raise RunStateError(
            "; ".join(recorded.describe(uri) for recorded in gone)
            + " (the store was deleted or replaced, or the run deleted), so DVC takes the outputs as up to date",
            fix=fix_for(gone),
        )
