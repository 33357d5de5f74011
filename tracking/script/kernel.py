"""`tracking kernel install`: a Jupyter kernel that starts Python as `tracking.start` needs it, for notebooks.

A script that imported Keras first is restarted by `tracking.start` with the hash seed and the backend's start-up
variables set (tracking/script/interpreter_setup.py); a notebook's kernel cannot restart itself, and its user does
not start its Python. The kernel this installs does: at each start (and restart) it reads the project's params
file as `tracking.start(params=..., seeds=..., determinism=...)` will, in the folder Jupyter starts it in, sets
PYTHONHASHSEED and the backend's start-up variables, then becomes an ordinary IPython kernel. `tracking.start` in
it then finds everything set and needs no restart: the run is as reproducible as a script's. After a change of the
seeds in params.yaml, restart the kernel (`tracking.start` says so). A kernel that `tracking calibrate` starts (through
a `jupyter execute` stage) starts with its repeat's seeds, as `tracking.start` will ask for them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracking.env import DEFAULT_KERNEL, TRACKING_KERNEL
from tracking.errors import TrackingError, UsageError


def kernel_spec(params: str, seeds: Mapping[str, str | int], determinism: Mapping[str, Any], name: str) -> dict:
    """The kernel.json of a kernel started through this module with `params`, `seeds` and `determinism`."""
    return {
        "argv": [
            sys.executable,
            "-m",
            __name__,
            "--params",
            params,
            "--seeds",
            json.dumps(dict(seeds)),
            "--determinism",
            json.dumps(dict(determinism)),
            "-f",
            "{connection_file}",
        ],
        "display_name": f"Python ({name}: tracking.start ready)",
        "language": "python",
        "metadata": {"debugger": True},
    }


def install_kernel(
    params: str,
    seeds: Mapping[str, str | int],
    determinism: Mapping[str, Any],
    name: str = DEFAULT_KERNEL,
    prefix: Path | None = None,
    user: bool = False,
) -> Path:
    """Install the kernel spec under Jupyter's kernels (this environment's, `prefix`'s, or the user's); return
    where it went. The seeds mapping is checked against the params file here, so a typo is said now."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError as err:
        raise UsageError(
            "tracking kernel install: jupyter_client is not installed", fix="pip install ipykernel"
        ) from err
    kernel_environment(params, seeds, determinism)
    with tempfile.TemporaryDirectory(prefix="tracking-kernel-") as folder:
        (Path(folder) / "kernel.json").write_text(json.dumps(kernel_spec(params, seeds, determinism, name), indent=1))
        where = KernelSpecManager().install_kernel_spec(
            folder, name, user=user, prefix=None if user else str(prefix or sys.prefix)
        )
    return Path(where)


def kernel_environment(params: str, seeds: Mapping[str, str | int], determinism: Mapping[str, Any]) -> dict[str, str]:
    """The variables a kernel starts with for `tracking.start(params, seeds, determinism)` in the project that
    holds the current folder: the hash seed and the backend's start-up variables it will ask for (a calibration
    repeat's seeds where `tracking calibrate` started it)."""
    from tracking.script.interpreter_setup import start_environment
    from tracking.script.repeat_context import repeat_from_env
    from tracking.script.run import script_determinism
    from tracking.script.team_params import read_params
    from tracking.store.location import find_project

    root = find_project() or Path.cwd()
    read = read_params(root / params, seeds)
    repeat = repeat_from_env()
    chosen = repeat.seeds(read.seeds) if repeat is not None else read.seeds
    return start_environment(chosen, script_determinism(determinism))


def launch(argv: Sequence[str]) -> None:
    """Start an IPython kernel with the project's start-up variables set (never returns). A params file that cannot
    be read starts it without them, the line said on stderr; `tracking.start` in the notebook says it again."""
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--seeds", type=json.loads, default={})
    parser.add_argument("--determinism", type=json.loads, default={})
    parser.add_argument("-f", dest="connection_file", required=True)
    args = parser.parse_args(argv)
    env = {**os.environ, TRACKING_KERNEL: "1"}
    try:
        env.update(kernel_environment(args.params, args.seeds, args.determinism))
    except TrackingError as err:
        from tracking.entry import say_error  # the `error:` line as every command prints it, redacted

        say_error(err)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", args.connection_file], env)


if __name__ == "__main__":
    launch(sys.argv[1:])
