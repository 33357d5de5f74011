"""Kept repeats shared through a tracking server: each finished repeat's `.npz` (tracking/repeats/kept.py) is also an
artifact of its run there, found again by the run's `noise.repeat_key` tag. A second clone of the project (another
team member's, a CI machine's) calibrating against the same server trains none of the repeats a clone finished
there: it fetches them into its own kept folder. A local store (SQLite, a folder) shares nothing: the kept folder
beside it already holds every repeat that store's runs finished.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.repeats.kept import Job, KeptRepeat, RepeatStore, read_kept
from tracking.store.location import is_local_store
from tracking.store.reads import finished_repeat

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


log = logging.getLogger(__name__)

# The folder of a repeat's run that holds its kept file, `<key>.npz`.
SHARED_DIR = "kept_repeat"


def shares_repeats(uri: str) -> bool:
    """Whether the store at `uri` is a server that other clones reach, so its runs carry their kept repeats."""
    return not is_local_store(uri)


def shared_name(key: str) -> str:
    """The artifact path of the repeat kept under `key`, in its run."""
    return f"{SHARED_DIR}/{key}.npz"


def fetch_shared(
    client: MlflowClient, experiment_id: str, jobs: Iterable[Job], store: RepeatStore
) -> dict[Job, KeptRepeat]:
    """The `jobs` that a FINISHED run of `experiment_id` on the server kept (the newest run of each key), each
    copied into `store`; a run without the file (logged by an earlier version) or an unreadable file is skipped,
    and its repeat is trained."""
    from mlflow.exceptions import MlflowException

    found: dict[Job, KeptRepeat] = {}
    with tempfile.TemporaryDirectory() as folder:
        for job in jobs:
            run = finished_repeat(client, experiment_id, job.key)
            if run is None:
                continue
            try:
                path = client.download_artifacts(run.info.run_id, shared_name(job.key), folder)
            except (MlflowException, OSError) as err:
                log.debug("run %s keeps no repeat file (%s); the repeat is trained", run.info.run_id, err)
                continue
            kept = read_kept(Path(path))
            if kept is not None:
                store.save(job.key, kept)
                found[job] = kept
    return found
