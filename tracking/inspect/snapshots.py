"""`tracking prune-refs`: delete our git refs (`refs/tracking/...`), each naming a run's working tree.

A push of them (`git push origin 'refs/tracking/*'`, or `git push --mirror`) sends the commits they name and every
object those reach: the tracked files of each run's working tree, uncommitted changes included, and nothing
untracked (tracking/provenance/git.py). Snapshots made by earlier versions held untracked files too (`.env`, keys);
a prune is how they stop going out with the next such push. By default the snapshots a run in the store records are kept
(`tracking rerun` and `tracking diff` read them); `--all` deletes every one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pruned:
    """What a prune deleted (or, dry, would delete) and what it kept, as ref names."""

    deleted: list[str]
    kept: list[str]


def prune_snapshots(root: Path, every: bool, dry_run: bool) -> Pruned:
    """Delete the refs of ours in the repository holding `root` that no run of the store records (all of them with
    `every`); with `dry_run`, only say which."""
    from tracking.provenance.git import delete_refs, open_repository, our_refs

    top = Path(open_repository(root).working_tree_dir)
    refs = our_refs(top)
    recorded = set() if every or not refs else recorded_snapshots(root)
    deleted = sorted(ref for ref, sha in refs.items() if sha not in recorded)
    if not dry_run:
        delete_refs(top, deleted)
    return Pruned(deleted, sorted(set(refs) - set(deleted)))


def recorded_snapshots(root: Path) -> set[str]:
    """The snapshots (`prov.git.snapshot`) the runs of the store record, deleted runs included; none without a
    store yet."""
    from mlflow.entities import ViewType

    from tracking.names import GIT_SNAPSHOT_TAG
    from tracking.store.location import open_client, tracking_uri
    from tracking.store.sqlite import database_path

    database = database_path(tracking_uri(root))
    if database is not None and not database.is_file():
        return set()
    client = open_client(root)
    experiments = [found.experiment_id for found in client.search_experiments(view_type=ViewType.ALL)]
    found: set[str] = set()
    token = None
    while experiments:
        page = client.search_runs(experiments, run_view_type=ViewType.ALL, max_results=1000, page_token=token)
        found.update(run.data.tags[GIT_SNAPSHOT_TAG] for run in page if GIT_SNAPSHOT_TAG in run.data.tags)
        token = page.token
        if not token:
            break
    return found
