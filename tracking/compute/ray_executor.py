"""The Ray executor: jobs on a pool of long-lived worker processes of a Ray cluster, retried when a worker dies.

Each worker is a Ray actor: one process, started with the environment the driver hands it (the hash seed and
TensorFlow's import-time settings must be in place before its interpreter and TensorFlow start), started as
early as the driver can (`start`) so its imports overlap the driver's own preparation, set up once with what
the jobs share and then given job after job: TensorFlow's start-up is paid once per worker, not once per job. A worker that
dies mid-job (SIGKILL, out of memory, a lost node) is replaced where the live cluster has room and its job tried
again on the first worker free, up to `compute.max_retries` times; a worker with no job left is released, so it
holds no CPU that a retry or another job needs. With `compute.address: null` a private Ray starts on this machine
and stops with the pool, its servers (GCS, raylets, workers, the runtime-env agent) listening on 127.0.0.1 only;
otherwise the pool joins the cluster there, the project's code travels to its nodes as the job's `working_dir`
(Ray takes directories at the job level only), and its actors end when the pool does. A private Ray keeps its
session (logs, sockets) in a folder only this user can enter, removed when the pool ends. Credentials (the MLflow
settings) reach each worker as an argument of its first call, never through Ray's `runtime_env`, whose variables
Ray writes to its logs.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from tracking.compute.head import START_ONE, head_lost, require_answer
from tracking.compute.upload import job_runtime_env
from tracking.config.params import ComputeParams
from tracking.env import RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER, RAY_USAGE_STATS_ENABLED
from tracking.errors import ComputeError, TrackingError
from tracking.store.location import is_local_store

log = logging.getLogger(__name__)

PRIVATE = "local"  # Ray's address for a new cluster of this process's own
AUTO = "auto"  # Ray's address for the cluster this machine is a node of
# Where a private Ray's session folder goes: Ray's own default parent (its socket paths must stay short).
PRIVATE_TEMP_PARENT = "/tmp"


class RayPool:
    """A Ray cluster joined (or a private one started) for the pool's lifetime, with its size worked out."""

    def __init__(self, compute: ComputeParams, uri: str, root: Path) -> None:
        self.compute = compute
        self.uri = uri
        self.root = root
        self.temp: Path | None = None
        self.idle: list[tuple[Any, Any]] = []  # the workers `start` started, none until then

    def __enter__(self) -> RayPool:
        os.environ.setdefault(RAY_USAGE_STATS_ENABLED, "0")  # nothing leaves the machine unasked
        if self.compute.address is None:  # nothing on this machine's network needs to reach a private Ray
            os.environ.setdefault(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER, "0")
        try:
            import ray
        except ImportError as err:
            raise ComputeError(
                "compute.executor is ray, but Ray is not installed",
                fix="install the cluster extra (`pip install 'tracking[cluster]'`; make installs it) or set "
                "compute.executor: local",
            ) from err
        self.ray = ray
        address = self.compute.address
        if address and address != AUTO:
            require_answer(address)
        options: dict[str, Any] = {}
        if address is None:  # Ray makes its folders 0777: they sit in one of ours (0700) that nobody else enters
            self.temp = Path(tempfile.mkdtemp(prefix="tracking-ray-", dir=PRIVATE_TEMP_PARENT))
            options["_temp_dir"] = str(self.temp / "ray")
        else:  # any node, now or joining later, imports the project's code from this upload
            options["runtime_env"] = job_runtime_env(self.root)
        try:
            # "local": a Ray of our own even where another runs here (None would join RAY_ADDRESS or the last
            # `ray start`).
            ray.init(
                address=address or PRIVATE,
                include_dashboard=False,
                logging_level=logging.WARNING,
                log_to_driver=True,
                **options,
            )
        except (ConnectionError, RuntimeError, ValueError) as err:
            self._remove_temp()
            why = str(err).splitlines()[0] if str(err) else type(err).__name__
            if address is None:
                raise ComputeError(
                    f"compute.address null: a private Ray could not start on this machine ({why})",
                    fix="see Ray's message above, or set compute.executor: local",
                ) from err
            raise ComputeError(
                f"compute.address {address}: no Ray cluster answers there ({why})",
                fix=START_ONE,
            ) from err
        try:
            self._check()
        except BaseException:
            ray.shutdown()
            self._remove_temp()
            raise
        if address is None:
            self._say_where_private_ray_listens()
        return self

    def _say_where_private_ray_listens(self) -> None:
        """Warn when a private Ray listens beyond loopback: Ray was imported before the pool (in a team's script)
        or the user set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER, so its servers took the machine's address."""
        (node,) = [node for node in self.ray.nodes() if node.get("Alive")]
        if node["NodeManagerAddress"] not in ("127.0.0.1", "::1"):
            log.warning(
                "the private Ray listens on %s, reachable from this machine's network, not on 127.0.0.1 only: Ray "
                "was imported before the executor could set %s=0 (or it is set otherwise); set it before importing Ray",
                node["NodeManagerAddress"],
                RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER,
            )

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.ray.shutdown()  # seconds, the head lost or not
        self._remove_temp()

    def _remove_temp(self) -> None:
        """Remove a private Ray's session folder (its logs and sockets): nothing of it outlives the pool."""
        if self.temp is not None:
            shutil.rmtree(self.temp, ignore_errors=True)
            self.temp = None

    def _check(self) -> None:
        """Refuse a store the other nodes cannot reach, and an accelerator type no node has."""
        nodes = [node for node in self.ray.nodes() if node.get("Alive")]
        self.remote_nodes = len(nodes) > 1
        if self.remote_nodes and is_local_store(self.uri):
            raise ComputeError(
                f"the Ray cluster at {self.compute.address or 'this machine'} has {len(nodes)} nodes, and the MLflow "
                f"store {self.uri} is a local file the other nodes cannot reach",
                fix="set MLFLOW_TRACKING_URI to an `mlflow server` every node reaches (docs/cluster.md)",
            )
        self.resources = self.ray.cluster_resources()
        wanted = self.compute.accelerator_type
        if wanted and f"accelerator_type:{wanted}" not in self.resources:
            found = sorted(name.split(":", 1)[1] for name in self.resources if name.startswith("accelerator_type:"))
            raise ComputeError(
                f"compute.accelerator_type {wanted}: no node of the Ray cluster has it (found: {', '.join(found) or 'none'})",
                fix="name one of those, or set compute.accelerator_type: null",
            )

    @property
    def gpus_per_run(self) -> float:
        """`compute.gpus_per_run`, or 1 where the cluster has GPUs and 0 where it has none."""
        if self.compute.gpus_per_run is not None:
            return self.compute.gpus_per_run
        return 1.0 if self.resources.get("GPU", 0) > 0 else 0.0

    def fits(self, resources: dict[str, float]) -> int:
        """How many workers of `compute.cpus_per_run` and `gpus_per_run` the cluster's `resources` hold at once."""
        fits = [int(resources.get("CPU", 0) // self.compute.cpus_per_run)]
        if self.gpus_per_run > 0:
            fits.append(int(resources.get("GPU", 0) // self.gpus_per_run))
        return min(fits)

    def size(self, jobs: int) -> int:
        """Concurrent workers: `compute.workers`, or as many as the cluster's CPUs and GPUs fit; never more than
        the jobs."""
        if self.compute.workers is not None:
            return max(1, min(self.compute.workers, jobs))
        fits = self.fits(self.resources)
        if fits < 1:
            raise ComputeError(
                f"the Ray cluster ({self.resources.get('CPU', 0):g} CPUs, {self.resources.get('GPU', 0):g} GPUs) "
                f"cannot fit one worker of compute.cpus_per_run {self.compute.cpus_per_run:g} and "
                f"compute.gpus_per_run {self.gpus_per_run:g}",
                fix="lower them or add nodes",
            )
        return max(1, min(fits, jobs))

    def start(self, worker_class: type, jobs: int, env: dict[str, str], private: dict[str, str]) -> None:
        """Start the workers for `jobs` jobs now, each a process with `env` that starts its `worker_class()` (the
        imports: TensorFlow's start-up), so that this overlaps whatever the caller does before `run`. `private`
        (credentials) is set in each worker's environment by its first call, before its set-up."""
        self.private = private
        options: dict[str, Any] = {
            "num_cpus": self.compute.cpus_per_run,
            "num_gpus": self.gpus_per_run,
            "max_restarts": 0,
            "runtime_env": self._runtime_env(env),
        }
        if self.compute.accelerator_type:
            options["accelerator_type"] = self.compute.accelerator_type
        self.remote = self.ray.remote(worker_class).options(**options)
        self.idle = [self._start() for _ in range(self.size(jobs))]

    def run(
        self,
        spec: Any,
        jobs: list[Hashable],
        label: Callable[[Hashable], str],
        on_lost: Callable[[Hashable, int, str], None],
        show: Callable[[str], None],
        affinity: Callable[[Hashable], Hashable] = lambda job: None,
        on_set_up: Callable[[Any], None] = lambda answer: None,
    ) -> Iterator[tuple[Hashable, Any]]:
        """Set every started worker up with `spec` (its `private` variables, then `setup(spec)`, once), run
        each job as `run(job, attempt)` on them, and yield (job, result) as each finishes. A dead worker's job is
        reported to `on_lost(job, attempt, why)` and tried again on the first worker free: one still up, or a
        replacement started where the live cluster has room (a lost node's CPUs are gone), given a job only once it
        is up, so no job waits on a worker that cannot be placed. A worker with no job left is released. `show`
        gets a line of what runs where. A worker is given jobs of one `affinity` (what it has set up for them)
        while there are any, then those of an affinity no other worker holds. A job out of tries stops the rest
        from starting; the running ones finish and are yielded before its `ComputeError` is raised. `on_set_up` gets
        what `setup(spec)` returned on the worker of the first job to end, once, before that job is yielded."""
        ray = self.ray
        spec_ref = ray.put(spec)
        idle = [self._set_up(worker, spec_ref) for worker in self.idle]
        starting: dict[Any, tuple[Any, Any, Any]] = {}  # replacements by their `where()`, until it answers
        queue, attempts = deque(jobs), dict.fromkeys(jobs, 1)
        running: dict[Any, tuple[tuple[Any, Any, Any], Hashable]] = {}
        last: dict[Any, Hashable] = {}
        failure: ComputeError | None = None
        try:
            while running or (queue and failure is None):
                while idle and queue and failure is None:
                    worker = idle.pop()
                    held = {affinity(job) for _, job in running.values()}
                    job = _pick(queue, last.get(worker[0]), held, affinity)
                    last[worker[0]] = affinity(job)
                    running[worker[0].run.remote(job, attempts[job])] = (worker, job)
                if not queue or failure is not None:  # no job left to start: free their CPUs and GPUs
                    self._release([*idle, *starting.values()])
                    idle, starting = [], {}
                show(self._where(running, label))
                (done,), _ = ray.wait([*running, *starting], num_returns=1)
                if done in starting:  # a replacement is up (or failed to start: its first job says so)
                    idle.append(starting.pop(done))
                    continue
                worker, job = running.pop(done)
                try:
                    result = ray.get(done)
                except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as err:
                    lost = head_lost(ray)
                    if lost is not None:  # the cluster is gone: no worker to release, no retry
                        idle, starting = [], {}
                        raise lost from None
                    ray.kill(worker[0])  # where only its result was lost with a node, the worker goes too
                    why = self._why(err)
                    on_lost(job, attempts[job], why)
                    if attempts[job] > self.compute.max_retries:
                        failure = failure or ComputeError(
                            f"{label(job)}: its worker died on each of {attempts[job]} tries (last: {why})",
                            fix="see the failed child runs' `error` tag, or raise compute.max_retries",
                        )
                        continue
                    attempts[job] += 1
                    queue.appendleft(job)
                    if len(running) + len(idle) + len(starting) < self._wanted(len(running) + len(queue)):
                        replacement = self._set_up(self._start(), spec_ref)
                        starting[replacement[1]] = replacement
                    continue
                except ray.exceptions.RayTaskError as err:
                    # A job that failed as the head went failed for its loss: the node's copy of the project is
                    # removed under a running worker, whose next import then fails (ModuleNotFoundError).
                    lost = head_lost(ray)
                    if lost is not None:
                        idle, starting = [], {}
                        raise lost from None
                    raise self._error(worker, err) from None
                if on_set_up is not None:
                    on_set_up(ray.get(worker[2]))  # done: the worker's calls run in order
                    on_set_up = None
                idle.append(worker)
                yield job, result
        finally:
            self._release([*idle, *starting.values()])
        if failure is not None:
            raise failure  # after the running jobs finished and were handed over: nothing else is lost

    def _wanted(self, jobs: int) -> int:
        """Workers for `jobs` jobs (running or queued) now: as many as the live cluster holds (a lost node's
        resources no longer count), within `compute.workers`; at least one, which waits for a node to join."""
        room = self.fits(self.ray.cluster_resources())
        if self.compute.workers is not None:
            room = min(room, self.compute.workers)
        return max(1, min(room, jobs))

    def _release(self, workers: list[tuple[Any, Any, Any]]) -> None:
        """End `workers` (idle, or not up yet), so they hold nothing another job or a retry needs."""
        for worker in workers:
            self.ray.kill(worker[0])

    def _runtime_env(self, env: dict[str, str]) -> dict[str, Any]:
        """The workers' environment variables (merged with the job's `runtime_env`, whose `working_dir` a joined
        cluster's workers import the project from); a private Ray's workers import it from the project itself."""
        if self.compute.address is not None:
            return {"env_vars": env}
        return {"env_vars": {**env, "PYTHONPATH": os.pathsep.join([str(self.root), os.environ.get("PYTHONPATH", "")])}}

    def _start(self) -> tuple[Any, Any]:
        """A new worker, and the reference its `where()` (node and process) will answer on."""
        actor = self.remote.remote()
        return actor, actor.where.remote()

    def _set_up(self, worker: tuple[Any, Any], spec_ref: Any) -> tuple[Any, Any, Any]:
        """Queue the worker's private variables and its `setup(spec)`, whose reference joins it; its jobs queue
        behind it (an actor runs its calls in order). The variables go as a call's argument: Ray logs a
        `runtime_env`, not the arguments of a call."""
        worker[0].__ray_call__.remote(_set_environment, self.private)
        return (*worker, worker[0].setup.remote(spec_ref))

    def _error(self, worker: tuple[Any, Any, Any], err: Any) -> BaseException:
        """What to raise for a job that raised: its worker's set-up error if the set-up failed, else the job's; a
        `TrackingError` as itself (one line for the user), anything else with the worker's traceback."""
        try:
            self.ray.get(worker[2])
        except self.ray.exceptions.RayTaskError as failed:
            err = failed
        return err.cause if isinstance(err.cause, TrackingError) else err.as_instanceof_cause()

    def _where(
        self, running: dict[Any, tuple[tuple[Any, Any, Any], Hashable]], label: Callable[[Hashable], str]
    ) -> str:
        """`<node>:<pid> <job>` for every running job whose worker has started."""
        parts = []
        for (_, where_ref, _), job in running.values():
            ready, _ = self.ray.wait([where_ref], timeout=0)
            try:
                where = self.ray.get(where_ref) if ready else "starting"
            except self.ray.exceptions.RayError:
                where = "lost"
            parts.append(f"{where} {label(job)}")
        return "; ".join(parts)

    @staticmethod
    def _why(err: Exception) -> str:
        """The first line of a Ray actor error: what killed the worker."""
        return next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)


def _set_environment(worker: object, variables: dict[str, str]) -> None:
    """Run in a worker (Ray's `__ray_call__`): put `variables` into its process's environment."""
    os.environ.update(variables)


def _pick(queue: deque, last: Hashable, held: set, affinity: Callable[[Hashable], Hashable]) -> Hashable:
    """Take from `queue` the job for a worker whose last job had affinity `last` (None: a new worker): the first of
    that affinity, else the first of an affinity no running job has, else the first."""
    same = (job for job in queue if last is not None and affinity(job) == last)
    free = (job for job in queue if affinity(job) not in held)
    job = next(same, None) or next(free, None) or queue[0]
    queue.remove(job)
    return job
