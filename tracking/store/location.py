"""Where runs go: `MLFLOW_TRACKING_URI` when set, else the SQLite file `mlflow.db` at the project root.

Commands that only read runs (`tracking bands`, `compare-groups`, `diff`) work from any folder on any store:
with `MLFLOW_TRACKING_URI` set they use it anywhere; without it, inside a project, the project's `mlflow.db`;
outside one, one error line naming `MLFLOW_TRACKING_URI` (`find_project` gives None there, `open_client` says so).

`connect` checks the store answers before any training time is spent. Experiments that DVC's queue runs in
a temporary copy of the project (`.dvc/tmp/exps/...`) log to the store of the project that owns the copy, so
their runs outlive the copy and show in `mlflow ui` at the project root. A project copied or moved with its
store (`cp -r`, as the examples' READMEs copy one) has its store re-pointed at its own `mlartifacts/` by
`connect`: SQLite stores keep artifact locations as absolute paths, which still named the original's folder.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tracking import startup
from tracking.env import DVC_ROOT, MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT, MLFLOW_TRACKING_URI, TRACKING_PROJECT_ROOT
from tracking.errors import RepoError, RunSelectionError, StoreFault, TrackingServerError, not_a_readable_file
from tracking.names import EXPERIMENT_KIND_TAG
from tracking.store.faults import describe, quiet_mlflow_database_errors, store_fault
from tracking.store.recorded import gone_error, missing_training
from tracking.store.sqlite import (
    create_private,
    creation_lock,
    database_file,
    database_path,
    private_folder,
    refuse_foreign,
    rehome_artifacts,
    use_wal,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)

DEFAULT_DB = "mlflow.db"
DEFAULT_ARTIFACTS = "mlartifacts"
# The experiment type (the UI's "Machine learning"). MLflow's UI opens an experiment on its runs, not its GenAI
# overview, by this tag when its GenAI/Model training switch is off (a build-time flag, on in 3.17, whose UI
# follows the switch the user picks instead; see README "Two commands").
EXPERIMENT_KIND = "custom_model_development"
_HTTP_TIMEOUT_S = "10"
_HTTP_RETRIES = "1"


def project_root(start: Path | None = None) -> Path:
    """The DVC project root: DVC's own DVC_ROOT while it runs a stage, else the nearest folder with `.dvc/`.

    DVC's queue runs stages in a temporary copy of the project but sets DVC_ROOT to the owning project;
    the stage's files are those of the copy, so there the copy wins.
    """
    if os.environ.get(TRACKING_PROJECT_ROOT):
        return Path(os.environ[TRACKING_PROJECT_ROOT]).resolve()
    here = (start or Path.cwd()).resolve()
    nearest = next((folder for folder in (here, *here.parents) if (folder / ".dvc").is_dir()), None)
    if nearest is not None and owning_project(nearest) != nearest:
        return nearest
    if os.environ.get(DVC_ROOT):
        return Path(os.environ[DVC_ROOT]).resolve()
    if nearest is not None:
        return nearest
    raise RepoError(
        f"{here} is not inside a DVC project (no .dvc/ folder found); run `dvc init` or cd to the project root"
    )


def find_project(start: Path | None = None) -> Path | None:
    """The DVC project root as `project_root` finds it, or None outside any project."""
    try:
        return project_root(start)
    except RepoError:
        return None


def owning_project(root: Path) -> Path:
    """The project whose `.dvc/tmp/` holds `root` (a DVC queue's temporary experiment copy), else `root` itself."""
    for folder in root.parents:
        if folder.name == "tmp" and folder.parent.name == ".dvc":
            return folder.parent.parent
    return root


def tracking_uri(root: Path | None) -> str:
    """`MLFLOW_TRACKING_URI` when set, else the project's `mlflow.db`; outside a project (`root` None) it must be set."""
    if os.environ.get(MLFLOW_TRACKING_URI):
        return os.environ[MLFLOW_TRACKING_URI]
    if root is None:
        raise RepoError(
            f"{Path.cwd()} is not inside a DVC project and {MLFLOW_TRACKING_URI} is not set; set {MLFLOW_TRACKING_URI} "
            "to the store that holds the runs (e.g. sqlite:////path/to/mlflow.db or http://host:5000), "
            "or cd into the project"
        )
    return f"sqlite:///{owning_project(root) / DEFAULT_DB}"


def is_local_store(uri: str) -> bool:
    """Whether `uri` is a store only this machine can open (a SQLite file or a folder), not a server."""
    return uri.startswith(("sqlite:", "file:", "/")) or "://" not in uri


def default_artifact_location(uri: str) -> str | None:
    """For a local SQLite store, artifacts go beside the database in `mlartifacts/`, whatever the working directory;
    a missing folder is created owner-only, as the store is."""
    database = database_path(uri)
    return None if database is None else private_folder(database.parent / DEFAULT_ARTIFACTS).as_uri()


def open_client(root: Path | None) -> MlflowClient:
    """An `MlflowClient` on the store of `tracking_uri(root)`, checked to answer (for commands that only read runs).

    A missing SQLite file is an error rather than a new, empty store created as a side effect; one that a
    training is creating right now is read only once it is complete (`creation_lock`).
    """
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient
    from sqlalchemy.exc import SQLAlchemyError

    uri = tracking_uri(root)
    database = database_path(uri)
    if database is not None and not database.is_file():
        gone = missing_training(None, root) if root is not None else None
        if gone is not None:  # outputs recording a training, and no store: it was deleted
            raise gone_error(gone.describe(uri))
        raise TrackingServerError(
            f"no MLflow store {database} yet (nothing was logged here); run the pipeline first, "
            f"or set {MLFLOW_TRACKING_URI} to the store that holds the runs"
        )
    http_limits(uri)
    quiet_mlflow_database_errors()
    mlflow.set_tracking_uri(uri)
    refuse_foreign(database)
    try:
        with creation_lock(uri):
            if _empty(database):  # MLflow would make it a new store: a side effect, and the lost runs unsaid
                raise TrackingServerError(
                    f"the MLflow store {database} is empty (0 bytes): it holds no runs (a copy or a full disk cut it "
                    "short?)",
                    fix="restore it from a backup, or remove it and run the pipeline to start a new store",
                )
            client = MlflowClient(tracking_uri=uri)  # opens a SQLite store: a damaged file fails here
            client.search_experiments(max_results=1)
    except (MlflowException, OSError, SQLAlchemyError) as err:
        raise _store_error(uri, err) from err
    return client


def _moved(location: str | None, here: str | None) -> bool:
    """Whether an experiment's artifact folder is another project's `mlartifacts/` (the store was copied with its
    project) rather than the one beside this store."""
    return bool(location and here and location != here and location.rstrip("/").endswith(f"/{DEFAULT_ARTIFACTS}"))


def _empty(database: Path | None) -> bool:
    """Whether the SQLite store is a file of 0 bytes (read under `creation_lock`, when no process is creating it)."""
    return database is not None and database.is_file() and database.stat().st_size == 0


def http_limits(uri: str) -> None:
    """Fail fast on an unreachable server: a short timeout and one retry, unless the user set their own. A URI
    with a user:password@ part is never printed: MLflow's "View run ... at:" lines, which would show it, are off."""
    if uri.startswith(("http://", "https://")):
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", _HTTP_TIMEOUT_S)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", _HTTP_RETRIES)
    if shown(uri) != uri:
        os.environ[MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT] = "true"


