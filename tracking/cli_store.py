"""The `tracking` commands over what runs leave behind: `doctor` (runs left RUNNING ended FAILED, or FINISHED
again when a later stage died after the run had finished; runs the project's outputs name and the store lacks),
`sync` (runs kept in the offline journal uploaded) and `prune-refs` (our git refs of runs' working trees deleted).
Kept apart from tracking/cli.py's parser; imports stay inside the commands so that `tracking --help` starts fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def doctor_command(args: argparse.Namespace) -> None:
    from mlflow.exceptions import MlflowException

    from tracking.errors import TrackingServerError
    from tracking.store.faults import store_fault
    from tracking.store.journal import kept_offline
    from tracking.store.location import find_project, open_client, shown, tracking_uri
    from tracking.store.sqlite import database_path
    from tracking.store.stale import ENDED, repair_stale_runs

    root = find_project()  # outside a project, the store MLFLOW_TRACKING_URI names (tracking_uri says if unset)
    uri = tracking_uri(root)
    database = database_path(uri)
    uri = shown(uri)  # printed from here on: without a user:password@
    if database is not None and not database.is_file():
        print(f"{uri}: no store yet, so no run left RUNNING to repair")
        print_missing_runs(None, root, uri)
        return
    client = open_client(root)
    try:
        stale, running = repair_stale_runs(
            client,
            by="tracking doctor",
            dry_run=args.dry_run,
            kept_offline=kept_offline(root) if root is not None else frozenset(),
        )
    except MlflowException as err:
        raise store_fault(err, uri) or TrackingServerError(
            f"MLflow tracking store {uri} cannot be read ({str(err).splitlines()[0][:200]}); "
            "start the server or fix MLFLOW_TRACKING_URI"
        ) from err
    print(
        f"{uri}: {len(running)} run(s) RUNNING, {len(stale)} of them left by a process that is gone "
        "or whose heartbeat went silent"
    )
    for run in running:
        action = run.repair(args.dry_run) if run.verdict in ENDED else "left alone"
        print(f"  {run.describe()} -> {action}")
    print_missing_runs(client, root, uri)


def print_missing_runs(client: object, root: Path | None, uri: str) -> None:
    """`tracking doctor`'s lines for the training the project's outputs record and the store lacks, with the fix."""
    from tracking.store.recorded import REPRODUCE_TRAINING, missing_training

    gone = missing_training(client, root) if root is not None else None
    if gone is not None:
        print(f"the run behind the project's outputs is gone from the store; {REPRODUCE_TRAINING}:")
        print(f"  {gone.describe(uri)}")


def sync_command(args: argparse.Namespace) -> None:
    import os

    from tracking.env import MLFLOW_TRACKING_URI
    from tracking.errors import JournalError
    from tracking.store.location import find_project
    from tracking.store.sync import sync_all

    root = find_project()
    if root is None:  # runs are kept offline in a project's .tracking/offline/; none is here
        print(f"nothing to sync: {Path.cwd()} is not inside a DVC project, whose .tracking/offline/ would hold runs")
        return
    done = sync_all(root, args.tracking_uri or os.environ.get(MLFLOW_TRACKING_URI))
    for synced in done:
        print(synced.line)
    if not done:
        print("nothing to sync: no run is kept offline in .tracking/offline/")
    partial = [synced for synced in done if synced.unreplayed]
    if partial:
        raise JournalError(
            f"{sum(len(synced.unreplayed) for synced in partial)} journal line(s) could not be replayed (named "
            f"above; the rest was) and are kept in {', '.join(str(synced.archive) for synced in partial)}",
            fix="mend them there, move the folder back into .tracking/offline/, delete its progress.json and run "
            "`tracking sync` again (what is already replayed is not written twice)",
        )


def prune_snapshots_command(args: argparse.Namespace) -> None:
    from tracking.inspect.snapshots import prune_snapshots
    from tracking.provenance.git import OUR_REFS, PUSH_SNAPSHOTS
    from tracking.store.location import project_root

    pruned = prune_snapshots(project_root(), args.all, args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    for ref in pruned.deleted:
        print(f"  {verb} {ref}")
    kept = f"; kept {len(pruned.kept)} that runs in the store record (--all deletes them too)" if pruned.kept else ""
    print(
        f"{verb} {len(pruned.deleted)} snapshot ref(s) under {OUR_REFS}{kept}. `{PUSH_SNAPSHOTS}` sends what the "
        "remaining ones reach: the tracked files of each run's working tree, never an untracked file"
    )
