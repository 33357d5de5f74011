"""`tracking sync`: upload runs kept in the offline journal into the tracking server, exactly once.

Each journal is replayed in order into the run it belongs to (the run was created on the server before
the loss, so it exists there; a run opened in the journal, its server unreachable as it started, is created
here with its name and start time). Progress is recorded after every operation in `progress.json`, so a sync
that is interrupted goes on where it stopped. Replaying is also idempotent on its own: params, tags and
artifacts overwrite themselves, metric values already in the run's history (same key, step, timestamp and
value) are skipped, and a model is not logged twice. When the server no longer has the run (a new
server, a wiped store), a new run is created in the same experiment, tagged `tracking.offline.source_run_id`
with the original id. A synced journal is moved to `.tracking/synced/<run_id>/`.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.errors import TrackingServerError
from tracking.names import EXPERIMENT_KIND_TAG, MAX_TAG_CHARS, SOURCE_TAG, SOURCE_URI_TAG, SYNCED_TAG, tag_is
from tracking.store.faults import describe, server_unavailable
from tracking.store.journal import JOURNAL, LINE, OPENED, SYNCED, UNREADABLE, pending_journals, read_journal
from tracking.store.location import EXPERIMENT_KIND, shown
from tracking.store.operations import Op
from tracking.store.sinks import MlflowSink
from tracking.store.sqlite import private_folder
from tracking.whole_file import written_whole

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

PROGRESS = "progress.json"
log = logging.getLogger(__name__)


@dataclass
class Synced:
    """What one journal's sync did; `run_id` is the run it went into."""

    run_id: str
    source_run_id: str
    applied: int
    skipped_metric_values: int
    metric_values: int
    artifacts: int
    archive: Path
    unreplayed: list[str]

    @property
    def line(self) -> str:
        where = self.run_id if self.run_id == self.source_run_id else f"{self.run_id} (linked to {self.source_run_id})"
        skipped = f", {len(self.unreplayed)} bad line(s) skipped (named above)" if self.unreplayed else ""
        return (
            f"synced run {where}: {self.applied} writes replayed ({self.metric_values} metric values added, "
            f"{self.skipped_metric_values} already there; {self.artifacts} artifacts){skipped}; journal archived in "
            f"{self.archive}"
        )


