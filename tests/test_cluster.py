"""Calibration repeats on a real Ray cluster (a head on 127.0.0.1), kept, retried when a worker dies, and what a
cluster may see of a project.

One tiny project is calibrated with the local executor, then with `dvc exp run -S compute.executor=ray` on two
concurrent workers (the same weights, repeat for repeat), then with `-S calibration.repeats=4` on Ray while a worker
is SIGKILLed mid-repeat (only the new repeats train, and the lost one is retried). The tests that start a cluster
run in `make test-cluster` (which CI runs after `make test`: 2 to 3 minutes on 2 cores, which the 20-minute budget
of `make test` leaves no room for); `make test` keeps the ones that need none, a private Ray's sockets and the
project's upload. A local calibration stopped and resumed is tests/test_calibration_resume.py's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from conftest import calibration_record, client_for, make_project, project_env, run, write_params
from servers import RayHead, deployment_test, free_port
from test_redaction import CATALOGUE, CATALOGUE_SECRETS

from tracking.config.baseline import freeze
from tracking.config.params import ComputeParams
from tracking.layout import REPEATS_DIR
from tracking.names import (
    COMPUTE_ATTEMPT_TAG,
    COMPUTE_EXECUTOR_TAG,
    COMPUTE_GPU_TAG,
    COMPUTE_NODE_TAG,
    COMPUTE_PROCESS_TAG,
    REPAIRED_TAG,
    REPEAT_KEY_TAG,
    REUSED_REPEATS_TAG,
)
from tracking.redaction import REDACTED

pytestmark = pytest.mark.slow
# The tests that start a Ray cluster: `make test-cluster` only.
on_a_cluster = deployment_test("a Ray cluster on 127.0.0.1")

VARIANTS = ["algo", "control"]
BACKEND_SECTIONS = ("prov.software.backend.", "prov.determinism.", "prov.gpu.")


def hashes(noise: dict) -> dict[tuple[str, int], str]:
    return {(run["variant"], run["repeat"]): run["weights_sha256"] for run in noise["runs"]}


def children(project: Path, parent_run_id: str) -> list:
    client = client_for(project)
    experiment = client.get_experiment_by_name("test").experiment_id
    return client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent_run_id}'")


def ray_settings(head: RayHead, **more: object) -> list[str]:
    settings = {"compute.executor": "ray", "compute.address": head.address, "compute.workers": 2, **more}
    return [argument for key, value in settings.items() for argument in ("-S", f"{key}={value}")]


@pytest.fixture(scope="module")
def head():
    ray = RayHead(cpus=2).start()
    yield ray
    ray.stop()


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory, head: RayHead) -> dict:
    """The project calibrated locally, then again on Ray from nothing kept, with the catalogue planted (issue 64):
    the pipeline test's untracked credential files and the catalogue in an untracked file, in the project; the
    catalogue and MLflow's credentials in the environment of `dvc exp run`."""
    from test_pipeline import UNTRACKED_SECRET_FILES

    project = make_project(tmp_path_factory.mktemp("cluster") / "project")
    write_params(project, train={"epochs": 3}, calibration={"variants": VARIANTS, "repeats": 3})
    freeze(project / "params.yaml", project / "baseline.yaml")
    run(["git", "commit", "-qam", "calibration on a cluster"], project)
    run(["dvc", "repro", "calibrate"], project)
    local = calibration_record(project)
    for path in (project / REPEATS_DIR).glob("*.npz"):
        path.unlink()
    planted = {**UNTRACKED_SECRET_FILES, "notes/catalogue.txt": "".join(f"{text}\n" for text in CATALOGUE.values())}
    for name, text in planted.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    env = project_env(**head.env, **CREDENTIALS, **CATALOGUE_ENV)
    on_ray = run(["dvc", "exp", "run", "-f", *ray_settings(head), "calibrate"], project, env)
    return {
        "project": project,
        "local": local,
        "on_ray": on_ray.stdout + on_ray.stderr,
        "ray": calibration_record(project),
    }