def shown(uri: str) -> str:
    """`uri` as the product stores or prints it: without its user:password@ part (MLflow reads a server's
    credentials from the URI or from MLFLOW_TRACKING_USERNAME/PASSWORD; neither is written anywhere)."""
    from tracking.redaction import strip_url_userinfo

    return strip_url_userinfo(uri)


# MLflow error codes that mean the store answered and refused the request: not a store that cannot be reached.
_REFUSALS = (
    "INVALID_PARAMETER_VALUE",
    "RESOURCE_ALREADY_EXISTS",
    "RESOURCE_DOES_NOT_EXIST",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
    "BAD_REQUEST",
)


def _store_error(uri: str, err: BaseException) -> TrackingServerError | StoreFault:
    """What went wrong opening the store at `uri`, said as what it is: a store fault (damaged, read-only, full),
    a request the store refused (its own message), or a store that cannot be reached."""
    fault = store_fault(err, uri)
    if fault is not None:
        return fault
    code = getattr(err, "error_code", None)
    if code in _REFUSALS:
        reason = (str(getattr(err, "message", err)).strip().splitlines() or [""])[0][:300]
        return TrackingServerError(
            f"MLflow tracking store {uri} refused the request ({code}: {reason})",
            fix="fix what it names (the experiment in params.yaml, your credentials), or the store",
        )
    return _unreachable(uri, err)


