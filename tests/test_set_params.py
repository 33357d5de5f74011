"""Values typed after `dvc exp run -S` mean to the stages exactly what they mean to DVC.

DVC parses `-S key=value` with Hydra's override grammar, writes params.yaml with ruamel.yaml (YAML 1.2) and
reads it back the same way for `dvc params diff` and `dvc exp show`. The stages must read the same value and
type, and MLflow must log it spelled as DVC shows it; a value the schema rejects is named as DVC read it.
"""

import json
from pathlib import Path

import pytest
from conftest import TINY, client_for, make_project, run, write_params

from tracking.config.params_file import load_params
from tracking.yaml_text import flatten

pytestmark = pytest.mark.slow

# key, as typed after -S, the value DVC (and so every stage) reads
ACCEPTED = [
    ("train.learning_rate", "1e-5", 1e-05),
    ("compare.known_bands.test_accuracy.mean", "1E+3", 1000.0),
    ("compare.alpha", ".5", 0.5),
    ("model.kwargs.dropout", "-0.0", -0.0),
    ("seeds.init", "1_000", 1000),
    ("model.kwargs.batch_norm", "true", True),
    ("data.sha256", "null", None),
    ("model.kwargs.filters", "[1, 2, 3]", [1, 2, 3]),
    ("mlflow.experiment", '"1e-5"', "1e-5"),
    ("compute.system_metrics", "false", False),
]
# key, as typed after -S, the stage's one-line error (the value as DVC read it)
REJECTED = [
    ("train.learning_rate", "-0.0", "train.learning_rate: expected greater than 0, got -0.0"),
    ("train.epochs", "null", "train.epochs: expected a valid integer, got None"),
    ("train.epochs", '"2"', "train.epochs: expected a valid integer, got '2'"),
    ("data.task", "yes", "data.task: expected 'classification', 'regression' or 'multilabel', got 'yes'"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("set-params") / "project")
    # -S sets keys params.yaml has (Hydra's rule; a new key needs `+`): a declared band, and batch_norm as in
    # the default params.yaml's model.kwargs
    write_params(
        root,
        compare={"known_bands": {"test_accuracy": {"mean": 0.95, "std": 0.004, "n": 10}}},
        model={"kwargs": {**TINY["model"]["kwargs"], "batch_norm": False}},
    )
    run(["git", "commit", "-qam", "a declared band and batch_norm, to set nested keys"], root)
    return root


def spelled(value) -> str:
    """JSON, so that 1000 and 1000.0, true and 1, -0.0 and 0.0 stay apart."""
    return json.dumps(value)


def test_accepted_values_reach_the_stage_and_mlflow_as_dvc_reads_them(project: Path):
    settings = [arg for key, typed, _ in ACCEPTED for arg in ("-S", f"{key}={typed}")]
    run(["dvc", "exp", "run", "-q", *settings, "-n", "typed", "train"], project)
    shown = json.loads(run(["dvc", "exp", "show", "--json"], project).stdout)
    [workspace] = [row for row in shown if row["rev"] == "workspace"]
    dvc_read = flatten(workspace["data"]["params"]["params.yaml"]["data"])
    stage_read = load_params(project / "params.yaml").flat()
    client = client_for(project)
    [logged] = client.search_runs([client.get_experiment_by_name("1e-5").experiment_id])
    for key, typed, expected in ACCEPTED:
        logged_value = logged.data.params[key]
        seen = (
            spelled(dvc_read[key]),
            spelled(stage_read[key]),
            spelled(logged_value if isinstance(expected, str) else json.loads(logged_value)),
        )
        assert seen == (spelled(expected),) * 3, f"-S {key}={typed}: DVC, stage, MLflow read {seen}"
    assert logged.data.params["train.learning_rate"] == "1e-05"
    # The experiment's name, as `dvc exp show` lists it, names the MLflow run and is tagged with its baseline.
    assert "typed" in json.dumps(shown)
    tags = logged.data.tags
    assert tags["dvc.exp_name"] == "typed" and tags["prov.dvc.experiment"] == "typed"
    assert len(tags["dvc.baseline_rev"]) == 40
    assert logged.info.run_name == "typed" and logged.info.status == "FINISHED"
    # `compute` is no stage's param: the run has no system metrics, and turning them on again changes no stage.
    assert not [key for key in logged.data.metrics if key.startswith("system/")]
    write_params(project, compute={"system_metrics": True})
    assert json.loads(run(["dvc", "status", "--json", "train"], project).stdout) == {}


@pytest.mark.parametrize(("key", "typed", "message"), REJECTED, ids=[f"{key}={typed}" for key, typed, _ in REJECTED])
def test_rejected_values_are_named_as_dvc_read_them(project: Path, key: str, typed: str, message: str):
    try:
        done = run(["dvc", "exp", "run", "-f", "-S", f"{key}={typed}", "prepare"], project, check=False)
    finally:
        run(["git", "checkout", "--", "params.yaml"], project)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert line == f"error: params.yaml: {message}; fix it in params.yaml", line
