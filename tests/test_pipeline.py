"""End to end: real `dvc repro` and `dvc exp run` in a fresh git + DVC repo, read back through MLflow's API."""

import json
from pathlib import Path

import pytest

from conftest import client_for, project_env, run, runs_of

pytestmark = pytest.mark.slow

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "AKIAPLANTEDsecretValue0000000000000001",
    "MLFLOW_TRACKING_PASSWORD": "planted-mlflow-password-4242",
    "GITHUB_TOKEN": "ghp_plantedGithubToken0123456789abcdef",
    "TF_PLANTED_TOKEN": "tf-prefixed-planted-secret-9999",
    "TF_PLANTED_OPAQUE": "Qm9ndXNPcGFxdWVUb2tlblBsYW50ZWQxMjM0NTY3",
}
REMOTE_TOKEN = "remoteUrlPlantedToken7777"


@pytest.mark.format
def test_dvc_repro_logs_a_finished_run_with_full_provenance(project: Path):
    run(["git", "remote", "add", "origin", f"https://alice:{REMOTE_TOKEN}@example.com/team/repo.git"], project)
    (project / "notes.py").write_text('password = "diffPlantedPassword31337"\n')
    run(["git", "add", "notes.py"], project)
    env = project_env(**SECRETS)
    first = run(["dvc", "repro", "evaluate"], project, env=env)
    assert "test accuracy" in first.stdout

    runs = runs_of(project)
    assert len(runs) == 1
    found = runs[0]
    assert found.info.status == "FINISHED"
    params = found.data.params
    assert params["train.learning_rate"] == "0.001" and params["model.filters"] == "[4, 4, 4]"
    assert params["seeds.dropout"] == "null" and params["determinism.op_determinism"] == "true"
    metrics = found.data.metrics
    eval_json = json.loads((project / "metrics/eval.json").read_text())
    assert metrics["test_accuracy"] == pytest.approx(eval_json["test_accuracy"])
    assert {"test_loss", "test_accuracy_class_0", "final_loss", "epoch_loss"} <= set(metrics)
    history = client_for(project).get_metric_history(found.info.run_id, "epoch_loss")
    assert [m.step for m in history] == [0, 1]

    tags = found.data.tags
    manifest = json.loads((project / "data/prepared/manifest.json").read_text())
    train_json = json.loads((project / "metrics/train.json").read_text())
    assert tags["prov.weights_sha256"] == train_json["weights_sha256"]
    assert tags["mlflow.source.git.commit"] == tags["prov.git.commit"] and len(tags["prov.git.commit"]) == 40
    assert tags["prov.git.dirty"] == "true"
    assert tags["prov.determinism.effective.op_determinism"] == "true"
    assert tags["prov.determinism.requested.onednn"] == "false"
    assert tags["prov.determinism.effective.intra_op_threads"] == "1"
    assert int(tags["prov.seeds.dropout"]) >= 0 and tags["prov.seeds.base"] == "42"
    assert tags["prov.software.versions.tensorflow-cpu"] and tags["prov.software.versions.keras"].startswith("3.")
    assert "prov.software.tensorflow_build.cuda_version" in tags
    assert tags["prov.cpu.numeric_flags.avx2"] in ("true", "false") and tags["prov.cpu.logical_cores"]
    assert tags["prov.gpu.count"] == "0" and tags["prov.gpu.note"].startswith("no GPU")
    assert tags["prov.git.remotes.origin"] == "https://example.com/team/repo.git"
    assert tags["prov.dvc.deps.train.data/prepared"]
    assert tags["prov.environment.PYTHONHASHSEED"] == tags["prov.seeds.hash"]

    client = client_for(project)
    inputs = found.inputs.dataset_inputs
    assert {i.dataset.digest for i in inputs} == {manifest["content_sha256"][:32]}
    artifacts = {a.path for a in client.list_artifacts(found.info.run_id, "provenance")}
    assert artifacts == {"provenance/provenance.json", "provenance/packages.txt", "provenance/uncommitted.diff"}
    record = json.loads(Path(client.download_artifacts(found.info.run_id, "provenance/provenance.json")).read_text())
    assert record["seeds"]["init"] == int(tags["prov.seeds.init"])
    assert "redacted" in record["git"]["diff"]
    top = {a.path for a in client.list_artifacts(found.info.run_id)}
    assert {"data", "evaluation", "plots"} <= top
    logged_models = client.search_logged_models([found.info.experiment_id])
    assert [m.source_run_id for m in logged_models] == [found.info.run_id]

    leaked = [
        (secret, str(path))
        for path in project.rglob("*") if path.is_file() and ".git" not in path.parts
        for secret in [*SECRETS.values(), REMOTE_TOKEN, "diffPlantedPassword31337"]
        if secret.encode() in path.read_bytes() and path.name != "notes.py"
    ]
    assert leaked == []

    shown = run(["dvc", "metrics", "show", "--json"], project).stdout
    assert "test_accuracy" in shown
    run(["dvc", "plots", "show", "-o", str(project / "plots_html")], project)

    run(["dvc", "repro", "-f", "train", "evaluate"], project)
    runs = runs_of(project)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    hashes = {r.data.tags["prov.weights_sha256"] for r in runs}
    assert len(hashes) == 1, "op determinism on: two runs with the same params must give bit-identical weights"


def test_dvc_exp_run_set_param_is_tracked(project: Path):
    run(["dvc", "exp", "run", "evaluate", "-S", "train.learning_rate=0.01", "-n", "lr-up"], project)
    shown = json.loads(run(["dvc", "exp", "show", "--json"], project).stdout)
    assert "lr-up" in json.dumps(shown)
    found = runs_of(project)
    assert len(found) == 1
    tags, params = found[0].data.tags, found[0].data.params
    assert params["train.learning_rate"] == "0.01"
    assert tags["dvc.exp_name"] == "lr-up" and tags["prov.dvc.experiment"] == "lr-up"
    assert len(tags["dvc.baseline_rev"]) == 40
    assert found[0].info.run_name == "lr-up" and found[0].info.status == "FINISHED"
