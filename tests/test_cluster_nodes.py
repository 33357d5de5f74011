"""A calibration on a Ray cluster of two nodes, each a machine of its own on the network (issue 46).

Two network namespaces joined by a veth pair: the head (10.200.0.1) holds the Ray head, a real `mlflow server` on
PostgreSQL and the driver (`dvc exp run`, as a user runs it there); the worker node (10.200.0.2) holds a Ray
node that reaches the head over the link alone. They share this machine's files, as nodes share an image, so the
node imports the project's code from Ray's upload of it (the job's `working_dir`). In turn: a calibration from
nothing kept, spread over both nodes; more repeats with the worker node killed mid-repeat (every process of its
namespace, as a machine that dies); more again, stopped with Ctrl-C and resumed; then the same repeats trained
again by the local executor, bit for bit. Credentials planted in the driver's environment, its tracking URI, a
`.env` file and a DVC remote's `config.local` are looked for in every file of both nodes' Ray folders.

In `make test-cluster` (TRACKING_TEST_CLUSTER=1), which CI runs after `make test`: about 3 minutes on 2 cores,
which the 20-minute budget of `make test` leaves no room for. Making namespaces needs root (CI runs
as root); elsewhere the test is skipped, saying so.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import calibration_record, make_project, project_env, run, write_params
from servers import SKIP_POSTGRES, MlflowServer, Namespace, Postgres, RayHead, deployment_test
from test_cluster import CATALOGUE_ENV, planted_in
from test_redaction import CATALOGUE_SECRETS

from tracking.config.baseline import freeze
from tracking.layout import REPEATS_DIR
from tracking.names import COMPUTE_ATTEMPT_TAG, COMPUTE_NODE_TAG, REPAIRED_TAG, REPEAT_KEY_TAG

pytestmark = [
    pytest.mark.slow,
    deployment_test("a cluster of two nodes in namespaces"),
]

HEAD, NODE = "10.200.0.1", "10.200.0.2"
VARIANTS = ["algo", "control"]  # algo's repeats each train other weights: a repeat trained as another shows
STAGE_TIMEOUT_S = 900  # a calibration that stalls on a lost node fails here instead of hanging the run
PLANTED = {
    "token": "planted-token-7c2e51",
    "uri": "planted-uri-pw-40d9ab",
    "env_file": "planted-env-file-93be07",
    "dvc_remote": "planted-dvc-remote-1f8c6d",
    "experiment": "glpat-clusterExperimentPlanted0123",  # each `dvc exp run -n` names one by it
}
SECRETS = [*PLANTED.values(), *CATALOGUE_SECRETS]


@dataclass
class Cluster:
    head: Namespace
    node: Namespace
    ray: RayHead
    postgres: Postgres
    server: MlflowServer

    @property
    def env(self) -> dict[str, str]:
        """The driver's environment: the server's URI with a password, a token, Ray's own token."""
        uri = self.server.uri.replace("://", f"://alice:{PLANTED['uri']}@")
        return project_env(
            MLFLOW_TRACKING_URI=uri, MLFLOW_TRACKING_TOKEN=PLANTED["token"], **CATALOGUE_ENV, **self.ray.env
        )

    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.postgres.uri)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        pytest.skip("making network namespaces (`ip netns add`) needs root; CI runs as root")
    if not shutil.which("ip"):
        raise AssertionError("`ip` not found: install Debian's iproute2 (.ci/run does)")
    try:
        postgres = Postgres()
    except FileNotFoundError as err:
        if os.environ.get(SKIP_POSTGRES) == "1":
            pytest.skip(str(err))
        raise
    folder = tmp_path_factory.mktemp("cluster-nodes")
    head, node = Namespace.pair(HEAD, NODE)
    ray, server = RayHead(cpus=1, namespace=head), None
    try:
        ray.start()
        ray.add_node(cpus=1, namespace=node)
        postgres.start()
        server = MlflowServer(postgres.socket_uri, folder / "artifacts", folder / "server.log", namespace=head).start()
        yield Cluster(head, node, ray, postgres, server)
    finally:
        ray.stop()
        if server:
            server.kill()
        head.remove()
        node.remove()
        postgres.stop()


def hashes(noise: dict) -> dict[tuple[str, int], str]:
    return {(run["variant"], run["repeat"]): run["weights_sha256"] for run in noise["runs"]}


EXPERIMENTS = itertools.count()