def _unreachable(uri: str, err: BaseException) -> TrackingServerError:
    reason = describe(err)
    return TrackingServerError(
        f"MLflow tracking store {shown(uri)} cannot be reached ({reason}); start the server or fix/unset "
        f"{MLFLOW_TRACKING_URI}"
    )


def refuse_unusable_paths(uri: str) -> None:
    """Raise a `StoreFault` when a SQLite store's file, or the `mlartifacts/` folder beside it, is something MLflow
    cannot use (a link that loops, a folder where the file goes, a file or `/dev/null` where the folder goes):
    checked before the store is opened, so no run opens and trains only to fail writing its first file."""
    database = database_file(uri)
    if database is None:
        return
    kind = not_a_readable_file(database)
    if kind not in (None, "not found", "a symbolic link to a missing file"):
        raise StoreFault(
            f"MLflow store {database} is {kind}, not a database file",
            fix="move it aside (a new store is made there) or point MLFLOW_TRACKING_URI at the store",
        )
    artifacts = database.parent / DEFAULT_ARTIFACTS
    kind = not_a_readable_file(artifacts) or "a regular file"
    if kind not in ("a directory", "not found"):
        raise StoreFault(
            f"{artifacts}, where the MLflow store {database.name} keeps its runs' files, is {kind}, not a folder",
            fix=f"move it aside (a new {DEFAULT_ARTIFACTS}/ folder is made there) or make it a link to a folder",
        )


def connect(root: Path, experiment: str) -> str:
    """Point MLflow at the store, make sure it answers and holds `experiment` (typed as model training); return its id."""
    import mlflow
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError

    uri = tracking_uri(root)
    http_limits(uri)
    quiet_mlflow_database_errors()
    mlflow.set_tracking_uri(uri)
    refuse_unusable_paths(uri)
    refuse_foreign(database_path(uri))
    try:
        with creation_lock(uri):
            if _empty(database_path(uri)):  # no process is creating it: we hold the creation lock
                log.warning(
                    "the MLflow store %s was empty (0 bytes) and is made a new store: if it held runs, they are "
                    "lost; restore it from a backup instead (`tracking doctor` lists the runs outputs name)",
                    database_path(uri),
                )
            create_private(uri)
            found = mlflow.get_experiment_by_name(experiment)
            if found is not None and _moved(found.artifact_location, default_artifact_location(uri)):
                rehome_artifacts(uri, found.artifact_location, default_artifact_location(uri))
                log.info(
                    "the project was copied or moved: its MLflow store now keeps artifacts in %s, not %s",
                    default_artifact_location(uri),
                    found.artifact_location,
                )
            use_wal(uri)
            if found is None:
                experiment_id = mlflow.create_experiment(
                    experiment,
                    artifact_location=default_artifact_location(uri),
                    tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
                )
            elif found.lifecycle_stage == "deleted":
                raise RunSelectionError(
                    f"MLflow experiment '{experiment}' (id {found.experiment_id}) is deleted in {uri}",
                    fix=f"restore it (`MLFLOW_TRACKING_URI={uri} mlflow experiments restore --experiment-id {found.experiment_id}`) or name "
                    "another in mlflow.experiment in params.yaml",
                )
            else:
                experiment_id = found.experiment_id
                if EXPERIMENT_KIND_TAG not in found.tags:  # made before the tag was set, or by another tool
                    mlflow.MlflowClient().set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    except (MlflowException, OSError, SQLAlchemyError) as err:
        raise _store_error(uri, err) from err
    startup.mark(startup.STORE)
    return experiment_id
