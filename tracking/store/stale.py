"""Runs left RUNNING by a process that died without cleaning up (SIGKILL, the out-of-memory killer, a power cut).

Every run records who runs it: the host, the pid, and the process's start (Linux boot id and start tick), so a
pid the system has since handed to another process is not taken for the run's owner. A RUNNING run whose
owner is on this host and gone is marked FAILED with a note. A process on another host cannot be looked up, so
every run also carries a heartbeat, the owner's clock in Unix seconds, renewed by its background writer every
HEARTBEAT_INTERVAL_S: another host's run whose heartbeat is older than HEARTBEAT_TIMEOUT_S is marked FAILED too.
The timeout is twenty beats, so minutes of clock skew between hosts or a store that stalls a while never end a
live run; a heartbeat ahead of this host's clock counts as fresh. Runs with no owner recorded (not started by
`Tracker`), and other hosts' runs from before heartbeats, may still be alive and are only reported. A run whose
owner lost the tracking server and kept the rest of it in the offline journal (tracking/store/journal.py) is
left for `tracking sync`.

A run that had ended FINISHED is never relabelled: a later stage that resumes it (evaluate, compare) records its
end time first (`tracking.finished_end`), and if that stage's process dies the run is ended FINISHED again at that
time, its `error` tag naming the stage that died and saying to re-run it; the training it records is whole.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.names import (
    ERROR_TAG,
    FINISHED_END_TAG,
    HEARTBEAT_TAG,
    HOST_TAG,
    PID_TAG,
    REPAIRED_TAG,
    STAGE_TAG,
    START_TAG,
    status_is,
)
from tracking.store.reads import all_runs

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

STALE = "stale"
SILENT = "stale: no heartbeat"
ALIVE = "alive"
BEATING = "other host, heartbeat fresh"
OTHER_HOST = "other host, no heartbeat recorded"
NO_OWNER = "no owner recorded"
KEPT_OFFLINE = "kept offline, waiting for `tracking sync`"
ENDED = (STALE, SILENT)  # the verdicts whose runs are marked FAILED
HEARTBEAT_INTERVAL_S = 30.0
HEARTBEAT_TIMEOUT_S = 600.0


def owner_tags() -> dict[str, str]:
    """The tags naming this process as a run's owner, with its first heartbeat."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), START_TAG: process_start(pid) or "", **heartbeat()}


def heartbeat() -> dict[str, str]:
    """The heartbeat tag: this host's clock now, in whole Unix seconds."""
    return {HEARTBEAT_TAG: str(int(time.time()))}


def process_start(pid: int) -> str | None:
    """`<boot id>:<start tick>` of a live process on Linux; None where /proc cannot say (gone, zombie, not Linux)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name in parentheses may hold spaces
    if fields[0] == "Z":
        return None
    return f"{boot}:{fields[19]}"


def is_alive(pid: int, start: str) -> bool:
    """Whether process `pid` still runs and is the one that started at `start` (when recorded)."""
    if Path("/proc/self/stat").exists():
        current = process_start(pid)
        return current is not None and (not start or current == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class RunningRun:
    """A run the store has as RUNNING, with what was found about its owner."""

    run_id: str
    experiment: str
    name: str
    host: str
    pid: str
    verdict: str
    silent_s: float | None = None  # how long a SILENT run's heartbeat has been silent
    finished_end: int | None = None  # the end time (ms) of a FINISHED run a later stage resumed
    stage: str = ""  # the stage that last opened the run

    def describe(self) -> str:
        owner = f"process {self.pid} on {self.host}" if self.host else "no owner recorded"
        found = self.verdict
        if self.verdict == SILENT:
            found = f"{SILENT} for {self.silent_s / 60:.0f} min (timeout {HEARTBEAT_TIMEOUT_S / 60:.0f} min)"
        return f"run {self.run_id} ({self.name or 'unnamed'}, experiment {self.experiment}), {owner}: {found}"

    def repair(self, dry_run: bool = False) -> str:
        """What ending this stale run does (or would do, `dry_run`): FAILED, or FINISHED again when it had finished
        before the stage that died resumed it."""
        if self.finished_end is None:
            return "would mark FAILED" if dry_run else "marked FAILED"
        ended = "would end it FINISHED again" if dry_run else "ended FINISHED again"
        return f"{ended} at its own end time: the {self.stage or 'later'} stage died after the run had finished"


def verdict(tags: dict[str, str], host: str, now: float) -> tuple[str, float | None]:
    """STALE, ALIVE, SILENT, BEATING, OTHER_HOST or NO_OWNER for a RUNNING run with `tags`, seen from `host` at
    `now` (Unix seconds), with how long its heartbeat has been silent where that was read."""
    owner_host, pid = tags.get(HOST_TAG), tags.get(PID_TAG, "")
    if not owner_host or not pid.isdigit():
        return NO_OWNER, None
    if owner_host == host:
        return (ALIVE if is_alive(int(pid), tags.get(START_TAG, "")) else STALE), None
    try:
        silent = now - float(tags[HEARTBEAT_TAG])
    except (KeyError, ValueError):
        return OTHER_HOST, None
    return (SILENT if silent > HEARTBEAT_TIMEOUT_S else BEATING), silent


def running_runs(client: MlflowClient) -> list[RunningRun]:
    """Every RUNNING run in the store, in every experiment, with its verdict."""
    from mlflow.entities import ViewType

    host, now = socket.gethostname(), time.time()
    found = []
    for experiment in client.search_experiments(view_type=ViewType.ALL):
        for run in all_runs(client, [experiment.experiment_id], status_is("RUNNING"), deleted_too=True):
            tags = run.data.tags
            found.append(
                RunningRun(
                    run.info.run_id,
                    experiment.name,
                    run.info.run_name or "",
                    tags.get(HOST_TAG, ""),
                    tags.get(PID_TAG, ""),
                    *verdict(tags, host, now),
                    finished_end=_end_time(tags.get(FINISHED_END_TAG, "")),
                    stage=tags.get(STAGE_TAG, ""),
                )
            )
    return found


def _end_time(text: str) -> int | None:
    """A `tracking.finished_end` tag's end time; None when absent or not a number (written by hand)."""
    return int(text) if text.isdigit() else None


