"""What a training run records of where it ran: the executor, the node, the process and the GPUs it could use.

The tags let the MLflow compare view line up repeats by machine, so a band widened by one odd node or GPU
model shows which runs came from it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from tracking.names import COMPUTE_EXECUTOR_TAG, COMPUTE_GPU_TAG, COMPUTE_NODE_TAG, COMPUTE_PROCESS_TAG

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


def placement_tags(executor: str, gpu_record: dict[str, Any], node_address: str | None = None) -> dict[str, str]:
    """The compute.* tags of a run trained in this process; `gpu_record` is provenance's `gpu` section, gathered
    in this process (the backend's visible GPUs honour the CUDA_VISIBLE_DEVICES a scheduler set)."""
    host = socket.gethostname()
    visible = gpu_record.get("backend_visible") or []
    ids = os.environ.get(CUDA_VISIBLE_DEVICES, "")
    gpus = ", ".join(device.get("name", "?") for device in visible)
    return {
        COMPUTE_EXECUTOR_TAG: executor,
        COMPUTE_NODE_TAG: f"{host} ({node_address})" if node_address else host,
        COMPUTE_PROCESS_TAG: str(os.getpid()),
        COMPUTE_GPU_TAG: (f"{ids}: {gpus}" if ids else gpus) if visible else "none",
    }
