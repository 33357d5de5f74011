"""A script's process set up as our stages' are: the hash seed and the backend's start-up settings fixed at start.

Each is read once: PYTHONHASHSEED when the interpreter starts, TF_ENABLE_ONEDNN_OPTS when TensorFlow is imported,
XLA_FLAGS when JAX starts. A script that imported Keras before calling `tracking.start` (the usual order of imports)
is restarted once with them set, so its imports need not move; one that cannot restart (its code came from stdin or a prompt) gets one
error line saying what would be lost and how to order its imports, and a notebook's kernel one naming the kernel
that starts with them set (`tracking kernel install`).
"""

from __future__ import annotations

import os
import sys

from tracking.config.params import DeterminismParams
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import configure_environment, import_time_environment, started
from tracking.env import PYTHONHASHSEED, TF_CPP_MIN_LOG_LEVEL, TF_ENABLE_ONEDNN_OPTS, TRACKING_KERNEL, XLA_FLAGS
from tracking.errors import UsageError

# The start-up variables a run of this process was set up with: a later run that asks for others cannot have them
# (a restart would run the earlier runs again, and they would restart it back: for ever).
_set_up: dict[str, str] = {}


def reproducible_script(seeds: Seeds, determinism: DeterminismParams) -> None:
    """Restart this interpreter once when its hash seed, or a variable its backend already read at start-up
    (TensorFlow's oneDNN switch, XLA's flags), is not what the run asks for; then set the backend's import-time
    variables (tracking/determinism/settings.py). A second run of the process that asks for other ones is refused."""
    wanted = start_environment(seeds, determinism)
    late = started(determinism.backend)
    lost = [name for name in missing(wanted) if name == PYTHONHASHSEED or late]
    if lost and _set_up:
        raise UsageError(
            "tracking.start(): an earlier run of this process set it up with "
            + ", ".join(f"{name}={_set_up.get(name, 'unset')}" for name in lost)
            + f", and this run asks for {', '.join(f'{name}={wanted[name]}' for name in lost)}",
            fix="give the runs of one process the same seeds.base and determinism, or start each in its own process",
        )
    if lost:
        if in_a_kernel() and os.environ.get(TRACKING_KERNEL):
            raise UsageError(
                f"tracking.start(): {describe_loss(lost, wanted)}: the project's kernel started with the seeds "
                "params.yaml held then, and a kernel cannot restart itself",
                fix="restart the kernel (Kernel > Restart) so it starts with the seeds this call gives",
            )
        if in_a_kernel():
            raise UsageError(
                f"tracking.start(): {describe_loss(lost, wanted)}, and a notebook's kernel cannot restart itself",
                fix="run the notebook on the project's kernel, which starts Python with them set from params.yaml: "
                "`tracking kernel install --seeds base=<your seed's key>` (the seeds and determinism this call "
                "gives), then pick it in Jupyter, or restart it after a change of the seeds",
            )
        if not restartable():
            raise UsageError(
                f"tracking.start(): {describe_loss(lost, wanted)}, and this interpreter cannot restart itself "
                "(its code came from stdin or a prompt)",
                fix="call tracking.start(...) before importing keras or tensorflow, or start Python with "
                + " ".join(f"{name}={wanted[name]}" for name in lost),
            )
        restart({TF_CPP_MIN_LOG_LEVEL: "2", **os.environ, **wanted})  # TensorFlow's start-up chatter, as our stages
    configure_environment(determinism)
    _set_up.update({name: os.environ.get(name, "unset") for name in wanted})


def in_a_kernel() -> bool:
    """Whether this Python is a Jupyter kernel (a notebook's): its code comes cell by cell, not from a file, and it
    cannot restart itself."""
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    return kernelapp is not None and kernelapp.IPKernelApp.initialized()


def start_environment(seeds: Seeds, determinism: DeterminismParams) -> dict[str, str]:
    """The variables a run's interpreter must start with: the hash seed, and those its backend reads once (a script
    restarts itself with them; a notebook's kernel is started with them, tracking/script/kernel.py)."""
    return {PYTHONHASHSEED: str(seeds.hash), **import_time_environment(determinism)}


def missing(wanted: dict[str, str]) -> list[str]:
    """The variables of `wanted` the environment does not hold with their wanted value."""
    return [name for name, value in wanted.items() if os.environ.get(name) != value]


def describe_loss(names: list[str], wanted: dict[str, str]) -> str:
    """What running on without `names` set would lose, in words."""
    said = []
    if PYTHONHASHSEED in names:
        said.append(f"Python's hash seed is not {wanted[PYTHONHASHSEED]} (set order and hashes would vary by run)")
    if TF_ENABLE_ONEDNN_OPTS in names:
        said.append(
            f"TensorFlow was imported with {TF_ENABLE_ONEDNN_OPTS}={os.environ.get(TF_ENABLE_ONEDNN_OPTS, 'unset')} "
            f"where the run asks for {wanted[TF_ENABLE_ONEDNN_OPTS]} (oneDNN's CPU kernels change results, so the "
            "run would not be bit-reproducible)"
        )
    if XLA_FLAGS in names:
        said.append(
            f"JAX started with {XLA_FLAGS}={os.environ.get(XLA_FLAGS, 'unset')!r} where the run asks for "
            f"{wanted[XLA_FLAGS]!r} (XLA reads them once, so the run's determinism would not be what it records)"
        )
    return "; ".join(said)


def restartable() -> bool:
    """Whether re-executing `sys.orig_argv` runs this program again: not for code read from stdin or a prompt."""
    return (
        bool(sys.argv) and sys.argv[0] not in ("", "-") and not hasattr(sys, "ps1") and "ipykernel" not in sys.modules
    )


def restart(env: dict[str, str]) -> None:
    """Re-execute this interpreter with its own arguments and `env` (it never returns)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
