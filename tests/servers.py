"""Real servers for tests: an `mlflow server` on 127.0.0.1, HTTP basic authentication in front of it, a
throw-away PostgreSQL cluster and a Ray cluster; and network namespaces, machines of their own on the network
(10.200.0.x), for a server or a Ray node that really lives elsewhere.

The servers run as child processes in their own process group, so a test can kill a server the way a crash
would (SIGKILL to the group) and start it again on the same port with the same stores.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BIN = Path(sys.executable).parent
START_TIMEOUT_S = 240  # a loaded 2-core CI machine takes up to a minute to import MLflow and migrate the store
SKIP_POSTGRES = "TRACKING_TEST_SKIP_POSTGRES"
# Set by `make test-cluster`: the deployment tests (two nodes in namespaces, a Ray head on 127.0.0.1, clones against
# one server), minutes in all, which the 20-minute budget of `make test` leaves no room for; CI runs them after it.
DEPLOYMENT_TESTS = "TRACKING_TEST_CLUSTER"
# How many times a Ray node is started before its failure is the test's, and what Ray says when a loaded machine
# kept its raylet's agents from starting in time.
NODE_ATTEMPTS = 3
AGENT_TIMEOUT = "The current node timed out during startup"


def deployment_test(what: str):
    """The mark that runs a test only under `make test-cluster` (DEPLOYMENT_TESTS set), skipping it elsewhere with
    `what` it needs."""
    import pytest

    return pytest.mark.skipif(not os.environ.get(DEPLOYMENT_TESTS), reason=f"{what}: `make test-cluster`")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Namespace:
    """A network namespace: a machine's own network (its loopback and one address on a link to another), sharing
    this machine's files. Made by `pair`, which needs root; `remove` kills what runs in it and deletes it."""

    PREFIX = 24  # the link's netmask: 10.200.0.0/24

    def __init__(self, name: str, address: str) -> None:
        self.name = name
        self.address = address

    @classmethod
    def pair(cls, first: str, second: str) -> tuple[Namespace, Namespace]:
        """Two namespaces at addresses `first` and `second`, joined by a veth pair (a cable between two machines),
        named after this process so that runs side by side do not meet. Each routes everything over the link, so
        a program that finds its own address by the route to the internet (Ray does) finds this one."""
        tag = f"{os.getpid()}-{time.monotonic_ns() % 10_000}"
        made = [cls(f"tracking-{tag}-{index}", address) for index, address in enumerate((first, second))]
        try:
            for namespace in made:
                _ip("netns", "add", namespace.name)
            ends = [f"vt{tag}{index}"[:15] for index in range(2)]  # interface names: 15 characters at most
            _ip(
                "link",
                "add",
                ends[0],
                "netns",
                made[0].name,
                "type",
                "veth",
                "peer",
                "name",
                ends[1],
                "netns",
                made[1].name,
            )
            for namespace, end in zip(made, ends, strict=True):
                namespace.ip("addr", "add", f"{namespace.address}/{cls.PREFIX}", "dev", end)
                namespace.ip("link", "set", end, "up")
                namespace.ip("link", "set", "lo", "up")
                namespace.ip("route", "add", "default", "dev", end)
        except BaseException:
            for namespace in made:
                namespace.remove()
            raise
        return made[0], made[1]

    def ip(self, *arguments: str) -> None:
        _ip("-n", self.name, *arguments)

    def exec(self, command: list[str]) -> list[str]:
        """`command`, run inside this namespace."""
        return ["ip", "netns", "exec", self.name, *command]

    def kill(self) -> int:
        """SIGKILL every process in the namespace at once, as a machine that dies takes its processes with it;
        return how many there were."""
        listed = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True)
        pids = [int(pid) for pid in listed.stdout.split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def remove(self) -> None:
        self.kill()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def _ip(*arguments: str) -> None:
    done = subprocess.run(["ip", *arguments], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(arguments)} exited {done.returncode}: {done.stderr.strip()}")


class MlflowServer:
    """`mlflow server` with its own backend store and served artifacts (clients upload over HTTP), on 127.0.0.1
    or on the address of a network `namespace` it runs in."""

    def __init__(self, backend_uri: str, artifacts: Path, log: Path, namespace: Namespace | None = None) -> None:
        self.backend_uri = backend_uri
        self.artifacts = artifacts
        self.log = log
        self.namespace = namespace
        self.port = 5000 if namespace else free_port()  # a namespace of the test's own has every port free
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://{self.namespace.address if self.namespace else '127.0.0.1'}:{self.port}"

    def start(self) -> MlflowServer:
        """Start and wait until `/health` answers."""
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        env.pop("MLFLOW_TRACKING_URI", None)
        command = [
            str(BIN / "mlflow"),
            "server",
            "--backend-store-uri",
            self.backend_uri,
            "--artifacts-destination",
            str(self.artifacts),
            "--host",
            self.namespace.address if self.namespace else "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
        ]
        if self.namespace:
            command = self.namespace.exec(command)
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
            if self._answers():
                return self
            time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"mlflow server did not answer within {START_TIMEOUT_S} s:\n{self.log.read_text()[-3000:]}")

    def _answers(self) -> bool:
        """Whether `/health` answers 200, asked from inside the server's namespace where it has one."""
        if self.namespace:
            ask = [sys.executable, "-c", "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)"]
            return (
                subprocess.run(self.namespace.exec([*ask, f"{self.uri}/health"]), capture_output=True).returncode == 0
            )
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    def kill(self) -> None:
        """Kill the server's process group at once, as a crash or a lost machine would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None


class BasicAuthGate:
    """HTTP basic authentication in front of a server, as a team's proxy puts it before `mlflow server`: a request
    without the right `Authorization` header is answered 401 and counted in `refused`, any other is passed on
    whole. MLflow's own `--app-name basic-auth` needs Flask-WTF, which the project does not install.
    """

    def __init__(self, upstream: str, user: str, password: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream).netloc
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.refused = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> BasicAuthGate:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Authorization") != gate.expected:
                    gate.refused += 1
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                skipped = {"authorization", "host", "connection", "content-length"}
                headers = {name: value for name, value in self.headers.items() if name.lower() not in skipped}
                upstream = http.client.HTTPConnection(gate.upstream, timeout=120)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    content = answer.read()
                finally:
                    upstream.close()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, format: str, *args: object) -> None:  # quiet: a test's output stays readable
                pass

        return Handler


class Postgres:
    """A PostgreSQL cluster in a temporary folder, on a free port, trusting local connections.

    `initdb` refuses to run as root; as root the cluster is run by the `postgres` user that Debian's
    package creates.
    """

    def __init__(self) -> None:
        self.bin = _postgres_bin()
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="tracking-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            account = pwd.getpwnam(self.user)
            os.chown(self.folder, account.pw_uid, account.pw_gid)

    @property
    def uri(self) -> str:
        return f"postgresql+psycopg2://mlflow@127.0.0.1:{self.port}/mlflow"

    @property
    def socket_uri(self) -> str:
        """The database by its Unix socket: a file, which a server in any network namespace of this machine opens."""
        return f"postgresql+psycopg2://mlflow@/mlflow?host={self.folder}&port={self.port}"

    def start(self) -> Postgres:
        data, log = self.folder / "data", self.folder / "log"
        self._run("initdb", "-D", str(data), "-U", "mlflow", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-k {self.folder} -p {self.port} -h 127.0.0.1 -F"
        self._run("pg_ctl", "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "120", "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "mlflow", "mlflow")
        return self

    def stop(self) -> None:
        if (self.folder / "data" / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")


def _postgres_bin() -> Path:
    """Where `initdb` and `pg_ctl` are: PATH, else Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if versions:
        return versions[-1].parent
    raise FileNotFoundError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found; install Debian's `postgresql` "
        f"(.ci/run does), or set {SKIP_POSTGRES}=1 to skip the PostgreSQL tests"
    )