def end_stale(client: MlflowClient, run: RunningRun, by: str) -> None:
    """End a stale run, saying why and who decided it: FAILED, or FINISHED again at its own end time when it had
    finished before the stage whose process died resumed it (that stage is named in its `error` tag)."""
    if run.verdict == SILENT:
        why = (
            f"its process {run.pid} on {run.host} sent no heartbeat for {run.silent_s / 60:.0f} min (the timeout is "
            f"{HEARTBEAT_TIMEOUT_S / 60:.0f} min): the process or its machine died without ending the run"
        )
    else:
        why = (
            f"its process {run.pid} is gone without ending the run (killed by SIGKILL, out of memory, or a crash "
            "of the machine)"
        )
    if run.finished_end is None:
        end_failed(client, run.run_id, by, why)
        return
    from mlflow.entities import RunTag

    stage = run.stage or "later"
    note = (
        f"ended FINISHED again by {by} on {socket.gethostname()} at {_now()}: the {stage} stage resumed the finished "
        f"run and {why}"
    )
    error = (
        f"ProcessGone: the {stage} stage died after the run had finished ({why}); its records are incomplete, re-run it"
    )
    client.log_batch(run.run_id, tags=[RunTag(REPAIRED_TAG, note), RunTag(ERROR_TAG, error)])
    client.set_terminated(run.run_id, "FINISHED", run.finished_end)


def end_failed(client: MlflowClient, run_id: str, by: str, why: str) -> None:
    """End a RUNNING run whose process is gone as FAILED, with a note saying why, who decided it and when."""
    from mlflow.entities import RunTag

    note = f"marked FAILED by {by} on {socket.gethostname()} at {_now()}: {why}"
    client.log_batch(run_id, tags=[RunTag(REPAIRED_TAG, note), RunTag(ERROR_TAG, f"ProcessGone: {note}")])
    client.set_terminated(run_id, "FAILED")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def repair_stale_runs(
    client: MlflowClient, by: str, dry_run: bool = False, kept_offline: frozenset[str] = frozenset()
) -> tuple[list[RunningRun], list[RunningRun]]:
    """End (unless `dry_run`) this host's runs whose process is gone and any host's whose heartbeat went silent,
    FAILED or, if they had finished before a later stage resumed them, FINISHED again; return (those runs, every
    RUNNING run).

    Runs in `kept_offline` (their ids) have the rest of their writes in the offline journal: left alone.
    """
    runs = [replace(run, verdict=KEPT_OFFLINE) if run.run_id in kept_offline else run for run in running_runs(client)]
    stale = [run for run in runs if run.verdict in ENDED]
    if not dry_run:
        for run in stale:
            end_stale(client, run, by)
    return stale, runs
