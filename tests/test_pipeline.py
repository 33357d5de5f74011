"""End to end: real `dvc repro` and `dvc exp run` in a fresh git + DVC repo, read back through MLflow's API."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import README, client_for, project_env, recorded, run, runs_of, write_params
from test_redaction import CATALOGUE, CATALOGUE_SECRETS, TOKENS

pytestmark = pytest.mark.slow


def readme_tag_sample() -> tuple[int, list[str]]:
    """The README's count of a run's `prov.*` tags ("a few of the N that the run ... logged") and the tag names
    of its sample block below."""
    text = README.read_text()
    count = re.search(r"a few of the (\d+)\s+that the run", text)
    assert count, "the README no longer says how many prov.* tags a run has"
    block = text[count.end() :].split("```")[1]
    return int(count[1]), [line.split(" = ")[0] for line in block.strip().splitlines()]


SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "AKIAPLANTEDsecretValue0000000000000001",
    "MLFLOW_TRACKING_PASSWORD": "planted-mlflow-password-4242",
    "GITHUB_TOKEN": "ghp_plantedGithubToken0123456789abcdef",
    "TF_CPP_PLANTED_TOKEN": "tf-prefixed-planted-secret-9999",
    "TF_XLA_PLANTED_OPAQUE": "Qm9ndXNPcGFxdWVUb2tlblBsYW50ZWQxMjM0NTY3",
    "TF_ENCRYPTION": 'key_provider "pbkdf2" "mine" { passphrase = "tofuPlantedPassphrase77" }',  # OpenTofu's
    "KERAS_PLANTED_ARGS": "--verbose --hub ghp_plantedAmongWords0123456789",
    "CUDA_PLANTED_MIRROR": "https://carolPlantedUser:cudaUrlPlanted8888@mirror.example.com/cuda",
    "DVC_EXP_NOTE": "tried with token hunter2Note49 from alice",  # free text in DVC's prefix: not recorded
    "KERAS_HUB_URL": "https://hub.example.com/models?key=keyInQueryPlanted4242&page=2",
    "KERAS_SESSION": "Sess3Kq9Xw2Rt7Yp4Lm8Planted",  # a random token in a credential's position
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
    "tofuPlantedPassphrase77",
    "hunter2Note49",
    "keyInQueryPlanted4242",
    "Sess3Kq9Xw2Rt7Yp4Lm8Planted",
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
    "MIIEplantedPemBody0123",
    "kagglePlantedJsonKey0123456789ab",
    "netrcPlantedPassword55",
]
# A team's loader given its connection settings in params.yaml (data.kwargs), committed, each credential by
# reference (`env:NAME`, tracking/config/references.py): params.yaml, dvc.lock and MLflow hold the references only.
REFERENCED = {
    "TEAM_DSN": "postgresql://loader:paramPlantedDbPw@db.internal/ml",
    "TEAM_API_TOKEN": "xoxp-123456789012-paramPlantedSlack",
    "TEAM_AUTHORIZATION": "Bearer paramPlantedBearer0123456789",
    "TEAM_KAGGLE_KEY": "plainPlantedKaggleKey",
    "TEAM_DB_PW": "plainPlantedDbPw",
}
PARAM_SECRETS = [
    "paramPlantedDbPw",
    "xoxp-123456789012-paramPlantedSlack",
    "paramPlantedBearer0123456789",
    "plainPlantedKaggleKey",
    "plainPlantedDbPw",
]
LOADER_KWARGS = {
    "dsn": "env:TEAM_DSN",
    "api_token": "env:TEAM_API_TOKEN",
    "headers": {"Authorization": "env:TEAM_AUTHORIZATION", "Accept": "text/csv"},
    "kaggle_key": "env:TEAM_KAGGLE_KEY",
    "db_pw": "env:TEAM_DB_PW",
}
LOADER = """def load(dsn, api_token, headers, kaggle_key, db_pw):
    from sklearn.datasets import load_digits

    digits = load_digits()
    return {"x": (digits.images / 16.0).astype("float32")[..., None], "y": digits.target}