def sync_all(root: Path, uri: str | None) -> list[Synced]:
    """Sync every pending journal of the project into `uri` (default: the server each journal was kept for)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from tracking.store.location import http_limits

    done = []
    for folder in pending_journals(root):
        target = uri or read_journal(folder)[0]["tracking_uri"]
        http_limits(target)
        mlflow.set_tracking_uri(target)
        done.append(sync_journal(folder, MlflowClient(target), target))
    return done


def sync_journal(folder: Path, client: MlflowClient, uri: str) -> Synced:
    """Replay one journal into the server behind `client`, resuming after the last operation recorded as done."""
    from tqdm import tqdm

    header, ops = read_journal(folder)
    progress = _read_progress(folder)
    try:
        run_id = progress.get("run_id") or _target_run(client, header)
        if not progress:
            progress = {"run_id": run_id, "done_seq": 0, "done_line": 0}
            _write_progress(folder, progress)
        replay = _Replay(client, run_id)
        todo = [op for op in ops if _after(op, progress)]
        for op in tqdm(todo, desc=f"sync {header['run_id'][:8]}", unit="write", disable=None):
            replay.apply(op)
            progress["done_seq"], progress["done_line"] = op.get("seq", progress["done_seq"]), op[LINE]
            _write_progress(folder, progress)
        skipped = f"; {len(replay.unreplayed)} line(s) skipped" if replay.unreplayed else ""
        client.set_tag(
            run_id,
            SYNCED_TAG,
            f"{len(ops)} writes kept offline from {header['lost_at']} ({header['reason']}){skipped}"[:MAX_TAG_CHARS],
        )
    except Exception as err:
        if not server_unavailable(err):
            raise
        raise TrackingServerError(
            f"MLflow tracking server {shown(uri)} cannot be reached ({describe(err)}); "
            f"{folder} is kept, run `tracking sync` again when the server is back"
        ) from err
    archive = _archive(folder).relative_to(folder.parents[2])
    for line in replay.unreplayed:
        log.warning("%s/%s %s; skipped, the rest replayed", archive, JOURNAL, line)
    applied = len(todo) - len(replay.unreplayed)
    return Synced(
        run_id,
        header["run_id"],
        applied,
        replay.skipped,
        replay.metric_values,
        replay.artifacts,
        archive,
        replay.unreplayed,
    )


def _after(op: Op, progress: dict[str, Any]) -> bool:
    """Whether `op` comes after what an interrupted sync recorded as done (by line; by number in progress files
    of earlier versions)."""
    if "done_line" in progress:
        return op[LINE] > progress["done_line"]
    return op.get("seq", 0) > progress["done_seq"]


class _Replay:
    """Applies journaled operations, skipping metric values and models the run already holds."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id
        self.sink = MlflowSink(client, run_id)
        self.skipped = self.metric_values = self.artifacts = 0
        self.unreplayed: list[str] = []  # the journal's lines not replayed, each with its reason
        self._history: dict[str, set[tuple[int, int, float]]] = {}

    def apply(self, op: Op) -> None:
        """Replay `op`; one the journal cannot give (a garbled line) or the server refuses (a mangled metric name)
        is noted in `unreplayed` and skipped. A server that stopped answering is raised."""
        if op["op"] == UNREADABLE:
            self.unreplayed.append(f"line {op[LINE]}: {op['reason']}")
            return
        try:
            self._apply(op)
        except Exception as err:
            if server_unavailable(err):
                raise
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            self.unreplayed.append(f"line {op[LINE]} ({op['op']}): refused: {reason}")

    def _apply(self, op: Op) -> None:
        if op["op"] == "batch" and op["metrics"]:
            op = {**op, "metrics": self._new_metrics(op["metrics"])}
        if op["op"] == "model" and self._has_model(op["name"]):
            return
        self.sink.write({key: value for key, value in op.items() if key != LINE})
        self.artifacts += op["op"] in ("artifact", "model")

    def _new_metrics(self, metrics: list[list]) -> list[list]:
        fresh = []
        for key, value, timestamp, step in metrics:
            if key not in self._history:
                self._history[key] = {
                    (m.step, m.timestamp, m.value) for m in self.client.get_metric_history(self.run_id, key)
                }
            entry = (step, timestamp, value)
            if entry in self._history[key]:
                self.skipped += 1
                continue
            self._history[key].add(entry)
            fresh.append([key, value, timestamp, step])
        self.metric_values += len(fresh)
        return fresh

    def _has_model(self, name: str) -> bool:
        """A finished logged model of this name from this run (one left PENDING by the lost upload does not count)."""
        run = self.client.get_run(self.run_id)
        found = self.client.search_logged_models([run.info.experiment_id])
        return any(m.source_run_id == self.run_id and m.name == name and str(m.status) == "READY" for m in found)


def _target_run(client: MlflowClient, header: dict[str, Any]) -> str:
    """The journal's own run when the server has it, else a new run in its experiment that names the original."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(header["run_id"]).info.run_id
    except MlflowException as err:
        if err.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
    experiment = client.get_experiment_by_name(header["experiment"])
    experiment_id = (
        experiment.experiment_id
        if experiment
        else client.create_experiment(header["experiment"], tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
    )
    linked = client.search_runs([experiment_id], filter_string=tag_is(SOURCE_TAG, header["run_id"]))
    if linked:  # an earlier sync created it and lost its progress file
        return linked[0].info.run_id
    origin = shown(header["tracking_uri"])  # journals of earlier versions hold the URI as it was given
    opened = header.get(OPENED, {})  # a run opened offline: its own name and start time
    run = client.create_run(
        experiment_id,
        start_time=opened.get("start_time"),
        tags={SOURCE_TAG: header["run_id"], SOURCE_URI_TAG: origin},
        run_name=opened.get("run_name"),
    )
    return run.info.run_id


def _read_progress(folder: Path) -> dict[str, Any]:
    path = folder / PROGRESS
    return json.loads(path.read_text()) if path.exists() else {}


def _write_progress(folder: Path, progress: dict[str, Any]) -> None:
    """Replace the progress file atomically, so an interrupted sync never reads a half-written one."""
    with written_whole(folder / PROGRESS) as temporary:
        temporary.write_text(json.dumps(progress))


def _archive(folder: Path) -> Path:
    archive = folder.parents[2] / SYNCED / folder.name
    if archive.exists():
        shutil.rmtree(archive)
    private_folder(archive.parent)
    shutil.move(folder, archive)
    return archive
