"""The writes a run makes, as plain records, and how each is applied to an MLflow store.

The `Tracker` sends every write through `apply` while the store answers; when a server is lost the same
records go to the offline journal (tracking/store/journal.py), and `tracking sync` replays them through `apply`
again, so the online and the replayed run are written by one code path.

Records are dicts with an `op` key: `batch` (params, metrics, tags), `artifact` (a local file), `inputs`
(data set inputs), `model` (a Keras model, live or saved as `.keras`) and `end` (the final status).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

Op = dict[str, Any]
MLFLOW_UV_LOGGER = "mlflow.utils.uv_utils"
# How many times data set inputs are logged while the store's database refuses the write (BAD_REQUEST: MLflow's
# lookup-then-insert of a data set lost a race to another run's insert), and the most seconds between tries.
INPUT_TRIES, INPUT_RETRY_S = 4, 0.5


def batch(
    params: dict[str, str] | None = None,
    metrics: list[tuple[str, float, int, int]] | None = None,
    tags: dict[str, str] | None = None,
) -> Op:
    """Params and tags as text, metrics as (key, value, timestamp in ms, step)."""
    return {"op": "batch", "params": params or {}, "metrics": [list(m) for m in metrics or []], "tags": tags or {}}


def artifact(path: Path, artifact_path: str | None) -> Op:
    return {"op": "artifact", "path": str(path), "artifact_path": artifact_path}


def inputs(datasets: list[dict[str, Any]]) -> Op:
    """`datasets`: each {"dataset": MLflow Dataset fields, "tags": {name: value}}."""
    return {"op": "inputs", "datasets": datasets}


def model(live: Any, name: str, signature: dict[str, Any], pip_requirements: list[str]) -> Op:
    return {"op": "model", "model": live, "name": name, "signature": signature, "pip_requirements": pip_requirements}


def end(status: str, end_time: int) -> Op:
    return {"op": "end", "status": status, "end_time": end_time}


def apply(client: MlflowClient, run_id: str, op: Op) -> None:
    """Write `op` to the run `run_id` through `client` (file paths in `op` are local and absolute)."""
    kind = op["op"]
    if kind == "batch":
        _apply_batch(client, run_id, op)
    elif kind == "artifact":
        client.log_artifact(run_id, op["path"], op["artifact_path"])
    elif kind == "inputs":
        _apply_inputs(client, run_id, op)
    elif kind == "model":
        _apply_model(client, run_id, op)
    elif kind == "end":
        client.set_terminated(run_id, op["status"], op["end_time"])
    else:
        raise ValueError(f"unknown tracking operation {kind!r}")


def _apply_batch(client: MlflowClient, run_id: str, op: Op) -> None:
    from mlflow.entities import Metric, Param, RunTag

    client.log_batch(
        run_id,
        metrics=[Metric(key, value, timestamp, step) for key, value, timestamp, step in op["metrics"]],
        params=[Param(key, value) for key, value in op["params"].items()],
        tags=[RunTag(key, value) for key, value in op["tags"].items()],
    )


def _apply_inputs(client: MlflowClient, run_id: str, op: Op) -> None:
    """Log the data set inputs. MLflow's SQL store looks a data set up and inserts it when missing, so two trainings
    logging the same data at once both insert it and one fails (UNIQUE constraint failed: datasets..., as two
    parallel `dvc queue` workers did on SQLite; duplicate key ... "dataset_pk", as clones sharing a PostgreSQL-backed
    `mlflow server` did), with BAD_REQUEST, which MLflow's client does not retry. The store rolls the refused write
    back whole, so it is tried again, up to `INPUT_TRIES` times: the other run's insert is committed by then, the
    lookup finds its data set, and logging inputs again adds none twice. One rule for every store."""
    import random
    import time

    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.exceptions import MlflowException

    datasets = [
        DatasetInput(Dataset(**item["dataset"]), tags=[InputTag(key, value) for key, value in item["tags"].items()])
        for item in op["datasets"]
    ]
    for tried in range(1, INPUT_TRIES + 1):
        try:
            client.log_inputs(run_id, datasets=datasets)
            return
        except MlflowException as err:
            if err.error_code != "BAD_REQUEST" or tried == INPUT_TRIES:
                raise
            time.sleep(random.uniform(0, INPUT_RETRY_S))  # apart from the runs that raced it


def _apply_model(client: MlflowClient, run_id: str, op: Op) -> None:
    """An MLflow model (Keras 3 flavour, loadable by every MLflow loader) from the live model, or from the `.keras` file a journal saved."""
    import mlflow
    import mlflow.keras
    from mlflow.models import ModelSignature

    active = mlflow.active_run()
    if active is None or active.info.run_id != run_id:
        # MLflow files a logged model under the active experiment, not the run's, when the run is not active.
        mlflow.set_experiment(experiment_id=client.get_run(run_id).info.experiment_id)
    # The packages are `pip_requirements`, so MLflow's INFO line "Detected uv project" (it saw uv.lock in the
    # working folder, and reads nothing from it) is noise in every training's output.
    logging.getLogger(MLFLOW_UV_LOGGER).setLevel(logging.WARNING)
    live = op.get("model")
    if live is None:
        import keras

        live = keras.models.load_model(op["path"])
    mlflow.models.Model.log(
        artifact_path=None,
        name=op["name"],
        flavor=_KerasForEveryLoader,
        flavor_name=mlflow.keras.__name__,  # what mlflow.keras.log_model records as the logged model's flavour
        model=live,
        signature=ModelSignature.from_dict(op["signature"]),
        pip_requirements=op["pip_requirements"],
        run_id=run_id,
        tags=_context_of(client, run_id),
    )


def _context_of(client: MlflowClient, run_id: str) -> dict[str, str]:
    """The logged model's context tags: the run's own (redacted when it started), so a model a journal replays in
    another process names the run's source, not the replaying one's; a tag the run lacks, redacted from here."""
    from tracking.store.context import context_tags

    recorded = client.get_run(run_id).data.tags
    return {key: recorded.get(key, value) for key, value in context_tags().items()}


class _KerasForEveryLoader:
    """MLflow's Keras 3 flavour (`mlflow.keras`), its flavour entry also telling `mlflow.tensorflow` how to read it.

    `mlflow.keras.load_model` and `mlflow.pyfunc.load_model` read the Keras 3 flavour as MLflow writes it; the
    TensorFlow flavour's loader takes a model's `keras` flavour entry as its own, and without `keras_module` and
    `save_format` there it imports `tensorflow.keras` and opens `model.h5`, which a Keras 3 model does not have.
    Naming the `keras` module and the `.keras` format lets it open the same file the other two load."""

    @staticmethod
    def save_model(path: str, mlflow_model: Any, **kwargs: Any) -> None:
        import mlflow.keras
        from mlflow.models.model import MLMODEL_FILE_NAME

        mlflow.keras.save_model(path=path, mlflow_model=mlflow_model, **kwargs)
        mlflow_model.flavors[mlflow.keras.FLAVOR_NAME].update(keras_module="keras", save_format="keras")
        mlflow_model.save(str(Path(path) / MLMODEL_FILE_NAME))