@on_a_cluster
def test_ray_workers_train_the_local_executors_weights_and_tag_where(calibrated: dict) -> None:
    ray, local = calibrated["ray"], calibrated["local"]
    assert "(6 trained with the ray executor, 0 reused)" in calibrated["on_ray"], calibrated["on_ray"]
    assert hashes(ray) == hashes(local)
    assert ray["variants"]["control"]["bit_identical"]
    runs = children(calibrated["project"], ray["parent_run_id"])
    assert len(runs) == 6 and {run.info.status for run in runs} == {"FINISHED"}
    processes = {run.data.tags[COMPUTE_PROCESS_TAG] for run in runs}
    assert len(processes) == 2 and str(os.getpid()) not in processes
    for found in runs:
        tags = found.data.tags
        assert tags[COMPUTE_EXECUTOR_TAG] == "ray" and tags[COMPUTE_GPU_TAG] == "none"
        assert tags[COMPUTE_NODE_TAG].startswith(socket.gethostname())
        assert tags[COMPUTE_ATTEMPT_TAG] == "1"
    control = [run for run in runs if run.data.tags["noise.variant"] == "control"]
    assert len({run.data.tags[COMPUTE_PROCESS_TAG] for run in control}) == 2, "CONTROL compared across processes"
    # The stage's process leaves the backend to its workers: the calibration's run records theirs, as the local one.
    client = client_for(calibrated["project"])
    on_ray, here = (client.get_run(noise["parent_run_id"]).data.tags for noise in (ray, local))
    backend = {key: value for key, value in here.items() if key.startswith(BACKEND_SECTIONS)}
    assert len(backend) > 8 and {key: on_ray.get(key) for key in backend} == backend


@on_a_cluster
def test_a_calibration_on_ray_leaves_no_planted_secret_in_rays_folders(calibrated: dict, head: RayHead) -> None:
    """Issue 64: after the calibration on Ray above, none of the planted secrets (the catalogue, MLflow's
    credentials, the untracked credential files' contents) is in a file, a name or a zip member of the cluster's
    temporary folder: its sessions' logs (the driver's, the raylet's, every worker's) and `runtime_resources`, where
    each node unpacks the project's upload."""
    from test_pipeline import UNTRACKED_FILE_SECRETS

    assert "(6 trained with the ray executor" in calibrated["on_ray"], calibrated["on_ray"]
    sessions = list(head.temp.glob("session_*"))
    assert sessions and list(head.temp.rglob("runtime_resources")), "the grep reads Ray's sessions and uploads"
    assert list(head.temp.rglob("python-core-worker-*.log")), "and the workers' logs"
    assert planted_in([head.temp], [*PLANTED, *UNTRACKED_FILE_SECRETS]) == []


def kill_a_worker_mid_repeat(project: Path, head: RayHead, **settings: object) -> tuple[object, str, int]:
    """`dvc exp run` the calibration on Ray with `settings`, SIGKILL the worker of the first repeat seen training,
    and return that repeat's run, the stage's output and its exit status."""
    stage, victim = calibrate_until_a_repeat_trains(project, head, **settings)
    os.kill(int(victim.data.tags[COMPUTE_PROCESS_TAG]), signal.SIGKILL)
    output = stage.communicate(timeout=300)[0]
    return victim, output, stage.returncode


