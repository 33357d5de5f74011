"""`Tracker`: the one MLflow run of a pipeline execution, opened by train and resumed by evaluate.

It checks the store answers before work starts, takes the run's records (params, provenance, data, metrics:
tracking/run/log_calls.py), and ends the run honestly: FINISHED on success, FAILED on an error, KILLED on Ctrl-C
or SIGTERM, never left RUNNING. Writes name the run explicitly (MLflow's fluent API keeps the active run per
thread), so they may run on the background writer while training goes on. Every write goes through the run's
`RunSink` (tracking/store/sinks.py): if the tracking server is lost mid-run, training goes on and the whole run
is kept in the offline journal for `tracking sync`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from tracking.errors import StoreFault, TrackingError, TrackingServerError, WriteFault
from tracking.layout import TRAIN
from tracking.log import configure_unless_configured
from tracking.names import (
    ERROR_TAG,
    FINISHED_END_TAG,
    MAX_TAG_CHARS,
    STAGE_TAG,
)
from tracking.run.lifecycle import (
    deferred_interrupts,
    discard_interrupt,
    interrupts_raise,
    pending_interrupt,
    record_killed,
    status_for,
)
from tracking.run.log_calls import QueuedMetrics, RunLogCalls
from tracking.run.opening import end_stale_runs, resumable, run_name, sync_kept_offline, warn_if_clock_behind
from tracking.run.system_metrics import SystemMetrics
from tracking.run.writer import BackgroundWriter
from tracking.store.context import context_tags
from tracking.store.faults import describe, server_unavailable, store_fault
from tracking.store.journal import journal_folder
from tracking.store.location import connect, project_root, shown, tracking_uri
from tracking.store.operations import Op, batch, end
from tracking.store.reads import run_by_id
from tracking.store.sinks import MlflowSink, RunSink
from tracking.store.stale import HEARTBEAT_INTERVAL_S, heartbeat, owner_tags

log = logging.getLogger(__name__)


class Tracker(RunLogCalls):
    """Context manager around one MLflow run; pass `run_id` to resume the run another stage started."""

    def __init__(
        self,
        experiment: str,
        root: Path | None = None,
        run_id: str | None = None,
        stage: str = TRAIN,
        run_name: str | None = None,
        nested: bool = False,
        tags: dict[str, Any] | None = None,
        parent_run_id: str | None = None,
        system_metrics: bool = False,
        keep_end_time: bool = False,
        offline_start: bool = False,
    ) -> None:
        """`nested` makes the run a child of the tracker open in this thread (MLflow's parent/child runs), or of
        `parent_run_id`, which may be open in another process (a worker's repeat under the calibration's run);
        `system_metrics` samples MLflow's system metrics while the run is open (a training run's `compute.system_metrics`);
        `keep_end_time` leaves a resumed FINISHED run's end time as it was when this stage finishes too (the compare
        stage adds its verdict after the calibration's minutes: MLflow's duration of the run stays its own work's);
        `offline_start` opens a new run in the offline journal when its server cannot be reached as it starts (a
        calibration's or a candidate's repeat, whose stage already holds a run on the server: the repeat trains and
        is kept, and `tracking sync` uploads it later); without it such a run is refused before any work."""
        self.experiment = experiment
        self.root = root
        self.run_id = run_id
        self.experiment_id = ""  # the experiment's id in the store, once open
        self.stage = stage
        self.run_name = run_name
        self.nested = nested
        self.tags = tags or {}
        self.parent_run_id = parent_run_id
        self.system_metrics = system_metrics
        self.keep_end_time = keep_end_time
        self.offline_start = offline_start
        self._lost_at_start: BaseException | None = None  # why a run that opens offline could not reach its server
        self._kept_end_time: int | None = None
        self._finished_at: int | None = None  # the end time of a resumed run that was FINISHED
        self._system: SystemMetrics | None = None
        self._interrupts = interrupts_raise()
        self._queued = QueuedMetrics()

    def __enter__(self) -> Tracker:
        from mlflow.tracking import MlflowClient

        configure_unless_configured()
        self.root = self.root or project_root()
        try:
            self.experiment_id = experiment_id = connect(self.root, self.experiment)
        except TrackingServerError as err:
            if not (self.offline_start and server_unavailable(err)):
                raise
            self._lost_at_start, experiment_id = err, ""
        self.client = MlflowClient()
        if self.run_id is not None:  # first, so the run a lost server left RUNNING is not taken for a stale one
            self.run_id = sync_kept_offline(self.client, self.root, self.uri, self.run_id)
        if not self.nested:
            end_stale_runs(self.client, self.root, self.uri, self.stage)
            if self.run_id is None:
                warn_if_clock_behind(self.client, self.uri, experiment_id)
        if self.run_id is not None:
            self._finished_at = resumable(self.client, self.uri, self.run_id)
            self._kept_end_time = self._finished_at if self.keep_end_time else None
        self._interrupts.__enter__()
        resuming, run = self.run_id is not None, None
        try:
            with deferred_interrupts():  # a signal while the run opens waits for it to be open, then ends it KILLED
                run = self._start_run(experiment_id)
                self._writer = BackgroundWriter(self._beat, HEARTBEAT_INTERVAL_S)
                self.set_tags({STAGE_TAG: self.stage, **self.tags})
                if self.system_metrics:
                    self._system = SystemMetrics(self.run_id, self.uri, self.queue_metrics, resume=resuming)
        except BaseException as err:
            if run is None:
                self._interrupts.__exit__(None, None, None)
            else:
                self.__exit__(type(err), err, None)
            raise
        return self

    def _beat(self) -> None:
        """Renew the run's heartbeat, which tells hosts that cannot see this process that it lives; not while the
        server is lost (the journal keeps the run's writes, and a heartbeat there would say nothing). Metrics still
        queued go first: an epoch logged within `METRICS_FLUSH_S` of the last write, then a long pause (a slow
        epoch, a user's callback), would otherwise wait for the next epoch to be seen."""
        self._flush_metrics()
        if not self._sink.offline:
            self._sink.write(batch(tags=heartbeat()))

    def _start_run(self, experiment_id: str) -> Any:
        """Open or resume the run, recorded as owned by this process (see `tracking.store.stale`); a resumed run
        loses the `error` tag of the process that ended it before (a SIGKILLed stage's `ProcessGone`), and a resumed
        FINISHED run records its end time and this stage first, so that if this process dies the stale-run repair
        ends it FINISHED again and names this stage, rather than failing the training it records. MLflow's own
        system metrics thread stays off whatever `MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING` says: `system_metrics`
        starts the sampler that writes through the journal (tracking/run/system_metrics.py)."""
        import mlflow

        owner = owner_tags()
        if self._lost_at_start is not None:
            return self._open_offline(self._lost_at_start, owner)
        try:
            if self.run_id is not None:
                # Before it is RUNNING again, so it never looks owned by the stage that opened it.
                resumed = {**owner, STAGE_TAG: self.stage}
                if self._finished_at is not None:
                    resumed[FINISHED_END_TAG] = self._finished_at
                MlflowSink(self.client, self.run_id).write(
                    batch(tags={key: str(value) for key, value in resumed.items()})
                )
                earlier = run_by_id(self.client, self.run_id).data.tags
                stale = [ERROR_TAG] + ([FINISHED_END_TAG] if self._finished_at is None else [])
                for tag in stale:  # an earlier process's end, now over; an end time that is not this run's now
                    if tag in earlier:
                        self.client.delete_tag(self.run_id, tag)
                run = mlflow.start_run(run_id=self.run_id, log_system_metrics=False)
            else:
                run = mlflow.start_run(
                    experiment_id=experiment_id,
                    run_name=self.run_name or run_name(self.stage),
                    nested=self.nested,
                    parent_run_id=self.parent_run_id,
                    tags={**context_tags(), **owner},
                    log_system_metrics=False,
                )
        except Exception as err:
            fault = store_fault(err, self.uri)
            if fault is not None:
                raise fault from err
            if not server_unavailable(err):
                raise
            if self.offline_start and self.run_id is None:
                return self._open_offline(err, owner)
            raise TrackingServerError(
                f"MLflow tracking server {shown(self.uri)} stopped answering while the run started "
                f"({describe(err)}); start the server and re-run"
            ) from err
        self.run_id = run.info.run_id
        self._sink = RunSink(MlflowSink(self.client, self.run_id), self.run_id, self.root, self.uri, self.experiment)
        return run

    def _open_offline(self, error: BaseException, owner: dict[str, str]) -> str:
        """Open a new run in the offline journal, its server unreachable (`offline_start`): an id of its own (as
        MLflow draws one), its name and start time in the journal's header, its parent and context tags as its
        first write; `tracking sync` creates the run from them (tracking/store/sync.py). Return the run's id."""
        import uuid

        from tracking.names import MLFLOW_PARENT_RUN_TAG

        self.run_id = uuid.uuid4().hex
        name = self.run_name or run_name(self.stage)
        self._sink = RunSink(MlflowSink(self.client, self.run_id), self.run_id, self.root, self.uri, self.experiment)
        self._sink.lose(error, opened={"run_name": name, "start_time": int(time.time() * 1000)})
        parent = {MLFLOW_PARENT_RUN_TAG: self.parent_run_id} if self.parent_run_id else {}
        self._sink.write(batch(tags={**context_tags(), **owner, **parent}))
        return self.run_id

    @property
    def offline(self) -> bool:
        """Whether the run's records go to the offline journal (its server was lost, or unreachable as it opened)."""
        return self._sink.offline

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        try:
            with deferred_interrupts():  # a second Ctrl-C or a SIGTERM waits until the run is ended
                self._end(error)
        finally:
            self._interrupts.__exit__(None, None, None)

    def _end(self, error: BaseException | None) -> None:
        """End the run as `error` calls for; an interrupt arriving meanwhile ends it KILLED and is raised after."""
        if self._system is not None:
            self._system.stop()
        self._writer.submit(self._flush_metrics)
        failure = self._close_writer()
        if failure is not None and not (
            error is None
            or (isinstance(failure, StoreFault) and (isinstance(error, StoreFault) or WriteFault.of(error)))
        ):
            # Said here only when another error ends the run: without one, the failure is raised below and said once,
            # by the error line the stage ends with (a full disk under .git was said twice).
            log.error(failure)
        interrupt = pending_interrupt()
        cause = error or failure or interrupt
        status = status_for(cause)
        note = f"{type(cause).__name__}: {cause}"
        if status == "KILLED" and self._finished_at is not None:
            # A later stage of a FINISHED run interrupted (Ctrl-C in evaluate): the training it records is whole,
            # and DVC keeps its model; the interrupt ends only this stage's part, said in the run's error tag.
            status, self._kept_end_time = "FINISHED", self._finished_at
            note = (
                f"{type(cause).__name__}: the {self.stage} stage was interrupted, its records are incomplete; re-run it"
            )
        try:
            if cause is not None:
                error_tag = shown(note)  # a store's URI in it loses its password
                self._sink.write(batch(tags={ERROR_TAG: error_tag[:MAX_TAG_CHARS]}))
        except StoreFault:  # the store cannot take the note either (a full disk): the cause is what to say
            pass
        finally:
            self._end_run(status)
        if cause is not interrupt:
            discard_interrupt()  # the run already ended for another reason, or FINISHED: its work is done
        if failure is not None and error is None:
            raise failure

    def _end_run(self, status: str) -> None:
        """End the run on the server; when the server is lost, in the journal too (MLflow's run stack is popped either way)."""
        import mlflow

        kept = self._kept_end_time if status == "FINISHED" else None
        ended = end(status, kept or int(time.time() * 1000))
        if status == "KILLED":
            record_killed(self.run_id)
        if self._sink.offline:
            self._end_offline(ended)
            return
        try:
            mlflow.end_run(status=status)
            if kept:  # MLflow's end_run takes no end time: the run's own is put back
                self._sink.write(ended)
        except Exception as err:
            fault = store_fault(err, self.uri)
            if fault is not None:  # left RUNNING: the next stage or `tracking doctor` ends it
                log.warning(
                    "run %s could not be ended %s in %s (%s); the next stage or `tracking doctor` marks it FAILED",
                    self.run_id,
                    status,
                    self.uri,
                    fault,
                )
            elif not server_unavailable(err):
                raise
            else:
                self._sink.lose(err)
                self._end_offline(ended)
                return
        self._sink.close()

    def _end_offline(self, ended: Op) -> None:
        """End a run whose server was lost through its journal: the end goes last into the journal, and the server
        hears of it only by the journal's replay, so a server back by now never shows the run ended with the writes
        it missed (FINISHED with 3 of 60 epochs). The replay is tried at once; if the server is still gone, the run
        stays RUNNING there (`tracking doctor` and other stages leave it be) until `tracking sync` or the next stage
        of the run replays it."""
        from tracking.store.sync import sync_journal

        _forget_active_run(self.run_id)
        self._sink.write(ended)
        report = self._sink.close()
        folder = journal_folder(self.root, self.run_id)
        try:
            done = sync_journal(folder, self.client, self.uri)
        except TrackingError as err:
            log.warning("%s (replaying it now failed: %s)", report, err)
        else:
            log.warning("MLflow server %s lost during run %s and back: %s", shown(self.uri), self.run_id, done.line)

    def _close_writer(self) -> TrackingError | None:
        """Wait for background writes; a failed one comes back as a `TrackingError` (`_end` reports it on stderr)."""
        try:
            self._writer.close()
        except TrackingError as err:
            failure = err
        except Exception as err:
            failure = TrackingServerError(
                f"writing to the MLflow store {shown(self.uri)} failed ({err}); check the store and re-run"
            )
            failure.__cause__ = err
        else:
            return None
        return failure

    @property
    def uri(self) -> str:
        return tracking_uri(self.root or project_root())

    def in_background(self, write: Callable[[], object]) -> None:
        """Run `write` on the background writer, so it overlaps training; it completes before the run ends."""
        self._writer.submit(write)


def _forget_active_run(run_id: str) -> None:
    """Take run `run_id` off MLflow's stack of active runs without a word to its server (`mlflow.end_run` pops it and
    ends the run there, and MLflow has no public call for the one without the other)."""
    from mlflow.tracking import fluent

    stack = fluent._active_run_stack.get()
    if stack and stack[-1].info.run_id == run_id:
        stack.pop()
        fluent.MLFLOW_RUN_ID.unset()