"""
# Tokens in file names: an untracked file, a staged one, and one `dvc add`-ed (its .dvc file and .gitignore
# entry hold the name as content).
NAME_SECRETS = {
    "untracked": "ghp_namePlantedUntracked0123456789",
    "staged": "AIzaSyNamePlantedStaged0123456789abcdef",
    "dvc add": "glpat-namePlantedDvcAdded012345",
}
# The catalogue of tests/test_redaction.py, planted in the uncommitted code (a changed tracked file, a new staged
# one, an untracked one), in allow-listed environment variables, in untracked files' names (each token that can
# name a file); with a branch and a DVC experiment named by tokens, and per-place tokens of their own.
BRANCH_SECRET = "ghp_branchPlantedToken0123456789ab"
EXPERIMENT_SECRET = "glpat-experimentPlanted0123456789"
OWN_PER_PLACE = {
    place: [f"ghp_{place}Planted{index:02d}x0123456789" for index in range(8)]
    for place in ("tracked", "staged", "untracked", "environment", "filename")
}
# Untracked files where credentials live (issue 64): a snapshot holds none of them, so neither `git push --mirror`,
# `dvc push` nor the store sends any.
UNTRACKED_SECRET_FILES = {
    ".env": "API_TOKEN=envFilePlanted0123\n",
    "pip.conf": "[global]\nindex-url = https://u:pipConfPlanted0123@pypi.example.com/simple\n",
    "uv.toml": '[[index]]\nurl = "https://u:uvTomlPlanted0123@pypi.example.com/simple"\n',
    ".aws/credentials": "[default]\naws_secret_access_key = awsCredsPlanted0123\n",
    "gcp-key.json": '{"type": "service_account", "private_key_id": "gcpKeyPlanted0123"}\n',
    ".kube/config": "users:\n- name: u\n  user:\n    token: kubePlanted0123\n",
    ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\nsshKeyPlanted0123\n-----END OPENSSH PRIVATE KEY-----\n",
    "scratch.ipynb": '{"cells": [{"source": ["token = \\"notebookPlanted0123\\""]}]}\n',
    ".config/gh/hosts.yml": "github.com:\n    oauth_token: ghHostsPlanted0123\n",
    ".npmrc": "//registry.example.com/:_authToken=npmrcPlanted0123\n",
    ".pypirc": "[pypi]\nusername = __token__\npassword = pypircPlanted0123\n",
    ".docker/config.json": '{"auths": {"registry.example.com": {"auth": "dockerPlanted0123"}}}\n',
    ".git-credentials": "https://u:gitCredsPlanted0123@git.example.com\n",
    ".pgpass": "db.example.com:5432:*:u:pgpassPlanted0123\n",
    "terraform.tfvars": 'api_key = "tfvarsPlanted0123"\n',
    ".databrickscfg": "[DEFAULT]\nhost = https://x.example.com\ntoken = databricksPlanted0123\n",
    ".kaggle/kaggle.json": '{"username": "u", "key": "kagglePlanted0123"}\n',
    ".s3cfg": "[default]\nsecret_key = s3cfgPlanted0123\n",
    ".boto": "[Credentials]\naws_secret_access_key = botoPlanted0123\n",
    ".envrc": "export WANDB_API_KEY=envrcPlanted0123\n",
    ".env.local": "MLFLOW_TRACKING_PASSWORD=envLocalPlanted0123\n",
    ".mlflow/credentials": "[mlflow]\nmlflow_tracking_password = mlflowCredsPlanted0123\n",
    "secrets.yaml": "db_password: secretsYamlPlanted0123\n",
    ".vault-token": "vaultTokenPlanted0123\n",
}
UNTRACKED_FILE_SECRETS = [
    "envFilePlanted0123",
    "pipConfPlanted0123",
    "uvTomlPlanted0123",
    "awsCredsPlanted0123",
    "gcpKeyPlanted0123",
    "kubePlanted0123",
    "sshKeyPlanted0123",
    "notebookPlanted0123",
    "ghHostsPlanted0123",
    "npmrcPlanted0123",
    "pypircPlanted0123",
    "dockerPlanted0123",
    "gitCredsPlanted0123",
    "pgpassPlanted0123",
    "tfvarsPlanted0123",
    "databricksPlanted0123",
    "kagglePlanted0123",
    "s3cfgPlanted0123",
    "botoPlanted0123",
    "envrcPlanted0123",
    "envLocalPlanted0123",
    "mlflowCredsPlanted0123",
    "secretsYamlPlanted0123",
    "vaultTokenPlanted0123",
]
ALL_SECRETS = [
    *UNTRACKED_FILE_SECRETS,
    *ENV_SECRETS,
    *REMOTE_SECRETS,
    *DIFF_SECRETS,
    *PARAM_SECRETS,
    *NAME_SECRETS.values(),
    *CATALOGUE_SECRETS,
    BRANCH_SECRET,
    EXPERIMENT_SECRET,
    *(token for tokens in OWN_PER_PLACE.values() for token in tokens),
]
CATALOGUE_FILES = ("catalogue/tracked.py", "catalogue/staged.py", "catalogue/untracked.txt")


def catalogue_environment() -> dict[str, str]:
    """Each catalogue form, and this place's own tokens, in an allow-listed variable (KERAS_*, TF_CPP_*, CUDA_*)."""
    values = [*CATALOGUE.values(), *OWN_PER_PLACE["environment"]]
    prefixes = ("KERAS_PLANTED_", "TF_CPP_PLANTED_", "CUDA_PLANTED_")
    return {f"{prefixes[index % 3]}{index}": value for index, value in enumerate(values)}


