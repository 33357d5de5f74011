"""PyTorch as Keras's backend: cuBLAS's workspace set before CUDA starts, then deterministic algorithms, cuDNN
without benchmarking, and the thread counts, each read back from PyTorch.

With `determinism.op_determinism`, `torch.use_deterministic_algorithms(True)` makes an op with no deterministic
version raise (its message names the op, and the stages turn it into one `error:` line); cuDNN's benchmark
mode, which times kernels and keeps the fastest, stays off either way so the kernel choice does not vary by run.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from tracking.config.params import DeterminismParams
from tracking.determinism.backend import TORCH, EffectiveDeterminism
from tracking.env import CUBLAS_WORKSPACE_CONFIG

# The workspace that makes cuBLAS's GEMMs deterministic (PyTorch's reproducibility notes, CUDA 10.2 and later).
DETERMINISTIC_WORKSPACE = ":4096:8"


# CUDA starts at the first GPU work, not when torch is imported: nothing is read too early by importing it.
STARTED_BY = None


def import_time_environment(params: DeterminismParams) -> dict[str, str]:
    """cuBLAS's deterministic workspace (read when CUDA starts) where op determinism is asked for, unless the team
    set a workspace of their own."""
    if not params.op_determinism:
        return {}
    return {CUBLAS_WORKSPACE_CONFIG: os.environ.get(CUBLAS_WORKSPACE_CONFIG) or DETERMINISTIC_WORKSPACE}


def configure_environment(params: DeterminismParams) -> None:
    """Set cuBLAS's deterministic workspace (read when CUDA starts) where op determinism is asked for."""
    os.environ.update(import_time_environment(params))


def apply(params: DeterminismParams) -> EffectiveDeterminism:
    """Set PyTorch's deterministic algorithms, cuDNN's modes, oneDNN and threads; return what is in force."""
    import torch

    torch.use_deterministic_algorithms(params.op_determinism)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = params.op_determinism
    torch.backends.mkldnn.enabled = params.onednn
    if params.intra_op_threads:
        torch.set_num_threads(params.intra_op_threads)
    if params.inter_op_threads and torch.get_num_interop_threads() != params.inter_op_threads:
        # PyTorch's inter-op pool may already run (a second run in one process): then what is in force is read back.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(params.inter_op_threads)
    return effective()


def effective() -> EffectiveDeterminism:
    """What PyTorch has in force now."""
    import torch

    return EffectiveDeterminism(
        op_determinism=torch.are_deterministic_algorithms_enabled(),
        intra_op_threads=torch.get_num_threads(),
        inter_op_threads=torch.get_num_interop_threads(),
        onednn=bool(torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()),
        backend=TORCH,
        details={
            "cudnn_benchmark": str(torch.backends.cudnn.benchmark).lower(),
            "cudnn_deterministic": str(torch.backends.cudnn.deterministic).lower(),
            "cublas_workspace_config": os.environ.get(CUBLAS_WORKSPACE_CONFIG, ""),
        },
    )


def visible_gpus() -> list[dict[str, Any]]:
    """The GPUs PyTorch sees, with their name and compute capability."""
    import torch

    if not torch.cuda.is_available():
        return []
    return [
        {
            "name": torch.cuda.get_device_name(index),
            "device": f"cuda:{index}",
            "compute_capability": ".".join(map(str, torch.cuda.get_device_capability(index))),
        }
        for index in range(torch.cuda.device_count())
    ]


def build() -> dict[str, Any]:
    """PyTorch's version and the CUDA/cuDNN it was built with (None on a CPU build)."""
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"version": torch.__version__, "cuda_version": torch.version.cuda, "cudnn_version": cudnn}
