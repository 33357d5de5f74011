"""Real servers for tests: an `mlflow server` on 127.0.0.1, HTTP basic authentication in front of it, a
throw-away PostgreSQL cluster and a Ray cluster.

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class MlflowServer:
    """`mlflow server` with its own backend store and served artifacts (clients upload over HTTP)."""

    def __init__(self, backend_uri: str, artifacts: Path, log: Path) -> None:
        self.backend_uri = backend_uri
        self.artifacts = artifacts
        self.log = log
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
        ]
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"mlflow server did not answer within {START_TIMEOUT_S} s:\n{self.log.read_text()[-3000:]}")

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
    """A real Ray cluster on 127.0.0.1: a head node on a free port and any worker nodes added, each `ray start
    --block` in its own process group with its own short temporary folder and usage statistics off.

    It requires Ray's token authentication with a token of its own, which a driver gets from `env` (not the
    user's ~/.ray/auth_token). `stop` kills those process groups; never `ray stop`, which stops every Ray on the
    machine.
    """

    def __init__(self, cpus: int = 2) -> None:
        self.port = free_port()
        self.temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # Ray's socket paths must stay short
        self.cpus = cpus
        self.processes: list[subprocess.Popen] = []
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(32).hex(), "RAY_USAGE_STATS_ENABLED": "0"}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RayHead:
        head = ["--head", f"--port={self.port}", "--include-dashboard=false", f"--num-cpus={self.cpus}"]
        self._node(head, self.temp / "head.log")
        return self

    def add_node(self, cpus: int = 1) -> None:
        """A second node joining the head (on this machine, as a raylet of its own)."""
        self._node([f"--address={self.address}", f"--num-cpus={cpus}"], self.temp / f"node{len(self.processes)}.log")

    def _node(self, arguments: list[str], log: Path) -> None:
        command = [str(BIN / "ray"), "start", *arguments, "--node-ip-address=127.0.0.1", "--num-gpus=0"]
        command += [f"--temp-dir={self.temp}", "--disable-usage-stats", "--block"]
        env = {**os.environ, **self.env}
        with log.open("w") as out:
            process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Ray runtime started" not in log.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ray start failed:\n{log.read_text()}")
            time.sleep(0.2)

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        self.processes.clear()
        shutil.rmtree(self.temp, ignore_errors=True)
