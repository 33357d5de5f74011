"""Runs left RUNNING by a process that died without cleaning up (SIGKILL, the out-of-memory killer, a power cut).

Every run records who runs it: the host, the pid, and the process's start (Linux boot id and start tick), so a
pid the system has since handed to another process is not taken for the run's owner. A RUNNING run whose
owner is on this host and gone is marked FAILED with a note; runs owned by another host, or with no owner
recorded (not started by `Tracker`), may still be alive and are only reported. A run whose owner lost the
tracking server and kept the rest of it in the offline journal (tracking/store/journal.py) is left for `tracking sync`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracking.names import ERROR_TAG, HOST_TAG, PID_TAG, REPAIRED_TAG, START_TAG

STALE = "stale"
ALIVE = "alive"
OTHER_HOST = "other host"
NO_OWNER = "no owner recorded"
KEPT_OFFLINE = "kept offline, waiting for `tracking sync`"


def owner_tags() -> dict[str, str]:
    """The tags naming this process as a run's owner."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), START_TAG: process_start(pid) or ""}


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

    def describe(self) -> str:
        owner = f"process {self.pid} on {self.host}" if self.host else "no owner recorded"
        return f"run {self.run_id} ({self.name or 'unnamed'}, experiment {self.experiment}), {owner}: {self.verdict}"


def verdict(tags: dict[str, str], host: str) -> str:
    """STALE, ALIVE, OTHER_HOST or NO_OWNER for a RUNNING run with `tags`, seen from `host`."""
    owner_host, pid = tags.get(HOST_TAG), tags.get(PID_TAG, "")
    if not owner_host or not pid.isdigit():
        return NO_OWNER
    if owner_host != host:
        return OTHER_HOST
    return ALIVE if is_alive(int(pid), tags.get(START_TAG, "")) else STALE


def running_runs(client: Any) -> list[RunningRun]:
    """Every RUNNING run in the store, in every experiment, with its verdict."""
    from mlflow.entities import ViewType

    host = socket.gethostname()
    found = []
    for experiment in client.search_experiments(view_type=ViewType.ALL):
        token = None
        while True:
            page = client.search_runs(
                [experiment.experiment_id],
                "attributes.status = 'RUNNING'",
                run_view_type=ViewType.ALL,
                page_token=token,
            )
            for run in page:
                tags = run.data.tags
                found.append(
                    RunningRun(
                        run.info.run_id,
                        experiment.name,
                        run.info.run_name or "",
                        tags.get(HOST_TAG, ""),
                        tags.get(PID_TAG, ""),
                        verdict(tags, host),
                    )
                )
            token = page.token
            if not token:
                break
    return found


def mark_failed(client: Any, run: RunningRun, by: str) -> None:
    """End a stale run as FAILED, saying why and who decided it."""
    from mlflow.entities import RunTag

    when = datetime.now(UTC).isoformat(timespec="seconds")
    note = (
        f"marked FAILED by {by} on {socket.gethostname()} at {when}: its process {run.pid} is gone without "
        "ending the run (killed by SIGKILL, out of memory, or a crash of the machine)"
    )
    client.log_batch(run.run_id, tags=[RunTag(REPAIRED_TAG, note), RunTag(ERROR_TAG, f"ProcessGone: {note}")])
    client.set_terminated(run.run_id, "FAILED")


def repair_stale_runs(
    client: Any, by: str, dry_run: bool = False, kept_offline: frozenset[str] = frozenset()
) -> tuple[list[RunningRun], list[RunningRun]]:
    """Mark this host's stale runs FAILED (unless `dry_run`); return (stale runs, every RUNNING run).

    Runs in `kept_offline` (their ids) have the rest of their writes in the offline journal: left alone.
    """
    runs = [replace(run, verdict=KEPT_OFFLINE) if run.run_id in kept_offline else run for run in running_runs(client)]
    stale = [run for run in runs if run.verdict == STALE]
    if not dry_run:
        for run in stale:
            mark_failed(client, run, by)
    return stale, runs