def plant_catalogue(project: Path) -> list[Path]:
    """The catalogue in the code (committed then changed, staged, untracked) and in untracked files' names, on a
    branch named by a token; return the files that hold it by design."""
    lines = [f"FORM_{index} = {text!r}\n" for index, text in enumerate(CATALOGUE.values())]
    tracked, staged, untracked = (project / name for name in CATALOGUE_FILES)
    tracked.parent.mkdir()
    tracked.write_text("RATE = 0.1\n")
    run(["git", "add", str(tracked)], project)
    run(["git", "commit", "-qm", "catalogue", "--", str(tracked)], project)  # only it: the rest stays staged

    def own(place: str) -> list[str]:
        return [f"OWN_{index} = {token!r}\n" for index, token in enumerate(OWN_PER_PLACE[place])]

    tracked.write_text("RATE = 0.1\n" + "".join(lines + own("tracked")))
    staged.write_text("".join(lines + own("staged")))
    run(["git", "add", str(staged)], project)
    untracked.write_text("".join(lines + own("untracked")))
    named = [token for token in TOKENS.values() if "/" not in token] + OWN_PER_PLACE["filename"]
    for token in named:
        (project / "catalogue" / f"{token}.txt").write_text("x\n")
    run(["git", "checkout", "-q", "-b", f"feature/{BRANCH_SECRET}"], project)
    return [tracked, staged, untracked, *(project / "catalogue" / f"{token}.txt" for token in named)]


def plant_param_secrets(project: Path) -> None:
    """The committed loader and its secret-bearing data.kwargs (data.source null)."""
    (project / "team_data.py").write_text(LOADER)
    write_params(project, data={"source": None, "loader": "team_data:load", "kwargs": LOADER_KWARGS})
    dvc_yaml = project / "dvc.yaml"
    dvc_yaml.write_text(
        dvc_yaml.read_text().replace("      - data/raw\n", "      - data/raw\n      - team_data.py\n", 1)
    )
    run(["git", "add", "team_data.py", "params.yaml", "dvc.yaml"], project)
    run(["git", "commit", "-qm", "a team's loader"], project)


def plant_untracked_secret_files(project: Path) -> list[Path]:
    """The files of UNTRACKED_SECRET_FILES, untracked and not ignored; return their paths."""
    for name, text in UNTRACKED_SECRET_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    return [project / name for name in UNTRACKED_SECRET_FILES]


