"""End to end: real `dvc repro` and `dvc exp run` in a fresh git + DVC repo, read back through MLflow's API."""

import json
import re
import subprocess
import sys
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
    "KERAS_PLANTED_ARGS": "--verbose --hub ghp_plantedAmongWords0123456789",
    "CUDA_PLANTED_MIRROR": "https://carolPlantedUser:cudaUrlPlanted8888@mirror.example.com/cuda",
}
ENV_SECRETS = [
    "AKIAPLANTEDsecretValue0000000000000001",
    "planted-mlflow-password-4242",
    "ghp_plantedGithubToken0123456789abcdef",
    "tf-prefixed-planted-secret-9999",
    "Qm9ndXNPcGFxdWVUb2tlblBsYW50ZWQxMjM0NTY3",
    "ghp_plantedAmongWords0123456789",
    "carolPlantedUser",
    "cudaUrlPlanted8888",
]
REMOTES = {
    "origin": (
        "https://alice:remoteUrlPlantedToken7777@example.com/team/repo.git",
        "https://example.com/team/repo.git",
    ),
    "upstream": ("https://ghp_remoteOnlyToken0123456789ab@example.com/up/repo.git", "https://example.com/up/repo.git"),
    "mirror": (
        "ssh://deployPlantedUser:sshUrlPlanted6666@git.example.com:2222/team/repo.git",
        "ssh://git.example.com:2222/team/repo.git",
    ),
}
REMOTE_SECRETS = [
    "remoteUrlPlantedToken7777",
    "ghp_remoteOnlyToken0123456789ab",
    "deployPlantedUser",
    "sshUrlPlanted6666",
]
SETTINGS = Path("config/deploy/settings.yaml")
DIFF_SECRETS = [
    "diffPlantedPassword31337",
    "committedPlantedSecret",
    "oldPlantedKey",
    "newPlantedKey",
    "diffUrlPlanted4242",
    "ghp_diffPlantedToken0123456789",
]
ALL_SECRETS = [*ENV_SECRETS, *REMOTE_SECRETS, *DIFF_SECRETS]


def plant_repository_secrets(project: Path) -> None:
    """Credentials in three remote URLs, and secrets in the uncommitted diff: a new file, and a deeper committed
    file whose change sits next to a committed secret (a context line) and adds a URL and a bare token."""
    for name, (url, _) in REMOTES.items():
        run(["git", "remote", "add", name, url], project)
    (project / SETTINGS).parent.mkdir(parents=True)
    (project / SETTINGS).write_text("db_password: committedPlantedSecret\napi_key: oldPlantedKey\nretries: 3\n")
    run(["git", "add", str(SETTINGS)], project)
    run(["git", "commit", "-qm", "settings"], project)
    (project / SETTINGS).write_text(
        "db_password: committedPlantedSecret\napi_key: newPlantedKey\nretries: 3\n"
        "database_url: postgresql://admin:diffUrlPlanted4242@db.internal/app\n"
        "header: Bearer ghp_diffPlantedToken0123456789\n"
    )
    (project / "notes.py").write_text('password = "diffPlantedPassword31337"\n')
    run(["git", "add", "notes.py"], project)


def leaks(project: Path, planted: set[Path]) -> list[tuple[str, str]]:
    """(secret, file) for every planted secret in any file under `project` but .git and `planted`.

    grep reads the files in its own process: opening and closing the SQLite store here would drop this
    process's POSIX locks on it while MLflow's connections are open, and corrupt what they read next.
    """
    patterns = project.parent / "secrets.txt"
    patterns.write_text("\n".join(ALL_SECRETS) + "\n")
    done = subprocess.run(
        ["grep", "-rHoaF", "--exclude-dir=.git", "-f", str(patterns), str(project)],
        capture_output=True,
        text=True,
        errors="replace",
    )
    assert done.returncode in (0, 1), done.stderr
    found = {tuple(reversed(line.rsplit(":", 1))) for line in done.stdout.splitlines()}
    return sorted((secret, path) for secret, path in found if Path(path) not in planted)


