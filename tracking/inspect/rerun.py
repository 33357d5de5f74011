"""`tracking rerun RUN`: re-create a logged run in a temporary git worktree, train it again, compare the two.

The worktree is checked out at the run's commit with its working tree's snapshot (tracking/provenance/git.py); params.yaml is written
from the logged params (seeds and determinism included); the prepared data is checked out of the user's
DVC cache at the logged hash. DVC then runs train and evaluate there, logging to the user's store, and the
new run is tagged `rerun_of` (a team's script run re-runs its own stage or command: tracking/inspect/rerun_script.py).
The user's working tree is never touched, and the worktree is removed on
success, on failure and on Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracking.data.manifest import LOGGED_MANIFEST
from tracking.env import MLFLOW_TRACKING_URI, TRACKING_PROJECT_ROOT, TRACKING_RERUN_OF
from tracking.errors import RerunError
from tracking.layout import CALIBRATE, EVALUATE, PREPARE, PREPARED, TRAIN
from tracking.names import DVC_DEPS_PREFIX, MLFLOW_GIT_COMMIT_TAG, RERUN_OF_TAG, STAGE_TAG, WEIGHTS_TAG
from tracking.noise.notes import gist
from tracking.noise.policy import INCONCLUSIVE
from tracking.noise.run_name import rerun_name

STAGES = (TRAIN, EVALUATE)
STEPS = ("worktree", "code", "params", "data", *STAGES)
DATA_HASH_TAG = f"{DVC_DEPS_PREFIX}{TRAIN}.{PREPARED.as_posix()}"
ENVIRONMENT_GROUPS = ("software", "hardware")
STAGE_STOP_S = 60  # a stopped rerun's stage ends its MLflow run in this time, or is killed


@dataclass(frozen=True)
class Rerun:
    """The logged run, its re-creation, and what `tracking diff` finds between them."""

    original: Any
    new: Any
    diff: Any


def rerun(ref: str, root: Path, metrics: list[str] | None = None, alpha: float = 0.05) -> Rerun:
    """Re-create run `ref` (a run id or DVC experiment name) of the project at `root` and train it again."""
    from tracking.inspect.diff import diff_runs, load_run
    from tracking.store.location import open_client, tracking_uri
    from tracking.store.recorded import read_link

    uri = tracking_uri(root)
    client = open_client(root)
    original = load_run(client, ref, root)
    commit = original.tags.get(MLFLOW_GIT_COMMIT_TAG)
    if not commit:
        raise RerunError(
            f"run {original.run_id} logged no git commit (tag {MLFLOW_GIT_COMMIT_TAG}); only runs of the train stage can be re-run"
        )
    if original.tags.get(STAGE_TAG) == CALIBRATE:
        raise RerunError(
            f"run {original.run_id} is a calibration run; re-run calibration with `dvc repro -f {CALIBRATE}` at its commit"
        )
    from tracking.inspect.rerun_script import is_script_run, rerun_script

    if is_script_run(original):  # a team's own script: its command re-run, its data its own
        new = rerun_script(client, original, root, commit, _stage_environment(uri))
        return Rerun(original, new, diff_runs(client, original, new, metrics, alpha, repo=root))
    content = original.manifest.content_sha256 if original.manifest else None
    data_hash = original.tags.get(DATA_HASH_TAG)
    _step("worktree", f"checking out commit {commit[:12]} in a temporary git worktree")

    from tracking.inspect.restore import (
        cache_dir,
        checkout_stage_inputs,
        dvc_cache,
        find_directory,
        params_step,
        restore_prepared,
        write_logged_params,
    )
    from tracking.inspect.worktree import restore_code, temporary_worktree

    with temporary_worktree(root, commit) as project:
        changed = restore_code(project, original.tags, original.diff, original.run_id)
        _step(
            "code",
            f"the run's uncommitted changes restored ({len(changed)} file(s): {', '.join(changed)})"
            if changed
            else "no uncommitted changes",
        )
        differed = write_logged_params(project / "params.yaml", original.params)
        _step("params", params_step("params.yaml", len(original.params), differed))
        if not content:
            raise RerunError(
                f"run {original.run_id} logged no data manifest ({LOGGED_MANIFEST}); it cannot be re-created"
            )
        cache = dvc_cache(root)
        data_hash = data_hash or find_directory(cache, content)
        if not data_hash:
            raise RerunError(
                f"run {original.run_id} logged no DVC hash for {PREPARED} and no directory in the DVC cache {cache.path} "
                f"holds its data (content sha256 {content[:12]}…); re-create it with `dvc repro {PREPARE}` at its commit"
            )
        restore_prepared(cache, project, data_hash, content, original.run_id)
        env = {**_stage_environment(uri), TRACKING_RERUN_OF: original.run_id}
        inputs = checkout_stage_inputs(project, PREPARE, cache_dir(root), env)
        _record_prepare(project, env)
        also = f"; {', '.join(inputs)} (what {PREPARE} read) checked out at the logged commit" if inputs else ""
        _step(
            "data",
            f"{PREPARED} restored from the DVC cache at {data_hash}; content sha256 {content[:12]}… verified{also}",
        )
        for stage in STAGES:
            _step(stage, f"dvc repro --single-item --force {stage}")
            _run_stage(project, stage, env)
        new_id = read_link(project, TRAIN)["run_id"]  # the run the clone's train stage opened
    client.set_tag(new_id, RERUN_OF_TAG, original.run_id)
    client.update_run(new_id, name=rerun_name(original.name))  # marked in MLflow's run list, where names show
    new = load_run(client, new_id)
    return Rerun(original, new, diff_runs(client, original, new, metrics, alpha, repo=root))


def _step(name: str, detail: str) -> None:
    print(f"rerun [{STEPS.index(name) + 1}/{len(STEPS)}] {name}: {detail}", flush=True)


def _stage_environment(uri: str) -> dict[str, str]:
    """This environment for the stages, minus DVC's and our project variables, logging to the user's store."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("DVC_") and key != TRACKING_PROJECT_ROOT
    }
    env[MLFLOW_TRACKING_URI] = uri
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _record_prepare(project: Path, env: dict[str, str]) -> None:
    """Record the restored data as the prepare stage's output in the worktree's dvc.lock (`dvc commit`).

    The stages log the DVC hashes of prepare's dependencies from dvc.lock, as the original run did.
    """
    done = subprocess.run(
        [sys.executable, "-m", "dvc", "commit", "--quiet", "--force", PREPARE],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        print(
            f"note: the prepare stage could not be recorded in the worktree's dvc.lock ({reason}); "
            "the new run will lack prov.dvc.deps.prepare.* tags",
            flush=True,
        )


def _run_stage(project: Path, stage: str, env: dict[str, str]) -> None:
    """Run one stage with DVC in the worktree, its output streaming through; a failure stops the rerun. Stopped
    itself (Ctrl-C, SIGTERM), the rerun stops the stage's process group with SIGTERM first, so that the stage ends
    its run KILLED before the worktree it runs in is removed."""
    command = [sys.executable, "-m", "dvc", "repro", "--quiet", "--single-item", "--force", stage]
    with subprocess.Popen(command, cwd=project, env=env, start_new_session=True) as process:
        try:
            status = process.wait()
        except BaseException:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STAGE_STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
            raise
    if status != 0:
        raise RerunError(
            f"the {stage} stage of the re-created run failed (exit status {status}; its output is above); "
            "the temporary worktree was removed"
        )


def report(result: Rerun) -> str:
    """The rerun's verdict: bit-identical weights or not, the metric verdict, and the environment differences."""
    original, new, diff = result.original, result.new, result.diff
    lines = [f"re-ran {original.run_id} as {new.run_id} (tag {RERUN_OF_TAG}={original.run_id})"]
    hash_a, hash_b = original.tags.get(WEIGHTS_TAG), new.tags.get(WEIGHTS_TAG)
    if diff.weights_identical:
        lines.append(f"weights: bit-identical (sha256 {hash_b})")
    elif diff.weights_identical is None:
        lines.append("weights: not comparable (a run logged no prov.weights_sha256)")
    else:
        lines.append(f"weights: NOT bit-identical (sha256 {hash_a} -> {hash_b})")
    variant = diff.band.get("variant")
    lines.append(f"metrics, rerun - original ({f'noise band: {variant}' if variant else diff.band['reason']}):")
    lines += [
        f"  {delta.metric:<16} {delta.a:.6g} -> {delta.b:.6g}  {delta.delta:+.4g}  {_band_verdict(delta)}"
        for delta in diff.deltas
    ]
    lines.append(f"verdict: {diff.conclusion}")
    environment = [group for group in diff.groups if group.name in ENVIRONMENT_GROUPS]
    changes = [change for group in environment for change in group.changes]
    if changes:
        lines.append("environment differences (they explain a rerun that is not bitwise equal):")
        lines += [f"  {change.key}: {change.a} -> {change.b}" for change in changes]
    else:
        lines.append("environment differences: none (same software versions, CPU and GPU)")
    return "\n".join(lines) + "\n"


def _band_verdict(delta: Any) -> str:
    found = delta.judgement
    if found is None:
        return "(no band)"
    if found.z is None or found.verdict == INCONCLUSIVE:
        return f"inconclusive: {gist(found.note)}"
    return f"{'within' if found.within_noise else 'OUTSIDE'} the band (z {found.z:+.2f})"