def sent_by_pushes(project: Path) -> bytes:
    """Every byte `git push --mirror` to a bare repository and `dvc push` to a local remote send: the bare
    repository's objects and refs, the remote's files."""
    bare, remote = project.parent / "mirror.git", project.parent / "dvc-remote"
    run(["git", "init", "-q", "--bare", str(bare)], project.parent)
    run(["git", "push", "-q", "--mirror", str(bare)], project)
    run(["dvc", "remote", "add", "--local", "-d", "pushed", str(remote)], project)
    run(["dvc", "push", "-q"], project)
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=bare, capture_output=True)
    refs = run(["git", "for-each-ref"], bare).stdout.encode()
    files = b"".join(path.read_bytes() for path in remote.rglob("*") if path.is_file())
    assert files and b"refs/tracking/snapshots/" in refs, "both pushes sent something, our snapshot ref among it"
    return objects.stdout + refs + files


def plant_name_secrets(project: Path) -> None:
    (project / f"{NAME_SECRETS['untracked']}.csv").write_text("a\n")
    (project / f"{NAME_SECRETS['staged']}.py").write_text("b = 1\n")
    run(["git", "add", f"{NAME_SECRETS['staged']}.py"], project)
    (project / "data/raw" / f"{NAME_SECRETS['dvc add']}.csv").write_text("c\n")
    run(["dvc", "add", f"data/raw/{NAME_SECRETS['dvc add']}.csv"], project)


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
    # A service-account key file (its PEM key on one line) sorted before every other file of the diff, which it
    # must not take with it; a Kaggle API file and a .netrc.
    pem = "-----BEGIN PRIVATE KEY-----\\nMIIEplantedPemBody0123\\n-----END PRIVATE KEY-----\\n"
    (project / "a_service.json").write_text(f'{{"type": "service_account", "private_key": "{pem}"}}\n')
    (project / "kaggle.json").write_text('{"username":"team","key":"kagglePlantedJsonKey0123456789ab"}\n')
    (project / ".netrc").write_text("machine api.example.com login team password netrcPlantedPassword55\n")
    run(["git", "add", "notes.py", "a_service.json", "kaggle.json", ".netrc"], project)


def leaks(project: Path, planted: set[Path]) -> list[tuple[str, str]]:
    """(secret, file) for every planted secret in any file under `project` but .git and `planted`.

    grep reads the files in its own process: opening and closing the SQLite store here would drop this
    process's POSIX locks on it while MLflow's connections are open, and corrupt what they read next.
    """
    patterns = project.parent / "secrets.txt"
    patterns.write_text("\n".join(ALL_SECRETS) + "\n")
    done = subprocess.run(
        ["grep", "-rHoaFZ", "--exclude-dir=.git", "-f", str(patterns), str(project)],
        capture_output=True,
        text=True,
        errors="replace",
    )
    assert done.returncode in (0, 1), done.stderr
    found = {tuple(reversed(line.split("\0", 1))) for line in done.stdout.splitlines()}  # a secret may hold ":"
    return sorted((secret, path) for secret, path in found if Path(path) not in planted)