def calibrate_until_a_repeat_trains(
    project: Path, head: RayHead, **settings: object
) -> tuple[subprocess.Popen, object]:
    """Start `dvc exp run` of the calibration on Ray with `settings`; return it and the first repeat's run seen
    training."""
    command = ["dvc", "exp", "run", *ray_settings(head, **settings), "calibrate"]
    stage = subprocess.Popen(
        command, cwd=project, env=project_env(**head.env), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    client = client_for(project)
    experiment = client.get_experiment_by_name("test").experiment_id
    started = time.time() * 1000
    victim, deadline = None, time.monotonic() + 300
    while victim is None and stage.poll() is None and time.monotonic() < deadline:
        running = client.search_runs(
            [experiment], f"tags.`{COMPUTE_EXECUTOR_TAG}` = 'ray' and attributes.status = 'RUNNING'"
        )
        victim = next(
            (found for found in running if "mlflow.parentRunId" in found.data.tags and found.info.start_time > started),
            None,
        )
        time.sleep(0.05)
    assert victim is not None, f"no repeat was seen training: {stage.communicate()[0] if stage.poll() else ''}"
    return stage, victim


@on_a_cluster
def test_more_repeats_train_only_the_new_ones_and_a_killed_worker_is_retried(calibrated: dict, head: RayHead) -> None:
    project = calibrated["project"]
    victim, output, status = kill_a_worker_mid_repeat(
        project, head, **{"compute.max_retries": 1, "calibration.repeats": 4}
    )
    assert status == 0, output
    assert "(2 trained with the ray executor, 6 reused)" in output, output
    assert "its worker died" in output

    client = client_for(project)
    experiment = client.get_experiment_by_name("test").experiment_id
    lost = client.get_run(victim.info.run_id)
    assert lost.info.status == "FAILED"
    assert "worker died mid-repeat" in lost.data.tags[REPAIRED_TAG] and "1 try left" in lost.data.tags[REPAIRED_TAG]
    key = victim.data.tags[REPEAT_KEY_TAG]
    retried = client.search_runs([experiment], f"tags.`{REPEAT_KEY_TAG}` = '{key}' and attributes.status = 'FINISHED'")
    assert [run.data.tags[COMPUTE_ATTEMPT_TAG] for run in retried if "ray" in run.data.tags[COMPUTE_EXECUTOR_TAG]] == [
        "2"
    ]
    noise = calibration_record(project)
    assert len(noise["reused"]) == 6 and len(noise["runs"]) == 8
    assert noise["variants"]["control"]["bit_identical"]
    assert {key: value for key, value in hashes(noise).items() if key[1] < 3} == hashes(calibrated["local"])
    assert client.get_run(noise["parent_run_id"]).data.tags[REUSED_REPEATS_TAG] == "6"


@on_a_cluster
def test_a_repeat_whose_worker_dies_with_no_tries_left_fails_the_stage_in_one_line(
    calibrated: dict, head: RayHead
) -> None:
    project = calibrated["project"]
    kept = len(list((project / REPEATS_DIR).glob("*.npz")))
    victim, output, status = kill_a_worker_mid_repeat(
        project, head, **{"compute.max_retries": 0, "calibration.repeats": 5}
    )
    lines = output.strip().splitlines()
    error = next(line for line in lines if line.startswith("error: "))
    assert f"{victim.info.run_name}: its worker died on each of 1 tries" in error and "compute.max_retries" in error
    assert status != 0 and "exited with 2" in output and "Traceback" not in output
    client = client_for(project)
    assert client.get_run(victim.info.run_id).info.status == "FAILED"
    assert "no tries left" in client.get_run(victim.info.run_id).data.tags[REPAIRED_TAG]
    parents = client.search_runs(
        [client.get_experiment_by_name("test").experiment_id], "tags.`noise.role` = 'calibration'"
    )
    assert "RUNNING" not in {run.info.status for run in parents}
    assert len(list((project / REPEATS_DIR).glob("*.npz"))) == kept + 1, "the other new repeat is kept"


@on_a_cluster
def test_a_calibration_whose_ray_head_is_lost_ends_its_run_failed_in_one_line(calibrated: dict) -> None:
    """The Ray head SIGKILLed (every process of it) mid-repeat: the stage stops within seconds, not after Ray's 60 s,
    with one line, and the calibration's run ends FAILED, not RUNNING; the repeats kept before are kept."""
    project = calibrated["project"]
    kept = len(list((project / REPEATS_DIR).glob("*.npz")))
    lost = RayHead(cpus=2).start()
    try:
        stage, _ = calibrate_until_a_repeat_trains(project, lost, **{"calibration.repeats": 6})
        killed = time.monotonic()
        lost.stop()
        output = stage.communicate(timeout=300)[0]
        seconds = time.monotonic() - killed
    finally:
        lost.stop()
    error = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and "the Ray cluster's head at" in error[0] and "stopped answering" in error[0], output
    assert stage.returncode != 0 and "exited with 2" in output and "Traceback" not in output, output
    assert seconds < 60, f"the stage ended {seconds:.0f} s after the head: Ray's own timeout ended it"
    client = client_for(project)
    (parent,) = client.search_runs(
        [client.get_experiment_by_name("test").experiment_id],
        "tags.`noise.role` = 'calibration'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    assert parent.info.status == "FAILED" and "stopped answering" in parent.data.tags["error"]
    assert len(list((project / REPEATS_DIR).glob("*.npz"))) >= kept
    print(f"Ray head lost mid-repeat: the stage ended {seconds:.1f} s later, its run FAILED")


@on_a_cluster
def test_a_cluster_with_other_nodes_refuses_a_local_store_and_unknown_resources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracking.compute.ray_executor import RayPool
    from tracking.errors import ComputeError

    cluster = RayHead(cpus=2).start()
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    try:
        sqlite = f"sqlite:///{tmp_path / 'mlflow.db'}"
        for compute, expected in (
            (ComputeParams(executor="ray", address=cluster.address, accelerator_type="H100"), "compute.accelerator_type H100"),
            (ComputeParams(executor="ray", address=cluster.address, cpus_per_run=4), "compute.cpus_per_run 4"),
        ):  # fmt: skip
            with pytest.raises(ComputeError, match=expected), RayPool(compute, sqlite, tmp_path) as pool:
                pool.size(10)
        with RayPool(ComputeParams(executor="ray", address=cluster.address), sqlite, tmp_path) as pool:
            assert pool.size(10) == 2 and pool.size(1) == 1 and pool.gpus_per_run == 0
        cluster.add_node(cpus=1)
        compute = ComputeParams(executor="ray", address=cluster.address)
        with pytest.raises(ComputeError, match=r"has 2 nodes.*MLFLOW_TRACKING_URI"), RayPool(compute, sqlite, tmp_path):
            pass
        with RayPool(compute, "http://127.0.0.1:5000", tmp_path) as pool:
            assert pool.size(10) == 3
        for address, expected in ((f"127.0.0.1:{free_port()}", "no Ray cluster answers there"), ("head", "host:port")):
            with pytest.raises(ComputeError, match=expected), RayPool(ComputeParams(address=address), sqlite, tmp_path):
                pass
        private = ComputeParams(executor="ray", cpus_per_run=0.5)  # address null: a Ray of its own, not this one
        with RayPool(private, sqlite, tmp_path) as pool:
            from ray._common.usage.usage_lib import usage_stats_enabled

            assert pool.size(100) == 2 * os.cpu_count() and not pool.remote_nodes
            assert not usage_stats_enabled()
    finally:
        cluster.stop()


# A private Ray (compute.address null) running one job, then every address its processes listen on, as JSON.
LISTENING = """
import json, sys
from pathlib import Path

import psutil

from tracking.compute.ray_executor import RayPool
from tracking.config.params import ComputeParams


class Echo:
    def setup(self, spec):
        pass

    def where(self):
        return "here"

    def run(self, job, attempt):
        return job


with RayPool(ComputeParams(executor="ray", workers=1), sys.argv[1], Path.cwd()) as pool:
    pool.start(Echo, 1, {}, {})
    assert [result for _, result in pool.run(None, [7], str, print, lambda line: None)] == [7]
    me = psutil.Process()
    family = {me.pid: "driver", **{child.pid: child.name() for child in me.children(recursive=True)}}
    sockets = psutil.net_connections("inet")
    found = sorted({(family[c.pid], c.laddr.ip) for c in sockets if c.status == psutil.CONN_LISTEN and c.pid in family})
print(json.dumps(found))
"""
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def test_a_private_ray_listens_on_loopback_only(tmp_path: Path) -> None:
    """Its GCS, raylet, workers and runtime-env agent, with the environment a stage has (no Ray variable set)."""
    env = {key: value for key, value in project_env().items() if not key.startswith("RAY_")}
    done = run(["python", "-c", LISTENING, f"sqlite:///{tmp_path / 'mlflow.db'}"], tmp_path, env=env)
    listening = json.loads(done.stdout.splitlines()[-1])
    assert {name for name, _ in listening} >= {"gcs_server", "raylet"}, listening
    assert [(name, ip) for name, ip in listening if ip not in LOOPBACK] == [], "nothing listens beyond loopback"
    assert "listens on" not in done.stderr, done.stderr


def planted_in(folders: list[Path], secrets: list[str]) -> list[str]:
    """Every file (and member of a zip file: Ray's packages) under `folders` holding or named by one of `secrets`."""
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if not path.is_file() or path.is_symlink():
                continue
            contents = [(str(path), path.read_bytes())]
            if zipfile.is_zipfile(path):
                with zipfile.ZipFile(path) as package:
                    contents += [(f"{path}:{name}", package.read(name)) for name in package.namelist()]
            found += [
                f"{where}: {secret}"
                for where, data in contents
                for secret in secrets
                if secret.encode() in data or secret in where
            ]
    return found


# Credentials planted in a driver's environment and its tracking URI, the catalogue in MLflow's and allow-listed
# variables, and a DVC experiment named by a token (`dvc exp run -n`); a worker returns what its environment holds
# of them, and the driver greps a private Ray's session folder before the pool removes it.
CREDENTIALS = {"MLFLOW_TRACKING_PASSWORD": "planted-pw-5c1e9a77", "MLFLOW_TRACKING_TOKEN": "planted-token-0b3f6d21"}
URI = "http://alice:planted-uri-pw-8e2d@127.0.0.1:9/"
EXPERIMENT = "glpat-rayExperimentPlanted0123456789"
CATALOGUE_ENV = {
    f"{prefix}{index}": text
    for index, text in enumerate(CATALOGUE.values())
    for prefix in ("MLFLOW_PLANTED_", "KERAS_PLANTED_", "TF_CPP_PLANTED_")
}
PLANTED = [*CREDENTIALS.values(), "planted-uri-pw-8e2d", EXPERIMENT, *CATALOGUE_SECRETS]
SEEN = """
import json, os, stat, sys
from pathlib import Path

from tracking.compute.ray_executor import RayPool
from tracking.config.params import ComputeParams
from tracking.repeats.running import worker_credentials, worker_environment


class Seen:
    def setup(self, spec):
        pass

    def where(self):
        return "here"

    def run(self, job, attempt):
        return {name: os.environ.get(name) for name in job}


def grep(folder, planted):
    found = []
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path}: {secret}" for secret in planted if secret.encode() in data or secret in str(path)]
    return found


uri, address, planted = sys.argv[1], sys.argv[2] or None, sys.argv[3:]
names = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "DVC_EXP_NAME")
with RayPool(ComputeParams(executor="ray", workers=1, address=address), uri, Path.cwd()) as pool:
    pool.start(Seen, 1, worker_environment(), worker_credentials(uri))
    (seen,) = [result for _, result in pool.run(None, [names], str, print, lambda line: None)]
    private = pool.temp
    mode = stat.S_IMODE(private.stat().st_mode) if private else None
    found = grep(private, planted) if private else []
print(json.dumps({"seen": seen, "private": str(private) if private else None, "mode": mode, "found": found}))
"""


def credentials_on_ray(folder: Path, address: str, **env: str) -> dict:
    """Run SEEN against `address` ('' for a private Ray) with the planted credentials and catalogue; assert that
    the workers got what MLflow needs, the experiment's name only as it is recorded, and that nothing printed
    holds a planted secret."""
    planted_env = {**CREDENTIALS, **CATALOGUE_ENV, "DVC_EXP_NAME": f"feature-{EXPERIMENT}"}
    done = run(["python", "-c", SEEN, URI, address, *PLANTED], folder, project_env(**env, **planted_env))
    result = json.loads(done.stdout.splitlines()[-1])
    recorded = {"DVC_EXP_NAME": f"feature-{REDACTED}"}
    assert result["seen"] == {"MLFLOW_TRACKING_URI": URI, **CREDENTIALS, **recorded}, (
        "what MLflow needs; the name as recorded"
    )
    printed = done.stdout.replace(done.stdout.splitlines()[-1], "") + done.stderr
    assert [secret for secret in PLANTED if secret in printed] == []
    return result


@on_a_cluster
def test_credentials_reach_ray_workers_without_being_written_down(tmp_path: Path, head: RayHead) -> None:
    """Neither in the session folder of a cluster started by `ray start` nor in a private Ray's, which only this
    user can enter and which is gone when the pool ends."""
    credentials_on_ray(tmp_path, head.address, **head.env)
    assert planted_in([head.temp], PLANTED) == []
    assert list(head.temp.rglob("runtime_env_agent.log")), "the grep read Ray's logs"

    private = credentials_on_ray(tmp_path, "")
    assert private["found"] == [] and private["mode"] == 0o700
    assert not Path(private["private"]).exists()


@on_a_cluster
def test_a_calibration_on_ray_logs_to_a_password_protected_server_and_writes_the_password_nowhere(
    head: RayHead, tmp_path: Path
) -> None:
    """A real `mlflow server` behind HTTP basic authentication, its password in the tracking URI: the calibrate
    stage on the Ray cluster logs its parent and every repeat there (so the workers authenticated), and the
    password is in no file of the server's store and artifacts, Ray's temporary folder (its logs), the project,
    nor in what the stage printed."""
    from mlflow.tracking import MlflowClient
    from servers import BasicAuthGate, MlflowServer

    password = "planted-ray-uri-pw-3f9c"
    server = MlflowServer(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "artifacts", tmp_path / "server.log")
    server.start()
    gate = BasicAuthGate(server.uri, "alice", password).start()
    try:
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(f"{gate.uri}/api/2.0/mlflow/experiments/search?max_results=1", timeout=30)
        project = make_project(tmp_path / "project")
        write_params(
            project,
            calibration={"variants": ["control"], "repeats": 3},
            compute={"executor": "ray", "address": head.address, "workers": 1},
        )
        run(["python", "-m", "pipelines.prepare"], project)
        uri = gate.uri.replace("://", f"://alice:{password}@")
        done = run(["python", "-m", "pipelines.calibrate"], project, project_env(**head.env, MLFLOW_TRACKING_URI=uri))
    finally:
        gate.stop()
        server.kill()
    assert gate.refused == 1, "only the request without credentials was refused"
    client = MlflowClient(tracking_uri=server.backend_uri)
    parent = calibration_record(project)["parent_run_id"]
    repeats = client.search_runs([client.get_run(parent).info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    assert len(repeats) == 3 and {found.info.status for found in repeats} == {"FINISHED"}
    assert {found.data.tags[COMPUTE_EXECUTOR_TAG] for found in repeats} == {"ray"}
    assert password not in done.stdout + done.stderr
    folders = [tmp_path, head.temp]  # the server's store, artifacts and log; the project; Ray's logs
    written = [
        str(path)
        for folder in folders
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink() and password.encode() in path.read_bytes()
    ]
    assert written == []
    assert list(head.temp.rglob("runtime_env_agent.log")) and list((tmp_path / "artifacts").rglob("*")), "grepped"


# Files a project folder may hold beside its code, none of which a cluster's nodes may receive: credentials (a .env
# file, a DVC remote's config.local, keys), the data, what stages write, the MLflow store and the offline journal.
LEFT_HOME = [
    ".env",
    "pipelines/.env.local",
    ".dvc/config.local",
    "deploy/key.pem",
    ".netrc",
    "data/prepared/train.npz",
    "outputs/model.keras",
    "calibration/repeats/0123.npz",
    "mlflow.db",
    ".tracking/offline/run/journal.jsonl",
]


def test_the_project_s_upload_to_a_cluster_carries_its_code_and_leaves_secrets_and_data_home(tmp_path: Path) -> None:
    """Ray's own packaging of the job's `working_dir` (what `ray.init` uploads to a cluster's nodes), with the
    executor's `runtime_env`: every module of the library and the pipeline (`tracking/data/` too, which a bare
    `data` pattern would drop) and a team's untracked new module, none of the files above, though git ignores none
    of them through a .gitignore (Ray reads .gitignore files, not .git/info/exclude), and none of the untracked
    credential files the pipeline's catalogue plants (issue 64), nor a file git ignores through .git/info/exclude."""
    from ray._private.runtime_env.packaging import create_package
    from test_pipeline import UNTRACKED_FILE_SECRETS, UNTRACKED_SECRET_FILES

    from tracking.compute.upload import job_runtime_env

    project = make_project(tmp_path / "project")
    planted = {
        **dict.fromkeys(LEFT_HOME, "planted-secret-6a1f\n"),
        **UNTRACKED_SECRET_FILES,
        "notes/odd [1]*.txt": "planted-secret-6a1f\n",
        "private/excluded.yaml": "planted-secret-6a1f\n",
    }
    for name, text in planted.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    (project / ".git/info/exclude").write_text("/private/\n")
    (project / "team_models").mkdir()
    (project / "team_models/new_builder.py").write_text("UNITS = 8\n")
    runtime_env = job_runtime_env(project)
    package = tmp_path / "package.zip"
    create_package(runtime_env["working_dir"], package, include_gitignore=True, excludes=runtime_env["excludes"])
    with zipfile.ZipFile(package) as uploaded:
        names = set(uploaded.namelist())
        secrets = [b"planted-secret-6a1f", *(secret.encode() for secret in UNTRACKED_FILE_SECRETS)]
        assert not [name for name in names for secret in secrets if secret in uploaded.read(name)]
    code = {
        path.relative_to(project).as_posix()
        for path in project.rglob("*.py")
        if not set(LEFT_HOME) & {path.relative_to(project).as_posix()}
    }
    assert "tracking/data/source.py" in code and code <= names, sorted(code - names)
    assert {"dvc.yaml", "params.yaml", "baseline.yaml"} <= names
    assert [name for name in planted if name in names] == [] and "team_models/new_builder.py" in names
