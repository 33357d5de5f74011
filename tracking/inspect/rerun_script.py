"""`tracking rerun RUN` for a run of a team's own script (`tracking.start`): its stage or command, run again.

The run is re-created as our stages' runs are (tracking/inspect/rerun.py): a temporary git worktree at the logged
commit with the logged diff applied, the params file made to hold the logged params; then the command the run
recorded runs there (`dvc repro --single-item --force <stage>` when DVC ran it, else the script's own command line),
logging to the user's store and experiment with the new run tagged `rerun_of`. The script loads its own data, so
the data is checked afterwards, by the content hash both runs logged (`tracking diff`'s data group).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.env import DEFAULT_KERNEL, KERAS_BACKEND, TRACKING_EXPERIMENT, TRACKING_RERUN_OF
from tracking.errors import RerunError
from tracking.names import (
    BACKEND_TAG,
    NOTEBOOK_COMMAND,
    RERUN_OF_TAG,
    SCRIPT_COMMAND_TAG,
    SCRIPT_PARAMS_TAG,
    SCRIPT_STAGE_TAG,
    tag_is,
)
from tracking.noise.run_name import rerun_name
from tracking.store.reads import experiment_by_id, newest_run

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from tracking.inspect.diff import RunSnapshot

STEPS = ("worktree", "code", "params", "run")


def is_script_run(original: RunSnapshot) -> bool:
    """Whether `original` (a `RunSnapshot`) is a run a team's script opened with `tracking.start`."""
    return SCRIPT_COMMAND_TAG in original.tags


def script_command(original: RunSnapshot) -> list[str]:
    """What re-creates the run: DVC's stage when DVC ran the script, else the script's own command line."""
    stage = original.tags.get(SCRIPT_STAGE_TAG)
    if stage:
        return [sys.executable, "-m", "dvc", "repro", "--quiet", "--single-item", "--force", stage]
    if original.tags[SCRIPT_COMMAND_TAG] == NOTEBOOK_COMMAND:
        raise RerunError(
            f"run {original.run_id} was made in a Jupyter notebook, whose cells are not recorded, so no command "
            "re-creates it (its kernel's arguments name only the kernel's connection file)",
            fix="run the notebook top to bottom at the run's commit on the project's kernel (`jupyter execute "
            f"--kernel_name={DEFAULT_KERNEL} NOTEBOOK.ipynb`, nbclient's), then `tracking diff` the two runs",
        )
    return [sys.executable, *shlex.split(original.tags[SCRIPT_COMMAND_TAG])]


def teams_params(logged: dict[str, str], path: Path) -> tuple[dict[str, str], list[str]]:
    """The logged params the team's params file at the run's commit (and diff) holds, and the keys of the others:
    what code beside `tracking.start` logged into the run (MLflow's autolog before it was paused, the script's own
    `mlflow.log_param`) is not the team's configuration and never goes into its params file."""
    from tracking.yaml_text import flatten, parse_yaml

    keys = flatten(dict(parse_yaml(path.read_text(encoding="utf-8")) or {})) if path.is_file() else {}
    return {key: value for key, value in logged.items() if key in keys}, [key for key in logged if key not in keys]


def recorded_backend(original: RunSnapshot, env: dict[str, str]) -> dict[str, str]:
    """`env` with `KERAS_BACKEND` the backend `original` trained on (`prov.determinism.effective.backend`): a script
    takes Keras's backend from its environment, so a JAX run re-run where none is set would train on TensorFlow.
    An environment naming another backend is a `RerunError` naming both and the fix."""
    recorded = original.tags.get(BACKEND_TAG)
    if not recorded:
        return env
    chosen = env.get(KERAS_BACKEND)
    if chosen and chosen != recorded:
        raise RerunError(
            f"run {original.run_id} trained on the {recorded} backend, but {KERAS_BACKEND}={chosen} in this "
            "environment, so the re-created run would train on another",
            fix=f"unset {KERAS_BACKEND} (the rerun sets it to {recorded}), or run with {KERAS_BACKEND}={recorded}",
        )
    return {**env, KERAS_BACKEND: recorded}


def rerun_script(
    client: MlflowClient, original: RunSnapshot, root: Path, commit: str, env: dict[str, str]
) -> RunSnapshot:
    """Re-create the script run `original` of the project at `root` at `commit` on the backend it trained on;
    return the new run's snapshot."""
    from tracking.inspect.diff import load_run
    from tracking.inspect.restore import params_step, write_logged_params
    from tracking.inspect.worktree import restore_code, temporary_worktree

    command = script_command(original)
    _step("worktree", f"checking out commit {commit[:12]} in a temporary git worktree")
    with temporary_worktree(root, commit) as project:
        changed = restore_code(project, original.tags, original.diff, original.run_id)
        _step(
            "code",
            f"the run's uncommitted changes restored ({', '.join(changed)})" if changed else "no uncommitted changes",
        )
        params = original.tags.get(SCRIPT_PARAMS_TAG) or "params.yaml"
        team, others = teams_params(original.params, project / params)
        differed = write_logged_params(project / params, team)
        left_out = f"; {len(others)} params that other code logged left out: {', '.join(sorted(others))}"
        _step("params", params_step(params, len(team), differed) + (left_out if others else ""))
        _step("run", shlex.join(command[2:] if command[1:3] == ["-m", "dvc"] else ["python", *command[1:]]))
        experiment = experiment_by_id(client, original.experiment_id).name
        done = subprocess.run(
            command,
            cwd=project,
            env={
                **recorded_backend(original, env),
                TRACKING_EXPERIMENT: experiment,
                TRACKING_RERUN_OF: original.run_id,
            },
        )
        if done.returncode != 0:
            raise RerunError(
                f"the re-created run's command failed (exit status {done.returncode}; its output is above); "
                "the temporary worktree was removed"
            )
    found = newest_run(client, [original.experiment_id], tag_is(RERUN_OF_TAG, original.run_id))
    if found is None:
        raise RerunError(
            f"the command `{shlex.join(command)}` ran but logged no run tagged {RERUN_OF_TAG}={original.run_id}; "
            "does the script still call tracking.start()?"
        )
    client.update_run(found.info.run_id, name=rerun_name(original.name))  # marked in MLflow's run list
    return load_run(client, found.info.run_id)


def _step(name: str, detail: str) -> None:
    print(f"rerun [{STEPS.index(name) + 1}/{len(STEPS)}] {name}: {detail}", flush=True)