class RayHead:
    """A real Ray cluster: a head node and any worker nodes added, each `ray start --block` in its own process
    group with usage statistics off. On 127.0.0.1 (a free port, one short temporary folder for all its nodes), or
    in network namespaces, each node at its namespace's address with a temporary folder of its own, as on
    machines of their own.

    It requires Ray's token authentication with a token of its own, which a driver gets from `env` (not the
    user's ~/.ray/auth_token). `stop` kills those process groups; never `ray stop`, which stops every Ray on the
    machine.
    """

    def __init__(self, cpus: int = 2, namespace: Namespace | None = None) -> None:
        self.namespace = namespace
        self.port = 6379 if namespace else free_port()  # a namespace of the test's own has every port free
        self.temp = _ray_temp()  # Ray's socket paths must stay short
        self.temps = [self.temp]
        self.cpus = cpus
        self.processes: list[subprocess.Popen] = []
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(32).hex(), "RAY_USAGE_STATS_ENABLED": "0"}

    @property
    def address(self) -> str:
        return f"{self.namespace.address if self.namespace else '127.0.0.1'}:{self.port}"

    def start(self) -> RayHead:
        # No autoscaler monitor (nothing scales): a Python process fewer to start on a loaded machine.
        head = ["--head", f"--port={self.port}", "--include-dashboard=false", f"--num-cpus={self.cpus}", "--no-monitor"]
        self._node(head, self.temp, self.namespace)
        return self

    def add_node(self, cpus: int = 1, namespace: Namespace | None = None) -> Path:
        """A worker node joining the head: on this machine (a raylet of its own), or in `namespace`; return its
        temporary folder (its session's logs and files)."""
        temp = self.temp if namespace is None else _ray_temp()
        if namespace is not None:
            self.temps.append(temp)
        self._node([f"--address={self.address}", f"--num-cpus={cpus}"], temp, namespace)
        return temp

    def _node(self, arguments: list[str], temp: Path, namespace: Namespace | None) -> None:
        """Start a node, trying again where its raylet gave up on its agents: Ray 2.60's raylet waits 15 s for
        its Python agents to report their ports, which a machine loaded by other work can exceed."""
        ip = namespace.address if namespace else "127.0.0.1"
        command = [str(BIN / "ray"), "start", *arguments, f"--node-ip-address={ip}", "--num-gpus=0"]
        command += [f"--temp-dir={temp}", "--disable-usage-stats", "--block"]
        if namespace is not None:
            command = namespace.exec(command)
        env = {**os.environ, **self.env}
        for attempt in range(1, NODE_ATTEMPTS + 1):
            log = temp / f"node{len(self.processes)}-{attempt}.log"
            with log.open("w") as out:
                process = subprocess.Popen(
                    command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            deadline = time.monotonic() + START_TIMEOUT_S
            while "Ray runtime started" not in log.read_text() and process.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            printed = log.read_text()
            if "Ray runtime started" in printed:
                self.processes.append(process)
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            if AGENT_TIMEOUT not in printed or attempt == NODE_ATTEMPTS:
                self.stop()
                raise RuntimeError(f"ray start failed:\n{printed}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        self.processes.clear()
        for temp in self.temps:
            shutil.rmtree(temp, ignore_errors=True)


def _ray_temp() -> Path:
    """A temporary folder for a Ray node's session, under /tmp: Ray's socket paths must stay short."""
    return Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
