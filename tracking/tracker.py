"""`Tracker`: the one MLflow run of a pipeline execution, opened by train and resumed by evaluate.

It checks the store answers before work starts, logs params, provenance, data and metrics, and ends the
run honestly: FINISHED on success, FAILED on an error, KILLED on Ctrl-C or SIGTERM, never left RUNNING.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any

from tracking.env import DVC_EXP_BASELINE_REV, DVC_EXP_NAME
from tracking.errors import RunStateError
from tracking.lifecycle import sigterm_raises, status_for
from tracking.provenance import to_tags
from tracking.store import connect, project_root, tracking_uri

DATASET_DIGEST_CHARS = 32  # MLflow's datasets.digest column holds at most 36 characters.
_PARAM_CHARS = 6000


class Tracker:
    """Context manager around one MLflow run; pass `run_id` to resume the run another stage started."""

    def __init__(self, experiment: str, root: Path | None = None, run_id: str | None = None, stage: str = "train") -> None:
        self.experiment = experiment
        self.root = root
        self.run_id = run_id
        self.stage = stage
        self._sigterm = sigterm_raises()

    def __enter__(self) -> Tracker:
        import mlflow

        self.root = self.root or project_root()
        experiment_id = connect(self.root, self.experiment)
        if self.run_id is not None:
            self._check_resumable(self.run_id)
            run = mlflow.start_run(run_id=self.run_id)
        else:
            run = mlflow.start_run(experiment_id=experiment_id, run_name=os.environ.get(DVC_EXP_NAME) or None)
        self.run_id = run.info.run_id
        self._sigterm.__enter__()
        self.set_tags({"pipeline.stage": self.stage})
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        import mlflow

        self._sigterm.__exit__(None, None, None)
        status = status_for(error)
        try:
            if error is not None:
                mlflow.set_tag("error", f"{type(error).__name__}: {error}"[:_PARAM_CHARS])
        finally:
            mlflow.end_run(status=status)

    @property
    def uri(self) -> str:
        return tracking_uri(self.root or project_root())

    def _check_resumable(self, run_id: str) -> None:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        try:
            MlflowClient().get_run(run_id)
        except MlflowException as err:
            raise RunStateError(
                f"MLflow run {run_id} (from the train stage) is not in {self.uri}; re-run training with `dvc repro -f train`"
            ) from err

    def log_params(self, flat: dict[str, Any]) -> None:
        """Every param under its dotted name; MLflow stores values as text."""
        import mlflow

        mlflow.log_params({key: json.dumps(value) if isinstance(value, (list, dict)) else value for key, value in flat.items()})

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        import mlflow

        mlflow.log_metrics({key: float(value) for key, value in metrics.items()}, step=step)

    def set_tags(self, tags: dict[str, Any]) -> None:
        import mlflow

        mlflow.set_tags({key: str(value) for key, value in tags.items()})

    def log_provenance(self, record: dict[str, Any], packages: list[str]) -> None:
        """`provenance.json`, the package list and the git diff as artifacts; scalars as `prov.*` tags."""
        import mlflow

        mlflow.log_dict(record, "provenance/provenance.json")
        mlflow.log_text("\n".join(packages) + "\n", "provenance/packages.txt")
        git = record.get("git", {})
        if git.get("diff"):
            mlflow.log_text(git["diff"], "provenance/uncommitted.diff")
        tags = to_tags(record)
        tags["mlflow.source.git.commit"] = git.get("commit", "")
        if git.get("branch"):
            tags["mlflow.source.git.branch"] = git["branch"]
        dvc = record.get("dvc", {})
        if os.environ.get(DVC_EXP_NAME):
            tags["dvc.exp_name"] = os.environ[DVC_EXP_NAME]
        if os.environ.get(DVC_EXP_BASELINE_REV):
            tags["dvc.baseline_rev"] = os.environ[DVC_EXP_BASELINE_REV]
        tags["prov.dvc.experiment"] = dvc.get("experiment") or ""
        self.set_tags(tags)

    def log_dataset(self, manifest: dict[str, Any], x: Any, y: Any, location: Path, context: str) -> None:
        """The data as an MLflow dataset input whose digest is the full-content SHA-256 (truncated to fit)."""
        import mlflow
        with warnings.catch_warnings():
            # MLflow registers two identical resolvers for local paths and warns that it picked one of them.
            warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
            dataset = mlflow.data.from_numpy(x, targets=y, source=location.resolve().as_uri(), name=manifest["source"],
                                             digest=manifest["content_sha256"][:DATASET_DIGEST_CHARS])
        mlflow.log_input(dataset, context=context, tags={"content_sha256": manifest["content_sha256"]})
        mlflow.log_dict(manifest, "data/manifest.json")

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        import mlflow

        mlflow.log_artifact(str(path), artifact_path)

    def log_figure(self, figure: Any, name: str) -> None:
        import mlflow

        mlflow.log_figure(figure, name)

    def log_json(self, data: Any, name: str) -> None:
        import mlflow

        mlflow.log_dict(data, name)

    def log_keras_model(self, model: Any, example: Any) -> None:
        """The trained model as an MLflow model (Keras flavour) with its signature and the packages it needs."""
        import mlflow
        import numpy as np

        signature = mlflow.models.infer_signature(example, np.asarray(model(example, training=False)))
        mlflow.tensorflow.log_model(model, name="model", signature=signature,
                                    pip_requirements=[f"tensorflow=={_version('tensorflow')}", f"keras=={_version('keras')}"])


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return metadata.version(f"{name}-cpu")
