"""The runs `tracking diff` compares: found by id or DVC experiment name, read with their logged artifacts, and
read in today's names when an earlier version logged them."""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.data.manifest import LOGGED_MANIFEST, Manifest
from tracking.dvc_files import declared_outputs
from tracking.errors import RunNotFound, RunSelectionError, TrackingServerError
from tracking.inspect.diff.legacy import upgrade_logged
from tracking.layout import CALIBRATE, RUN_FILE
from tracking.names import (
    DVC_EXP_NAME_TAG,
    GIT_COMMIT_TAG,
    MLFLOW_PARENT_RUN_TAG,
    NOISE_ROLE_TAG,
    OP_DETERMINISM_TAG,
    PROV_PREFIX,
    RERUN_OF_TAG,
    SOURCE_TAG,
    STAGE_TAG,
    attribute_is,
    tag_absent,
    tag_is,
)
from tracking.noise.run_name import SEPARATOR
from tracking.provenance import LOCKED_DEPS_ARTIFACT, RECORD_ARTIFACT, to_fields
from tracking.provenance.dvc import locked_out_md5
from tracking.provenance.git import decode_diff
from tracking.store.reads import experiment_ids, first_runs, newest_run, run_by_id, run_metrics
from tracking.store.recorded import find_training, parse_run_file

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_ID_PREFIX = re.compile(r"^[0-9a-f]{8,31}$")  # the 8 characters `tracking diff` and the UI print, or more
# What a run may be given as, for the line that says none was found.
RUN_REFERENCES = (
    "a run's id or its first 8 characters, its name (train-29bdb4), a DVC experiment's name or a git revision; "
    "`mlflow ui` lists runs with their names and ids"
)
_EXP_NAME = re.compile(r"^[\w.-]+$")
# A reference longer than this is no run id, DVC experiment name or git revision anyone typed (git's own refs stop
# at the file system's 255-byte names).
MAX_REF_CHARS = 255


@dataclass(frozen=True)
class RunSnapshot:
    """What one run logged: params, metrics, tags (with every field of its provenance record, searchable or not),
    the data manifest and the uncommitted diff."""

    run_id: str
    name: str
    experiment_id: str
    status: str  # MLflow's, with ", deleted" for a run in the store's bin (`mlflow runs restore` brings it back)
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    manifest: Manifest | None
    diff: str

    def provenance(self, section: str) -> dict[str, str]:
        """The `prov.<section>.*` tags, keyed without the prefix."""
        prefix = f"{PROV_PREFIX}{section}."
        return {key[len(prefix) :]: value for key, value in self.tags.items() if key.startswith(prefix)}

    @property
    def op_determinism(self) -> bool:
        return self.tags.get(OP_DETERMINISM_TAG, self.params.get("determinism.op_determinism")) == "true"