@pytest.mark.format
def test_dvc_repro_logs_a_finished_run_with_full_provenance(project: Path):
    plant_repository_secrets(project)
    env = project_env(**SECRETS)
    first = run(["dvc", "repro", "evaluate"], project, env=env)
    assert "test accuracy" in first.stdout
    starts = re.findall(
        r"^stage start: (.+) reached ([0-9.]+) s after the process started \((.+)\)$", first.stderr, re.M
    )
    assert [(found[0], "importing TensorFlow and Keras" in found[2]) for found in starts] == [
        ("imports", False),
        ("first step", True),
        ("TensorFlow", True),
    ], first.stderr  # prepare, train, evaluate: each says what it paid before its work
    warned = re.search(r"warning: (\d+) line\(s\) of the uncommitted diff hold secret-looking values", first.stderr)
    assert warned, first.stderr

    runs = runs_of(project)
    assert len(runs) == 1
    found = runs[0]
    assert found.info.status == "FINISHED"
    params = found.data.params
    assert params["train.learning_rate"] == "0.001" and params["model.kwargs.filters"] == "[4, 4, 4]"
    assert params["seeds.dropout"] == "null" and params["determinism.op_determinism"] == "true"
    metrics = found.data.metrics
    eval_json = json.loads((project / "metrics/eval.json").read_text())
    assert metrics["test_accuracy"] == pytest.approx(eval_json["test_accuracy"])
    assert {"test_loss", "test_accuracy_class_0", "final_loss", "epoch_loss"} <= set(metrics)
    history = client_for(project).get_metric_history(found.info.run_id, "epoch_loss")
    assert [m.step for m in history] == [0, 1]
    # compute.system_metrics is on by default, and MLflow's lines about it stay out of the stages' output.
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= set(metrics)
    assert "system metrics" not in first.stderr and "GPU metrics" not in first.stderr
    # No TensorFlow C++ error line either: Keras's parallel map over arrays, rewritten under op determinism, logs one.
    assert " NodeDef " not in first.stderr and not re.search(r"^E\d{4} ", first.stderr, re.M), first.stderr

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
    assert tags["prov.cpu.id"].startswith(("GenuineIntel family", "AuthenticAMD family")) and tags["prov.cpu.cache.l1d"]
    assert tags["prov.gpu.count"] == "0" and tags["prov.gpu.note"].startswith("no GPU")
    assert {name: tags[f"prov.git.remotes.{name}"] for name in REMOTES} == {
        name: clean for name, (_, clean) in REMOTES.items()
    }
    assert tags["prov.git.diff_redacted_lines"] == warned[1] == "6"
    assert tags["prov.dvc.deps.train.data/prepared"]
    assert tags["prov.environment.PYTHONHASHSEED"] == tags["prov.seeds.hash"]

    client = client_for(project)
    inputs = found.inputs.dataset_inputs
    assert {i.dataset.digest for i in inputs} == {manifest["content_sha256"][:32]}
    artifacts = {a.path for a in client.list_artifacts(found.info.run_id, "provenance")}
    assert artifacts == {"provenance/provenance.json", "provenance/packages.txt", "provenance/uncommitted.diff"}
    record = json.loads(Path(client.download_artifacts(found.info.run_id, "provenance/provenance.json")).read_text())
    assert record["seeds"]["init"] == int(tags["prov.seeds.init"])
    assert "redacted" in record["git"]["diff"] and "retries: 3" in record["git"]["diff"]
    assert "config/deploy/settings.yaml" in record["git"]["diff"] and "notes.py" in record["git"]["diff"]
    top = {a.path for a in client.list_artifacts(found.info.run_id)}
    assert {"data", "evaluation", "plots"} <= top
    logged_models = client.search_logged_models([found.info.experiment_id])
    assert [m.source_run_id for m in logged_models] == [found.info.run_id]

    provenance = run([sys.executable, "-m", "tracking", "provenance"], project, env=env)
    assert json.loads(provenance.stdout)["environment"]["TF_PLANTED_OPAQUE"] == "<redacted>"
    assert [s for s in ALL_SECRETS if s in provenance.stdout + provenance.stderr + first.stdout + first.stderr] == []
    planted = {project / SETTINGS, project / "notes.py"}
    scanned = {path.relative_to(project).parts[0] for path in project.rglob("*") if path.is_file()}
    assert {"mlflow.db", "mlartifacts", "dvc.lock", ".dvc", "outputs", "metrics", "data"} <= scanned
    assert leaks(project, planted) == []
    in_worktree = set(DIFF_SECRETS) - {"oldPlantedKey"}  # the old value lives only in git's history now
    assert {secret for secret, _ in leaks(project, set())} == in_worktree, "the scan finds what was planted"

    shown = run(["dvc", "metrics", "show", "--json"], project).stdout
    assert "test_accuracy" in shown
    run(["dvc", "plots", "show", "-o", str(project / "plots_html")], project)

    run(["dvc", "repro", "-f", "train", "evaluate"], project)
    runs = runs_of(project)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    hashes = {r.data.tags["prov.weights_sha256"] for r in runs}
    assert len(hashes) == 1, "op determinism on: two runs with the same params must give bit-identical weights"
