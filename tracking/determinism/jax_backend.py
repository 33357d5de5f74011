"""JAX as Keras's backend: XLA's flags set before JAX starts, then read back with JAX's random-number settings.

XLA reads `XLA_FLAGS` once, when JAX starts its first backend, so what a process starts with is what all its
runs get: `determinism.op_determinism` adds `--xla_gpu_exclude_nondeterministic_ops=true` (deterministic
scatter, GEMM, convolution and attention kernels on a GPU; compilation fails on an op that has none), and
`intra_op_threads: 1` adds `--xla_cpu_multi_thread_eigen=false` (one thread for the CPU's matrix kernels). A
team's own flags are kept. The effective record reads the flags JAX started with, so a repeat that asks for other
determinism than its process started with is recorded as running with what it got.
"""

from __future__ import annotations

import os
from typing import Any

from tracking.config.params import DeterminismParams
from tracking.determinism.backend import JAX, EffectiveDeterminism
from tracking.env import XLA_FLAGS

DETERMINISTIC_OPS = "--xla_gpu_exclude_nondeterministic_ops"
ONE_THREAD = "--xla_cpu_multi_thread_eigen"
# The flags this module owns: set from params, replacing any value of theirs the environment held.
OWN_FLAGS = (DETERMINISTIC_OPS, ONE_THREAD)
# The flags JAX started with in this process (XLA reads them once): set when JAX is first configured here.
_started_with: str | None = None


# The module whose import may start XLA (Keras's JAX backend makes arrays when imported): then its flags are read.
STARTED_BY = "jax"


def import_time_environment(params: DeterminismParams) -> dict[str, str]:
    """`XLA_FLAGS` with the determinism and thread flags of `params`, the team's other flags kept."""
    kept = [flag for flag in os.environ.get(XLA_FLAGS, "").split() if flag.split("=", 1)[0] not in OWN_FLAGS]
    own = [f"{DETERMINISTIC_OPS}={str(params.op_determinism).lower()}"]
    if params.intra_op_threads == 1:
        own.append(f"{ONE_THREAD}=false")
    return {XLA_FLAGS: " ".join([*kept, *own])}


def configure_environment(params: DeterminismParams) -> None:
    """Put the determinism and thread flags into `XLA_FLAGS` (the team's other flags kept), before JAX starts."""
    os.environ.update(import_time_environment(params))


def apply(params: DeterminismParams) -> EffectiveDeterminism:
    """Start JAX (with the flags set by `configure_environment`) and return what is in force."""
    global _started_with
    import jax

    if _started_with is None:
        _started_with = os.environ.get(XLA_FLAGS, "")
        jax.devices()  # starts the backend: XLA reads its flags now
    return effective()


def effective() -> EffectiveDeterminism:
    """The determinism JAX runs with: read from the flags its backend started with."""
    import jax

    flags = dict(flag.split("=", 1) if "=" in flag else (flag, "true") for flag in (_started_with or "").split())
    return EffectiveDeterminism(
        op_determinism=flags.get(DETERMINISTIC_OPS, "false").lower() in ("true", "1"),
        intra_op_threads=1 if flags.get(ONE_THREAD, "true").lower() in ("false", "0") else 0,
        inter_op_threads=0,
        onednn=False,
        backend=JAX,
        details={
            "xla_flags": _started_with or "",
            "default_prng_impl": str(jax.config.jax_default_prng_impl),
            "threefry_partitionable": str(jax.config.jax_threefry_partitionable).lower(),
            "platform": jax.default_backend(),
        },
    )


def visible_gpus() -> list[dict[str, Any]]:
    """The GPUs JAX sees, with their kind and compute capability."""
    import jax

    try:
        devices = jax.devices("gpu")
    except RuntimeError:  # no GPU backend in this jaxlib, or no GPU
        return []
    return [
        {
            "name": device.device_kind,
            "device": str(device),
            "compute_capability": getattr(device, "compute_capability", None),
        }
        for device in devices
    ]


def build() -> dict[str, Any]:
    """JAX's and jaxlib's versions, the CUDA/cuDNN its GPU plugin reports (None without one) and the platform
    version its runtime reports (on a GPU, the CUDA it runs on)."""
    import jax
    import jaxlib

    cuda = cudnn = None
    if visible_gpus():
        from jax._src.lib import cuda_versions

        if cuda_versions is not None:
            cuda = str(cuda_versions.cuda_runtime_get_version())
            cudnn = str(cuda_versions.cudnn_get_version())
    client = jax.devices()[0].client
    return {
        "version": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "cuda_version": cuda,
        "cudnn_version": cudnn,
        "platform_version": " ".join(str(getattr(client, "platform_version", "")).split()),
    }
