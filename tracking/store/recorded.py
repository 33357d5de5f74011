"""The runs behind the project's outputs: the outputs record results by content, this checkout links them to runs.

`outputs/run.json` records the train stage's training by what decides it (the hashes of its inputs and of its
weights) and `calibration/noise.json` the calibration's bands, so a clone that trains the same weights writes the
same files and `git status` stays clean. Run ids, the store's address and where each repeat ran differ in every
clone; the stages write them to this checkout's links (`.tracking/runs/<stage>.json`, git-ignored). Evaluate and
compare find the train stage's run through its link, or else by content in the store (the newest run tagged with
the same inputs and weights: a clone's, a `dvc pull`ed result's). DVC tracks neither the store nor the runs, so
after `rm mlflow.db` a `dvc repro` says "up to date" and the next stage that needs the run fails; `tracking doctor`
lists such runs, and `train_run_id` names the `dvc repro` that makes one again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.errors import RunStateError
from tracking.layout import RUN_FILE, RUN_LINKS, TRAIN
from tracking.names import RERUN_OF_TAG, TRAINED_INPUTS_TAG, WEIGHTS_TAG, tag_absent, tag_is
from tracking.store.reads import newest_run, present_run
from tracking.store.sqlite import private_folder

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

# Re-creates the train stage's run and what evaluate and compare log to it: forcing train alone would leave them
# up to date, since a run of the same weights writes the same outputs/run.json.
REPRODUCE_TRAINING = f"re-create it with `dvc repro --force --downstream {TRAIN}`"
# What outputs/run.json holds.
CONTENT = ("experiment", "inputs_sha256", "weights_sha256")


@dataclass(frozen=True)
class Training:
    """What `outputs/run.json` holds: the training by content, equal in every clone that trains these weights."""

    experiment: str
    inputs_sha256: str
    weights_sha256: str
    run_id: str | None = None  # a file of an earlier version named its run by id (a revision committed before)

    def content(self) -> dict[str, str]:
        """What `outputs/run.json` holds."""
        return {key: getattr(self, key) for key in CONTENT}

    def describe(self, uri: str) -> str:
        if not self.inputs_sha256:
            return f"{RUN_FILE} names MLflow run {self.run_id}, which {uri} does not hold"
        return f"{RUN_FILE} records a training (weights {self.weights_sha256[:12]}...) that no run in {uri} logged"


def link_file(stage: str) -> Path:
    """This checkout's link from `stage`'s outputs to its MLflow runs, relative to the project."""
    return RUN_LINKS / f"{stage}.json"


def write_link(root: Path, stage: str, link: dict[str, Any]) -> None:
    """Write `stage`'s link; its folder owner-only, as everything under `.tracking/` is."""
    path = root / link_file(stage)
    private_folder(path.parent)
    path.write_text(json.dumps(link, indent=2) + "\n", encoding="utf-8")


def read_link(root: Path, stage: str) -> dict[str, Any]:
    """`stage`'s link in this checkout; empty where it has none (a fresh clone, results DVC restored)."""
    try:
        found = json.loads((root / link_file(stage)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def write_run_file(root: Path, training: Training, run_id: str, uri: str) -> None:
    """Write `outputs/run.json` (the training by content) and the train stage's link to its run `run_id` in the
    store at `uri` (shown without credentials)."""
    (root / RUN_FILE).write_text(json.dumps(training.content(), indent=2) + "\n", encoding="utf-8")
    write_link(root, TRAIN, {**training.content(), "run_id": run_id, "tracking_uri": uri})


def read_run_file(root: Path) -> Training:
    """`outputs/run.json` as the train stage wrote it; a file that is not is one line naming it and the `dvc repro`
    that writes it again."""
    return parse_run_file((root / RUN_FILE).read_bytes())


def parse_run_file(text: str | bytes, where: str = RUN_FILE.as_posix()) -> Training:
    """The training `text` (`outputs/run.json`'s, from `where`) records; one line naming it where it is damaged."""
    try:
        record = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        record, why = None, f"not JSON ({err})"
    else:
        why = "not the training's hashes"
    if isinstance(record, dict) and _text(record.get("run_id")) and "inputs_sha256" not in record:
        return Training(str(record.get("experiment", "")), "", str(record.get("weights_sha256", "")), record["run_id"])
    if not isinstance(record, dict) or not all(_text(record.get(key)) for key in CONTENT):
        raise RunStateError(
            f"{where} is damaged ({why})", fix=f"write it again with `dvc repro --force --single-item {TRAIN}`"
        )
    return Training(*(record[key] for key in CONTENT))


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def training_clause(training: Training) -> str:
    """The filter string selecting the runs that trained `training`, reruns left out."""
    return (
        f"{tag_is(TRAINED_INPUTS_TAG, training.inputs_sha256)} and {tag_is(WEIGHTS_TAG, training.weights_sha256)} and "
        f"{tag_absent(RERUN_OF_TAG)}"
    )


def find_training(client: MlflowClient, training: Training, root: Path | None = None) -> Run | None:
    """The run the link of the checkout at `root` names for this training, or the one an earlier version's file
    named, where the store holds it; else the newest run of the training's experiment that trained it; None where
    the store holds none."""
    linked = linked_run(root, training) if root is not None else None
    for run_id in filter(None, (linked, training.run_id)):
        run = present_run(client, run_id)
        if run is not None:
            return run
    if not training.inputs_sha256:  # an earlier version's file: its run is the one it named
        return None
    experiment = client.get_experiment_by_name(training.experiment)
    if experiment is None:
        return None
    return newest_run(client, [experiment.experiment_id], training_clause(training))


def linked_run(root: Path, training: Training) -> str | None:
    """The run id this checkout's train link names, where it links the same training."""
    link = read_link(root, TRAIN)
    same = all(link.get(key) == value for key, value in training.content().items())
    return link.get("run_id") if same else None


def train_run_id(client: MlflowClient, root: Path, training: Training, uri: str) -> str:
    """The id of the run that trained `training` (what `outputs/run.json` records), which evaluate and compare log
    to; one line naming the file and the fix where the store at `uri` holds none (deleted or replaced: DVC does not
    see it)."""
    run = find_training(client, training, root)
    if run is None:
        raise gone_error(training.describe(uri))
    return run.info.run_id


def gone_error(what: str) -> RunStateError:
    """The error of a stage whose training run (`what` describes it) the store no longer holds."""
    return RunStateError(
        f"{what} (the store was deleted or replaced, or the run deleted), so DVC takes the outputs as up to date",
        fix=REPRODUCE_TRAINING,
    )


def missing_training(client: MlflowClient | None, root: Path) -> Training | None:
    """The training `outputs/run.json` records where the store behind `client` holds no run of it (`client` None:
    no store at all, its file deleted); None where it does, or where no readable run file is there."""
    try:
        training = read_run_file(root)
    except (OSError, RunStateError):
        return None
    if client is not None and find_training(client, training, root) is not None:
        return None
    return training