@pytest.mark.format
def test_dvc_repro_logs_a_finished_run_with_full_provenance(project: Path):
    plant_param_secrets(project)
    plant_repository_secrets(project)
    plant_name_secrets(project)
    catalogue_files = plant_catalogue(project)
    untracked_files = plant_untracked_secret_files(project)
    env = project_env(**SECRETS, **REFERENCED, **catalogue_environment(), DVC_EXP_NAME=EXPERIMENT_SECRET)
    umask = os.umask(0o022)  # the common default: new files world-readable unless the product says otherwise
    try:
        first = run(["dvc", "repro", "evaluate"], project, env=env)
    finally:
        os.umask(umask)
    assert "test accuracy" in first.stdout
    starts = re.findall(r"^(\w+): started in ([0-9.]+) s \((.+)\)$", first.stderr, re.M)
    assert [(found[0], found[2].split(", ")[-1].rsplit(" ", 2)[0]) for found in starts] == [
        ("prepare", "imports"),
        ("train", "first step"),
        ("evaluate", "TensorFlow"),
    ], first.stderr  # prepare, train, evaluate: each says what it paid before its work
    for stage, _, parts in starts[1:]:  # the data's mapping named apart from the store's opening, before it
        named = [part.rsplit(" ", 2)[0] for part in parts.split(", ")]
        assert named.index("data") < named.index("MLflow store"), (stage, parts)

    runs = runs_of(project)
    assert len(runs) == 1
    found = runs[0]
    assert found.info.status == "FINISHED"
    params = found.data.params
    assert {key: params[key] for key in params if key.startswith("data.kwargs.")} == {
        "data.kwargs.dsn": "env:TEAM_DSN",
        "data.kwargs.api_token": "env:TEAM_API_TOKEN",
        "data.kwargs.headers.Authorization": "env:TEAM_AUTHORIZATION",
        "data.kwargs.headers.Accept": "text/csv",
        "data.kwargs.kaggle_key": "env:TEAM_KAGGLE_KEY",
        "data.kwargs.db_pw": "env:TEAM_DB_PW",
    }, "the references, as params.yaml has them: a rerun reads the environment again"
    assert params["data.loader"] == "team_data:load" and "tracking.redacted_params" not in found.data.tags
    assert "warning: param(s)" not in first.stderr
    # The store, its artifacts and the lock beside it: owner-only whatever the umask.
    # So are this checkout's links to its runs (.tracking/runs/), which name the store.
    stored = ("mlflow.db", "mlflow.db.lock", "mlartifacts", ".tracking", ".tracking/runs")
    modes = {name: oct((project / name).stat().st_mode & 0o777) for name in stored}
    assert modes == {
        "mlflow.db": "0o600",
        "mlflow.db.lock": "0o600",
        "mlartifacts": "0o700",
        ".tracking": "0o700",
        ".tracking/runs": "0o700",
    }
    assert [oct(path.stat().st_mode & 0o777) for path in project.glob("mlflow.db-*")] in ([], ["0o600"] * 2)
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

    tags = recorded(project, found.info.run_id)  # the tags and, read as diff reads it, the rest of the record
    tagged = [tag for tag in found.data.tags if tag.startswith("prov.")]  # issue 50: the searchable few as tags
    assert "prov.seeds.base" in tagged and "prov.os.system" not in tagged, tagged
    count, sample = readme_tag_sample()  # the README's count and sample are this run's
    assert len(tagged) == count and {tag for tag in sample if tag.startswith("prov.")} <= set(tagged), sorted(tagged)
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
    assert "prov.software.backend.cuda_version" in tags
    assert tags["prov.cpu.numeric_flags.avx2"] in ("true", "false") and tags["prov.cpu.logical_cores"]
    assert tags["prov.cpu.id"].startswith(("GenuineIntel family", "AuthenticAMD family")) and tags["prov.cpu.cache.l1d"]
    assert tags["prov.gpu.count"] == "0" and tags["prov.gpu.note"].startswith("no GPU")
    assert {name: tags[f"prov.git.remotes.{name}"] for name in REMOTES} == {
        name: clean for name, (_, clean) in REMOTES.items()
    }
    assert tags["mlflow.source.git.branch"] == tags["prov.git.branch"] == "feature/<redacted>"
    assert found.info.run_name == tags["dvc.exp_name"] == tags["prov.dvc.experiment"] == "<redacted>"
    snapshot = tags["prov.git.snapshot"]
    assert run(["git", "cat-file", "-t", snapshot], project).stdout.strip() == "commit"
    assert BRANCH_SECRET not in run(["git", "for-each-ref", "refs/tracking/"], project).stdout
    assert tags["prov.dvc.deps.train.data/prepared"]
    assert tags["prov.environment.PYTHONHASHSEED"] == tags["prov.seeds.hash"]

    client = client_for(project)
    inputs = found.inputs.dataset_inputs
    assert {i.dataset.digest for i in inputs} == {manifest["content_sha256"][:32]}
    artifacts = {a.path for a in client.list_artifacts(found.info.run_id, "provenance")}
    assert artifacts == {
        "provenance/provenance.json",
        "provenance/packages.txt",
        "provenance/dvc_deps.json",
    }, "the code stays in git"
    record = json.loads(Path(client.download_artifacts(found.info.run_id, "provenance/provenance.json")).read_text())
    assert record["seeds"]["init"] == int(tags["prov.seeds.init"])
    changed = [entry["path"] for entry in record["git"]["changed_files"]]
    assert {"config/deploy/settings.yaml", "notes.py", *CATALOGUE_FILES[:2]} <= set(changed), changed
    assert [path for path in changed if path.startswith("catalogue/")] == sorted(CATALOGUE_FILES[:2]), changed
    assert record["git"]["untracked_files"] >= len(catalogue_files) - 2, "untracked: counted, never in the snapshot"
    assert "TF_ENCRYPTION" not in record["environment"] and "TF_XLA_PLANTED_OPAQUE" in record["environment"]
    top = {a.path for a in client.list_artifacts(found.info.run_id)}
    assert {"data", "evaluation", "plots"} <= top
    logged_models = client.search_logged_models([found.info.experiment_id])
    assert [m.source_run_id for m in logged_models] == [found.info.run_id]

    provenance = run([sys.executable, "-m", "tracking", "provenance"], project, env=env)
    assert json.loads(provenance.stdout)["environment"]["TF_XLA_PLANTED_OPAQUE"] == "<redacted>"
    assert [s for s in ALL_SECRETS if s in provenance.stdout + provenance.stderr + first.stderr] == []
    dvc_names = {NAME_SECRETS["dvc add"]}  # DVC's own output names the file it tracks ("... didn't change")
    assert [s for s in set(ALL_SECRETS) - dvc_names if s in first.stdout] == []
    planted = {project / SETTINGS, project / "notes.py", project / "data/raw/.gitignore", *catalogue_files}
    planted |= set(untracked_files)
    planted |= {project / "a_service.json", project / "kaggle.json", project / ".netrc"}
    planted.add(project / "data/raw" / f"{NAME_SECRETS['dvc add']}.csv.dvc")
    # The store (database and artifacts), the journal, dvc.lock and DVC's run cache, every output: no trace.
    scanned = {path.relative_to(project).parts[0] for path in project.rglob("*") if path.is_file()}
    assert {"mlflow.db", "mlartifacts", "dvc.lock", ".dvc", "outputs", "metrics", "data"} <= scanned
    assert leaks(project, planted) == []
    assert len(set(ALL_SECRETS)) >= 200, len(set(ALL_SECRETS))
    in_worktree = set(DIFF_SECRETS) - {"oldPlantedKey"}  # the old value lives only in git's history now
    in_worktree |= (
        {NAME_SECRETS["dvc add"], *UNTRACKED_FILE_SECRETS}
        | set(CATALOGUE_SECRETS)
        | {token for place in ("tracked", "staged", "untracked") for token in OWN_PER_PLACE[place]}
    )  # the catalogue files, the .dvc file and .gitignore (names, the branch and the environment are in no file)
    assert {secret for secret, _ in leaks(project, set())} == in_worktree, "the scan finds what was planted"
    # What a team's pushes send (issue 64): `git push --mirror` (our snapshot refs among it) and `dvc push`. They
    # send what the user tracks by design (the secrets written into tracked or staged code, the branch's name, a
    # staged or `dvc add`-ed file's name) and nothing else planted: untracked files, their names, the environment,
    # params, remotes.
    tracked = {*DIFF_SECRETS, *CATALOGUE_SECRETS, BRANCH_SECRET, NAME_SECRETS["staged"], NAME_SECRETS["dvc add"]}
    tracked |= {token for place in ("tracked", "staged") for token in OWN_PER_PLACE[place]}
    sent = sent_by_pushes(project)
    assert [secret for secret in set(ALL_SECRETS) - tracked if secret.encode() in sent] == []
    assert len(set(ALL_SECRETS) - tracked) >= 50, len(set(ALL_SECRETS) - tracked)

    shown = run(["dvc", "metrics", "show", "--json"], project).stdout
    assert "test_accuracy" in shown
    run(["dvc", "plots", "show", "-o", str(project / "plots_html")], project)

    run(["dvc", "repro", "-f", "train", "evaluate"], project, env=env)
    runs = runs_of(project)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    hashes = {r.data.tags["prov.weights_sha256"] for r in runs}
    assert len(hashes) == 1, "op determinism on: two runs with the same params must give bit-identical weights"