def load_run(client: MlflowClient, ref: str, project: Path | None = None) -> RunSnapshot:
    """The run with id `ref` (or the run `tracking sync` made of a run opened offline under that id), or the latest
    run tagged `dvc.exp_name = ref` (a DVC experiment name), or the run
    named `ref` (`train-29bdb4`, as the UI and `tracking diff` show it, after its verdict once judged), or the run whose id starts with `ref` (8 or
    more hex characters), or else the run of the training `outputs/run.json` records at `ref` in `project` (an
    experiment or git revision DVC resolves), or in a team's script project (no stage declares `outputs/run.json`) the latest run
    logged at the commit git revision `ref` names. A name or prefix that several runs share is an error that lists them.

    By name, the experiment's candidate run: its calibration runs and the candidate's extra runs (children of it,
    `compare.candidate_repeats`) carry the name too, and start later. An
    experiment that changed only what `train` does not depend on (`compute`, `calibration`, `compare`) trained
    no run to tag: DVC reused the earlier training, which its `outputs/run.json` records.
    """
    from mlflow.exceptions import MlflowException

    if not ref.strip() or len(ref) > MAX_REF_CHARS or not ref.isprintable():
        shown = repr(ref) if len(ref) <= 40 else f"{ref[:40]!r}... ({len(ref)} characters)"
        raise RunNotFound(
            f"run {shown}: not a run id, a DVC experiment name or a git revision (an empty one would name the "
            f"workspace's run; more than {MAX_REF_CHARS} printable characters none of them); name the run, e.g. "
            "the run id that `mlflow ui` or outputs/run.json shows"
        )
    run = None
    if _RUN_ID.match(ref):
        try:
            run = run_by_id(client, ref)
        except MlflowException:
            run = None
    if run is None and _RUN_ID.match(ref):  # a run opened offline: its journal's id, which its sync tagged it with
        run = newest_run(client, experiment_ids(client), tag_is(SOURCE_TAG, ref))
    if run is None and _EXP_NAME.match(ref):
        named = (
            f"{tag_is(DVC_EXP_NAME_TAG, ref)} and {tag_is(STAGE_TAG, CALIBRATE, '!=')} and "
            f"{tag_absent(MLFLOW_PARENT_RUN_TAG)}"
        )
        run = newest_run(client, experiment_ids(client), named)
    if run is None and _EXP_NAME.match(ref):
        run = _only_run(client, ref, attribute_is("run_name", ref), "are named")
    if run is None and _EXP_NAME.match(ref):  # a judged run: its verdict in front of its name (noise/run_name.py)
        run = _only_run(client, ref, attribute_is("run_name", f"%{SEPARATOR}{ref}", "LIKE"), "are named")
    if run is None and _ID_PREFIX.match(ref):
        run = _only_run(client, ref, attribute_is("run_id", f"{ref}%", "LIKE"), "have ids that start with")
    if run is None and project is not None:
        run = _run_at_revision(client, project, ref)
    if run is None and project is not None and RUN_FILE.as_posix() not in declared_outputs(project, project):
        run = _script_run_at_commit(client, project, ref)
    if run is None:
        outside = (
            "; an experiment that trained no run of its own is found from inside its project"
            if project is None and not _RUN_ID.match(ref)
            else ""
        )
        raise RunNotFound(
            f"run '{ref}' not found in {client.tracking_uri}: no run with that id, name or id prefix and no run "
            f"tagged dvc.exp_name with that name{outside}",
            fix=f"give {RUN_REFERENCES}",
        )
    provenance = artifact_names(client, run.info.run_id, "provenance")  # listed once for the three files there
    return RunSnapshot(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        experiment_id=run.info.experiment_id,
        status=run.info.status if run.info.lifecycle_stage != "deleted" else f"{run.info.status}, deleted",
        params=dict(run.data.params),
        metrics=run_metrics(run),
        tags={**recorded_fields(client, run.info.run_id, provenance), **run.data.tags},
        manifest=read_artifact(
            client, run.info.run_id, LOGGED_MANIFEST, lambda text: Manifest.from_dict(json.loads(text), LOGGED_MANIFEST)
        ),
        diff=read_artifact(client, run.info.run_id, "provenance/uncommitted.diff", str, provenance) or "",
    )


def _only_run(client: MlflowClient, ref: str, clause: str, sharing: str) -> Run | None:
    """The one run of any experiment that `clause` (an MLflow filter string) selects; None when none does, a
    RunSelectionError listing them when several do."""
    found = first_runs(client, experiment_ids(client), clause, limit=10)
    if len(found) > 1:
        ids = ", ".join(run.info.run_id for run in found)
        raise RunSelectionError(f"{len(found)} runs {sharing} '{ref}': {ids}", fix="give the one you mean by its id")
    return found[0] if found else None


def _script_run_at_commit(client: MlflowClient, project: Path, ref: str) -> Run | None:
    """The latest run (not a calibration's, nor a rerun) that a team's script logged at the commit git revision `ref`
    names; None where git resolves no such revision or nothing was logged there."""
    import git

    try:
        commit = git.Repo(project, search_parent_directories=True).commit(ref).hexsha
    except (git.BadName, ValueError):
        return None
    at_commit = (
        f"{tag_is(GIT_COMMIT_TAG, commit)} and {tag_absent(MLFLOW_PARENT_RUN_TAG)} and "
        f"{tag_absent(NOISE_ROLE_TAG)} and {tag_absent(RERUN_OF_TAG)}"
    )
    found = newest_run(client, experiment_ids(client), at_commit)
    if found:
        log.info("'%s': using run %s, the latest logged at commit %s", ref, found.info.run_id, commit[:8])
    return found


def _has_remote(project: Path) -> bool:
    """Whether the DVC project has a remote configured (`dvc remote list` names one)."""
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        return bool(repo.config.get("remote"))


