"""Before a run opens: what an earlier stage of it kept offline is uploaded, the runs killed processes left
RUNNING are ended FAILED, a new run's clock is checked against the runs before it, a run to resume is checked to
be in the store, and a new run gets its name. The `Tracker` (tracking/run/tracker.py) calls these in that order,
each against the store behind `client`.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.env import DVC_EXP_NAME
from tracking.errors import TrackingServerError
from tracking.store.faults import store_fault
from tracking.store.journal import has_journal, journal_folder, kept_offline, remove_ended_spools
from tracking.store.location import shown
from tracking.store.reads import present_run
from tracking.store.stale import repair_stale_runs

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)
# How far a run already in the experiment may have started after this machine's now before the clock is called
# behind: hosts kept by NTP agree within seconds; an hour leaves room for a host that drifted unwatched.
CLOCK_SLACK_S = 3600


def sync_kept_offline(client: MlflowClient, root: Path, uri: str, run_id: str) -> str:
    """Upload what an earlier stage of run `run_id` kept offline before resuming it; return the run's id there."""
    folder = journal_folder(root, run_id)
    if not has_journal(folder):
        return run_id
    from tracking.store.sync import sync_journal

    done = sync_journal(folder, client, uri)
    log.info(done.line)
    return done.run_id


def end_stale_runs(client: MlflowClient, root: Path, uri: str, stage: str) -> None:
    """End as FAILED the runs that killed processes on this host left RUNNING (FINISHED again those that had
    finished before the killed stage resumed them), and say so in a line each; remove the spools of ended runs that
    their stage could not remove."""
    from mlflow.exceptions import MlflowException

    try:
        stale, _ = repair_stale_runs(client, by=f"the {stage} stage", kept_offline=kept_offline(root))
        remove_ended_spools(client, root)
    except MlflowException as err:
        raise store_fault(err, uri) or TrackingServerError(
            f"checking {shown(uri)} for runs left RUNNING failed ({err}); run `tracking doctor`"
        ) from err
    failed = [run for run in stale if run.finished_end is None]
    if failed:
        log.warning(
            "marked %d run(s) that a killed process left RUNNING as FAILED (%s); see `tracking doctor`",
            len(failed),
            ", ".join(run.run_id for run in failed),
        )
    for run in stale:
        if run.finished_end is not None:
            log.warning(
                "run %s: %s; its training is whole, re-run the %s stage",
                run.run_id,
                run.repair(),
                run.stage or "later",
            )


def warn_if_clock_behind(client: MlflowClient, uri: str, experiment_id: str) -> None:
    """Say so when a run of the experiment started after this machine's now: its clock is behind (or that run's
    host was ahead), and MLflow, the UI and "the newest run" order runs by start time, so this run would sort
    below runs made before it. A warning, not a refusal: the run itself is recorded whole either way."""
    from mlflow.exceptions import MlflowException

    now_ms = int(time.time() * 1000)
    try:
        newest = client.search_runs([experiment_id], max_results=1, order_by=["attributes.start_time DESC"])
    except MlflowException as err:
        raise store_fault(err, uri) or TrackingServerError(
            f"reading the newest run of {shown(uri)} failed ({err}); run `tracking doctor`"
        ) from err
    if not newest or newest[0].info.start_time <= now_ms + CLOCK_SLACK_S * 1000:
        return
    run = newest[0].info
    hours = (run.start_time - now_ms) / 3_600_000
    behind = f"{hours / 24:.0f} days" if hours >= 48 else f"{hours:.1f} hours"
    log.warning(
        "this machine's clock reads %s, %s before run %s of this experiment started (%s): runs sort by start "
        "time, so this one will sort below runs made before it; set the clock (NTP: `timedatectl set-ntp true`) "
        "or, if that run's host was ahead, mind its start time",
        utc_minute(now_ms),
        behind,
        run.run_id,
        utc_minute(run.start_time),
    )


def utc_minute(epoch_ms: int) -> str:
    """A time in milliseconds since the epoch as `2026-11-28 17:23 UTC`."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def resumable(client: MlflowClient, uri: str, run_id: str) -> int | None:
    """Check that the run to resume (the train stage's, found for outputs/run.json) is in the store and not deleted:
    DVC takes the outputs as up to date after `rm mlflow.db`, so this stage is the first to see it.
    Return its end time when it is FINISHED (the resuming stage may put it back), else None."""
    from tracking.store.recorded import gone_error

    run = present_run(client, run_id)
    if run is None:
        raise gone_error(f"the run to resume, {run_id}, is not in {shown(uri)}")
    return run.info.end_time if run.info.status == "FINISHED" else None


def run_name(stage: str) -> str:
    """The name of a run no caller named: the DVC experiment's (`dvc exp run -n` sets it; redacted, as every name
    from outside), else the stage and six
    random hex digits, e.g. `train-3f9a1c`.

    Never MLflow's own name: the store draws it from Python's `random`, which `seed_frameworks` seeded before the
    run opens, so every `dvc repro` drew the same name (and a SQLite store's draw, made in this process, moved the
    seeded stream a server's does not). `secrets` reads the operating system's randomness and leaves the seeded
    streams as they were."""
    import secrets

    from tracking.redaction import redact_name

    return redact_name(os.environ.get(DVC_EXP_NAME) or "") or f"{stage}-{secrets.token_hex(3)}"
