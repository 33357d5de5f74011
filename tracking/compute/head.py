"""Whether a Ray cluster's head answers: before the pool joins it, and when a worker is lost mid-job.

Ray retries a head that does not answer for minutes before it joins, so a `compute.address` where nothing
listens is refused at once (`require_answer`). Once joined, a lost head (its machine down, its processes
killed) takes the cluster's control store (GCS) with it: the driver's calls to the workers fail at once, and Ray
ends the driver's process when the GCS has not answered for 60 s (`gcs_rpc_server_reconnect_timeout_s`), with
no Python clean-up, leaving the stage's MLflow run RUNNING. So a worker lost mid-job is checked against the head
(`head_lost`): where the head is gone too, the stage stops at once with one line, its run ended FAILED, rather
than retrying on a cluster that no longer exists.
"""

from __future__ import annotations

import socket
from typing import Any

from tracking.errors import ComputeError

CONNECT_TIMEOUT_S = 5.0  # Ray itself retries an address that does not answer for many minutes
START_ONE = "start one with `ray start --head` (docs/cluster.md) or set compute.address: null for a private one"


def require_answer(address: str) -> None:
    """Refuse at once a `host:port` where nothing accepts a connection (Ray would retry it for minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ComputeError(
            f"compute.address {address}: expected host:port (e.g. 10.0.0.5:6379), auto, or null",
            fix="set it in params.yaml",
        )
    why = _refused(host, int(port))
    if why is not None:
        raise ComputeError(f"compute.address {address}: no Ray cluster answers there ({why})", fix=START_ONE)


def head_lost(ray: Any) -> ComputeError | None:
    """The error to stop with when the head of the cluster this process joined no longer accepts connections to
    its GCS; None while it does."""
    address = ray.get_runtime_context().gcs_address
    host, _, port = address.rpartition(":")
    why = _refused(host, int(port))
    if why is None:
        return None
    return ComputeError(
        f"the Ray cluster's head at {address} stopped answering ({why}): the repeats in flight are lost with it, "
        "and Ray would end this process within 60 s; the repeats finished so far are kept",
        fix="start the head again (`ray start --head`, and the worker nodes with `ray start --address`), then "
        "re-run: the kept repeats are not trained again",
    )


def _refused(host: str, port: int) -> str | None:
    """Why a connection to `host:port` failed, or None when it was accepted."""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        return err.strerror or str(err)
    return None