def _run_at_revision(client: MlflowClient, project: Path, ref: str) -> Run | None:
    """The run of the training the project's `outputs/run.json` records at DVC revision `ref` (the newest that
    logged its inputs and weights), or None where DVC resolves no such revision or nothing trained there;
    RunNotFound where that revision's dvc.lock names a run file the cache lacks, or no run in the store trained it."""
    import dvc.api
    from dvc.exceptions import DvcException, PathMissingError
    from mlflow.exceptions import MlflowException

    try:
        text = dvc.api.read(RUN_FILE.as_posix(), repo=str(project), rev=ref)
    except PathMissingError as err:
        locked = locked_out_md5(project, ref, RUN_FILE.as_posix())
        if locked is None:
            return None
        raise RunNotFound(
            f"run '{ref}' not found in {client.tracking_uri}: no run is tagged dvc.exp_name with that name, and the "
            f"{RUN_FILE} that dvc.lock names at '{ref}' (md5 {locked[:8]}) is not in this project's DVC cache",
            fix=(
                f"`git checkout {ref} && dvc pull {RUN_FILE}` from the DVC remote that holds it, or give the run's id"
                if _has_remote(project)
                else f"this project has no DVC remote to pull it from: give {RUN_REFERENCES}"
            ),
        ) from err
    except (DvcException, OSError):
        return None
    training = parse_run_file(text, f"{RUN_FILE} at '{ref}'")
    try:
        run = find_training(client, training, project)
    except MlflowException as err:
        raise TrackingServerError(
            f"the run of the training {RUN_FILE} records at '{ref}' cannot be read from {client.tracking_uri} "
            f"({str(err).splitlines()[0]})",
            fix="check the tracking server",
        ) from err
    if run is None:
        raise RunNotFound(
            f"run '{ref}' not found in {client.tracking_uri}: no run is tagged dvc.exp_name with that name, and no "
            f"run in this store trained what {RUN_FILE} records at '{ref}' (weights {training.weights_sha256[:12]}...)",
            fix="set MLFLOW_TRACKING_URI to the store that logged it, or give the run's id",
        )
    log.info(
        "'%s': no run is tagged dvc.exp_name with that name; using run %s, which trained what its %s records (the "
        "training DVC ran or reused there)",
        ref,
        run.info.run_id,
        RUN_FILE,
    )
    return run


def recorded_fields(client: MlflowClient, run_id: str, listed: set[str] | None = None) -> dict[str, str]:
    """Every field of the run's provenance record and locked deps by its `prov.*` name (tags hold only the
    searchable ones: tracking/provenance/__init__.py); empty for a run that logged neither. `listed`: the names in
    the run's `provenance/` folder, where already listed."""
    fields: dict[str, str] = {}
    for artifact in (RECORD_ARTIFACT, LOCKED_DEPS_ARTIFACT):
        fields.update(to_fields(read_artifact(client, run_id, artifact, json.loads, listed) or {}))
    return fields


def artifact_names(client: MlflowClient, run_id: str, folder: str) -> set[str]:
    """The names of the files and folders in one artifact folder of the run (none where it has no such folder)."""
    from mlflow.exceptions import MlflowException

    try:
        return {Path(item.path).name for item in client.list_artifacts(run_id, folder)}
    except (MlflowException, OSError) as err:
        raise _unreadable(folder, run_id, err) from err


def read_artifact(client: MlflowClient, run_id: str, path: str, parse: Any, listed: set[str] | None = None) -> Any:
    """An artifact's parsed text, or None when the run has no such artifact; `listed`: the names in its folder,
    where the caller listed it already (each listing is a call to the store)."""
    from mlflow.exceptions import MlflowException

    folder, _, name = path.rpartition("/")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if name not in (artifact_names(client, run_id, folder) if listed is None else listed):
        return None
    try:
        with tempfile.TemporaryDirectory() as scratch:
            # Not read_text(): its newline translation would turn a diff's CRLF lines into LF.
            return parse(decode_diff(Path(client.download_artifacts(run_id, path, scratch)).read_bytes()))
    except (MlflowException, OSError) as err:
        raise _unreadable(path, run_id, err) from err


def _unreadable(path: str, run_id: str, err: Exception) -> TrackingServerError:
    """The error for an artifact (or folder) the store would not give."""
    return TrackingServerError(
        f"artifact {path} of run {run_id} cannot be read ({(str(err).splitlines() or [''])[0]})",
        fix="check the tracking server and its artifact store",
    )


def in_todays_names(run: RunSnapshot, builders: str | None) -> RunSnapshot:
    """`run` with its params and tags as today's pipeline names them (`builders`: tracking/inspect/diff/legacy.py)."""
    params, tags = upgrade_logged(run.params, run.tags, builders)
    return replace(run, params=params, tags=tags)