def on_cluster(cluster: Cluster, project: Path, repeats: int) -> subprocess.Popen:
    """`dvc exp run` of the calibration on the cluster with `repeats`, started on the head, in an experiment named
    by a token (a team's `-n`), which Ray's logs of the workers' environment must not hold."""
    settings = {"compute.executor": "ray", "compute.address": cluster.ray.address, "calibration.repeats": repeats}
    named = ["-n", f"{PLANTED['experiment']}-{next(EXPERIMENTS)}"]
    command = ["dvc", "exp", "run", *named, *[f"-S{key}={value}" for key, value in settings.items()], "calibrate"]
    return subprocess.Popen(
        cluster.head.exec(command), cwd=project, env=cluster.env, text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


def repeats_of(cluster: Cluster, parent_run_id: str) -> list:
    client = cluster.client()
    experiment = client.get_experiment_by_name("test").experiment_id
    return client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent_run_id}'", max_results=1000)


def wait_for(found, stage: subprocess.Popen, what: str, timeout: float = STAGE_TIMEOUT_S):
    """Poll `found()` until it returns something, while the stage runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = found()
        if result:
            return result
        assert stage.poll() is None, f"the stage ended before {what}:\n{stage.communicate()[0]}"
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout} s")


@pytest.fixture(scope="module")
def calibrations(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    project = make_project(tmp_path_factory.mktemp("cluster-project") / "project")
    write_params(project, train={"epochs": 2}, calibration={"variants": VARIANTS, "repeats": 3})
    freeze(project / "params.yaml", project / "baseline.yaml")
    run(["git", "commit", "-qam", "calibration on two nodes"], project)
    # Secrets a project folder holds that git and DVC leave alone: a .env file (ignored through .git/info/exclude,
    # which Ray does not read: only the executor's upload excludes keep it home) and a DVC remote's credentials.
    (project / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={PLANTED['env_file']}\n")
    with (project / ".git/info/exclude").open("a") as exclude:
        exclude.write(".env\n")
    run(["dvc", "remote", "add", "--local", "team", "s3://team-bucket/dvc"], project)
    run(["dvc", "remote", "modify", "--local", "team", "secret_access_key", PLANTED["dvc_remote"]], project)
    run(["dvc", "repro", "prepare"], project, cluster.env)
    result: dict = {"project": project}

    # 1. From nothing kept: the repeats spread over both nodes.
    started = time.monotonic()
    stage = on_cluster(cluster, project, 3)
    result["first"] = (stage.communicate(timeout=STAGE_TIMEOUT_S)[0], stage.returncode, time.monotonic() - started)
    result["first_noise"] = calibration_record(project)

    # 2. Two more repeats per variant; the worker node dies while it trains one of them.
    stage = on_cluster(cluster, project, 5)
    client, since = cluster.client(), time.time() * 1000
    experiment = wait_for(lambda: client.get_experiment_by_name("test"), stage, "experiment").experiment_id
    victim = wait_for(
        lambda: next(
            (
                found
                for found in client.search_runs([experiment], "attributes.status = 'RUNNING'")
                if f"({NODE})" in found.data.tags.get(COMPUTE_NODE_TAG, "") and found.info.start_time > since
            ),
            None,
        ),
        stage,
        "repeat training on the worker node",
    )
    killed_at = time.time()
    killed = cluster.node.kill()
    output = stage.communicate(timeout=STAGE_TIMEOUT_S)[0]
    result["killed"] = {
        "victim": victim,
        "processes": killed,
        "at": killed_at,
        "output": output,
        "status": stage.returncode,
        "ended": time.time(),
    }
    result["killed_noise"] = calibration_record(project)

    # 3. The node is back; one more repeat per variant... stopped with Ctrl-C once one new repeat is kept, resumed.
    cluster.ray.add_node(cpus=1, namespace=cluster.node)
    kept = project / REPEATS_DIR
    before = len(list(kept.glob("*.npz")))
    stage = on_cluster(cluster, project, 7)
    wait_for(lambda: len(list(kept.glob("*.npz"))) > before, stage, "new repeat kept")
    os.killpg(stage.pid, signal.SIGINT)
    result["stopped"] = (stage.communicate(timeout=STAGE_TIMEOUT_S)[0], stage.returncode, len(list(kept.glob("*.npz"))))
    stage = on_cluster(cluster, project, 7)
    result["resumed"] = (stage.communicate(timeout=STAGE_TIMEOUT_S)[0], stage.returncode)
    result["cluster_noise"] = calibration_record(project)
    result["ray_folders"] = [path for path in cluster.ray.temps if path.exists()]
    result["planted"] = planted_in(result["ray_folders"], SECRETS)

    # 4. Every repeat again with the local executor, from nothing kept, into the project's own SQLite store.
    shutil.rmtree(kept)
    local = run(
        ["dvc", "exp", "run", "-f", "-Scalibration.repeats=7", "-Scompute.executor=local", "calibrate"], project
    )
    result["local"] = local.stdout + local.stderr
    result["local_noise"] = calibration_record(project)
    return result


def test_a_calibration_spreads_over_both_nodes_as_the_local_executor_trains_it(
    calibrations: dict, cluster: Cluster
) -> None:
    output, status, seconds = calibrations["first"]
    assert status == 0 and "(6 trained with the ray executor, 0 reused)" in output, output
    noise = calibrations["first_noise"]
    runs = repeats_of(cluster, noise["parent_run_id"])
    assert len(runs) == 6 and {found.info.status for found in runs} == {"FINISHED"}
    nodes = {found.data.tags[COMPUTE_NODE_TAG].rsplit("(", 1)[-1].rstrip(")") for found in runs}
    assert nodes == {HEAD, NODE}, "the repeats ran on both nodes"
    local = hashes(calibrations["local_noise"])
    same = [key for key, value in hashes(noise).items() if local[key] == value]
    assert len(same) == 6 and noise["variants"]["control"]["bit_identical"]
    print(
        f"\ntwo-node calibration: 6 repeats ({len(runs)} runs on {sorted(nodes)}) in {seconds:.1f} s, 6 of 6 bit-identical"
    )


def test_a_killed_node_s_repeat_is_retried_on_the_head_without_waiting_for_it(
    calibrations: dict, cluster: Cluster
) -> None:
    killed = calibrations["killed"]
    assert killed["processes"] > 0
    assert killed["status"] == 0, killed["output"]
    assert "(4 trained with the ray executor, 6 reused)" in killed["output"], killed["output"]
    assert "its worker died" in killed["output"] and "Traceback" not in killed["output"]
    client = cluster.client()
    victim = killed["victim"]
    lost = client.get_run(victim.info.run_id)
    assert lost.info.status == "FAILED" and "worker died mid-repeat" in lost.data.tags[REPAIRED_TAG]
    experiment = victim.info.experiment_id
    key = victim.data.tags[REPEAT_KEY_TAG]
    (retried,) = client.search_runs(
        [experiment], f"tags.`{REPEAT_KEY_TAG}` = '{key}' and tags.`{COMPUTE_ATTEMPT_TAG}` = '2'"
    )
    assert retried.info.status == "FINISHED" and f"({HEAD})" in retried.data.tags[COMPUTE_NODE_TAG]
    noise = calibrations["killed_noise"]
    assert len(noise["runs"]) == 10 and noise["variants"]["control"]["bit_identical"]
    seen = lost.info.end_time / 1000 - killed["at"]
    retry = retried.info.start_time / 1000 - killed["at"]
    print(
        f"\nworker node killed ({killed['processes']} processes) mid-repeat {victim.info.run_name}: seen lost after "
        f"{seen:.1f} s, retried on the head after {retry:.1f} s, calibration done {killed['ended'] - killed['at']:.1f} s "
        "after the kill"
    )


def test_a_stopped_cluster_calibration_resumes_with_the_repeats_it_lacks(calibrations: dict) -> None:
    output, status, kept = calibrations["stopped"]
    assert status != 0 and kept > 10, output
    resumed, status = calibrations["resumed"]
    assert status == 0, resumed
    # Reused: every repeat kept here, and any that finished on the cluster after the Ctrl-C reached the driver,
    # which the resume fetches from the server (tracking/repeats/shared.py): CI's run had 11 kept and 12 reused.
    found = re.search(r"calibrate: (\d+) of 14 repeats kept from earlier calibrations are reused", resumed)
    assert found and kept <= int(found[1]) < 14, resumed
    reused = int(found[1])
    assert f"({14 - reused} trained with the ray executor, {reused} reused)" in resumed, resumed


def test_every_repeat_on_the_cluster_is_the_local_executor_s_bit_for_bit(calibrations: dict) -> None:
    cluster, local = hashes(calibrations["cluster_noise"]), hashes(calibrations["local_noise"])
    assert "(14 trained with the local executor, 0 reused)" in calibrations["local"], calibrations["local"]
    assert cluster == local
    assert len(set(local.values())) == 8, "7 algo repeats of their own and one CONTROL"
    print(
        f"\nbit-identical to the local executor: {sum(cluster[key] == local[key] for key in local)} of {len(local)} repeats"
    )


def test_no_credential_reaches_a_node_s_files(calibrations: dict, cluster: Cluster) -> None:
    folders = calibrations["ray_folders"]
    assert calibrations["planted"] == []
    uploaded = [path for folder in folders for path in folder.rglob("working_dir_files/*/pipelines")]
    assert uploaded, "the nodes' copies of the project were searched"
    for copy in (path.parent for path in uploaded):
        assert (copy / "tracking/data").is_dir(), "the library's code travelled whole"
        assert (
            not (copy / ".env").exists() and not (copy / ".dvc/config.local").exists() and not (copy / "data").exists()
        )
