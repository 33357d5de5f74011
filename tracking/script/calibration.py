"""`tracking calibrate` and `tracking judge` for a team's own script: its noise bands, and a candidate's verdict.

The calibration runs the script's DVC stage command `repeats` times per variant (ALGO: every seed varied; CONTROL:
nothing varied, so the runs must be bit-identical), in a temporary git worktree of the project at HEAD with its
uncommitted diff (the team's outputs are never overwritten), each run a child of one MLflow parent run tagged
`noise.role = calibration`. The script learns its variant, repeat and parent through the environment
(tracking/script/repeat_context.py). Each repeat is kept in the store under the key of everything that decides it (the
stage's code by content, the params, the numerical libraries, variant and index: tracking/repeats/kept.py), so an
interrupted calibration resumes and more repeats train only the new ones.

The parent carries `calibration/noise.json` with the bands of every metric the runs logged, as the calibrate stage
writes it, so `tracking diff` judges runs of the script against it, and `tracking judge RUN` is `tracking diff` of
the calibrated baseline against the candidate: the same band choice and statistics as the compare stage.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from collections.abc import Mapping
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.dvc_files import declared_stages
from tracking.env import DVC_ROOT, DVC_STAGE, MLFLOW_TRACKING_URI, TRACKING_EXPERIMENT, TRACKING_REPEAT
from tracking.errors import NoiseError, RepoError
from tracking.layout import CALIBRATE, COMPARE, DVC_FILE, NOISE_FILE
from tracking.names import (
    BAND_VARIANT_TAG,
    CALIBRATION_ROLE,
    CONTROL_BIT_IDENTICAL_TAG,
    DATASET_CONTENT_TAG,
    MLFLOW_NOTE_TAG,
    NOISE_ROLE_TAG,
    PROV_PREFIX,
    REASON_TAG,
    REUSED_REPEATS_TAG,
    SCRIPT_COMMAND_TAG,
    VERDICT_TAG,
    WEIGHTS_TAG,
)
from tracking.noise.band_page import BAND_IMAGE, band_figure, band_metrics, describe_band, shown_metrics
from tracking.noise.record import STORED_ALPHA, NoiseRecord, Variant, metric_bands
from tracking.noise.run_name import changes, judged_name
from tracking.redaction import redact_params
from tracking.script.repeat_context import SCRIPT_VARIANTS, ScriptRepeat
from tracking.store.reads import experiment_named, finished_repeat, run_metrics

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

    from tracking.inspect.diff import RunDiff

log = logging.getLogger(__name__)

SEEDS_PREFIX = f"{PROV_PREFIX}seeds."


def stage_command(root: Path, stage: str | None) -> tuple[str, str, Path]:
    """The stage to calibrate (`stage`, else the only one of dvc.yaml), its shell command and the folder it runs in."""
    path = root / DVC_FILE
    stages = declared_stages(root)
    if stage is None and len(stages) == 1:
        stage = next(iter(stages))
    if stage not in stages:
        names = ", ".join(stages) or "none"
        raise RepoError(
            f"{path}: no stage {stage!r} to calibrate" if stage else f"{path}: name the stage to calibrate",
            fix=f"pass --stage, one of: {names}",
        )
    declared = stages[stage]
    return stage, str(declared["cmd"]), root / declared.get("wdir", ".")


def calibrate_script(
    root: Path, stage: str | None, repeats: int, variants: list[str], experiment: str | None = None
) -> NoiseRecord:
    """Calibrate the script's stage at `root`; return the noise record logged on the parent run."""
    from tracking.inspect.worktree import apply_diff, temporary_worktree
    from tracking.provenance.git import gather_git, open_repository
    from tracking.repeats.kept import code_version
    from tracking.repeats.planning import planned
    from tracking.run.tracker import Tracker
    from tracking.store.location import tracking_uri

    unknown = [variant for variant in variants if variant not in SCRIPT_VARIANTS]
    if unknown:
        raise NoiseError(f"unknown variant(s) {', '.join(unknown)}", fix=f"use {', '.join(SCRIPT_VARIANTS)}")
    stage, command, wdir = stage_command(root, stage)
    open_repository(root)
    experiment = experiment or root.name
    git = gather_git(root)
    params = root / "params.yaml"
    identity = {
        "stage": stage,
        "command": command,
        "code": code_version(root, stage),
        "params_sha256": hashlib.sha256(params.read_bytes()).hexdigest() if params.is_file() else None,
    }
    env = {
        **{key: value for key, value in os.environ.items() if key not in (DVC_ROOT, DVC_STAGE, TRACKING_REPEAT)},
        MLFLOW_TRACKING_URI: tracking_uri(root),
        TRACKING_EXPERIMENT: experiment,
        DVC_STAGE: stage,
        DVC_ROOT: str(
            root
        ),  # as DVC's queue sets it for a copy of the project: the repeats record what dvc repro would
    }
    with Tracker(
        experiment, root, stage=CALIBRATE, run_name="calibration", tags={NOISE_ROLE_TAG: CALIBRATION_ROLE}
    ) as parent:
        client = parent.client
        experiment_id = experiment_named(client, experiment).experiment_id
        runs: dict[str, list[Run]] = {variant: [] for variant in variants}
        reused: set[str] = set()
        with temporary_worktree(root, git["commit"]) as project:
            apply_diff(project, git.get("diff") or "", parent.run_id)
            for job in planned(identity, product(variants, range(repeats))):
                kept = finished_repeat(client, experiment_id, job.key)
                if kept is None:
                    repeat = ScriptRepeat(parent.run_id, job.variant, job.repeat, job.key)
                    log.info("calibrate [%s %d/%d]: %s", job.variant, job.repeat + 1, repeats, command)
                    _run(command, project / wdir.relative_to(root), {**env, TRACKING_REPEAT: repeat.to_env()})
                    kept = finished_repeat(client, experiment_id, job.key)
                    if kept is None:
                        raise NoiseError(
                            f"`{command}` (stage {stage}) finished but logged no MLflow run for the calibration",
                            fix="open the run in the script with tracking.start(...) (docs/library.md)",
                        )
                else:
                    reused.add(kept.info.run_id)
                runs[job.variant].append(kept)
        noise = noise_record(runs, repeats, reused, parent.run_id)
        parent.log_json(noise.as_dict(), NOISE_FILE.as_posix())
        shown = shown_metrics(noise)
        parent.log_metrics(band_metrics(noise, shown))
        parent.log_figure(band_figure(noise, shown), BAND_IMAGE)
        tags = {
            REUSED_REPEATS_TAG: len(reused),
            MLFLOW_NOTE_TAG: describe_band(noise, shown, parent.experiment_id, parent.run_id),
        }
        if "control" in noise.variants:
            tags[CONTROL_BIT_IDENTICAL_TAG] = str(noise.variants["control"].bit_identical).lower()
        parent.set_tags(tags)
    return noise


def _run(command: str, folder: Path, env: dict[str, str]) -> None:
    """Run the stage's command as DVC would (a shell, in its folder); its output streams through."""
    done = subprocess.run(command, shell=True, cwd=folder, env=env)
    if done.returncode != 0:
        raise NoiseError(
            f"a calibration repeat of `{command}` failed (exit status {done.returncode}; its output is above)",
            fix="run the stage alone (`dvc repro`) until it passes, then calibrate again: finished repeats are kept",
        )


def noise_record(runs: dict[str, list[Run]], repeats: int, reused: set[str], parent_run_id: str) -> NoiseRecord:
    """`calibration/noise.json` (tracking/noise/record.py) from the script's runs: each variant's bands of every
    metric its runs logged (the per-epoch ones aside), whether its weights are bit-identical, the baseline's params
    and data content hash. A script hands us no test predictions or weights, so no churn or weight distances."""
    rows, variants = [], {}
    for variant, chosen in runs.items():
        first = len(rows)
        for index, run in enumerate(chosen):
            rows.append(
                {
                    "variant": variant,
                    "repeat": index,
                    "run_id": run.info.run_id,
                    "weights_sha256": run.data.tags.get(WEIGHTS_TAG, ""),
                    "metrics": {  # by name: the bands are listed in this order
                        name: value for name, value in sorted(run_metrics(run).items()) if not name.startswith("epoch_")
                    },
                    "seeds": {
                        key.removeprefix(SEEDS_PREFIX): value
                        for key, value in run.data.tags.items()
                        if key.startswith(SEEDS_PREFIX)
                    },
                    "reused": run.info.run_id in reused,
                }
            )
        mine = rows[first:]
        hashes = sorted({row["weights_sha256"] for row in mine})
        variants[variant] = Variant(
            runs=list(range(first, len(rows))),
            bands=metric_bands(mine, variant),
            churn={},
            weight_distance={},
            bit_identical=len(hashes) == 1 and hashes != [""],
            weights_sha256=hashes,
        )
    first_run = next(iter(runs.values()))[0]
    return NoiseRecord(
        baseline=redact_params(dict(first_run.data.params)),
        data_sha256=_data_sha256(first_run) or "",
        alpha=STORED_ALPHA,
        repeats=repeats,
        parent_run_id=parent_run_id,
        executor="local",
        reused=[f"{row['variant']} {row['repeat']}" for row in rows if row["reused"]],
        runs=rows,
        variants=variants,
    )


def _data_sha256(run: Run) -> str | None:
    """The content hash the run's `run.log_data` logged (its dataset input's `content_sha256` tag)."""
    for item in run.inputs.dataset_inputs if run.inputs else []:
        for tag in item.tags:
            if tag.key == DATASET_CONTENT_TAG:
                return tag.value
    return None


def judge_script(
    client: MlflowClient,
    root: Path,
    ref: str,
    metrics: list[str] | None,
    alpha: float,
    calibration: str | None,
    min_effect: Mapping[str, float] | None = None,
) -> RunDiff:
    """The candidate run `ref` judged against the script's calibration: `tracking diff` of the calibrated baseline
    (a CONTROL repeat, else the first repeat) against it, each metric held to its `min_effect` where one is named;
    the verdict is tagged on the candidate as compare tags its."""
    from tracking.inspect.diff import diff_runs, load_run
    from tracking.inspect.diff.bands import find_calibration

    candidate = load_run(client, ref, root)
    found = find_calibration(client, [candidate.experiment_id], calibration)
    if found is None and SCRIPT_COMMAND_TAG not in candidate.tags:  # a DVC pipeline's run, not a team script's
        raise NoiseError(
            f"run {candidate.run_id} was made by the DVC pipeline, not by a team's script, and no calibration is "
            "in its experiment",
            fix=f"judge it with the pipeline's own stages (`dvc repro {CALIBRATE}`, then `dvc repro {COMPARE}` for "
            "the candidate), or compare two runs with `tracking diff`; `tracking judge` is for runs of a script",
        )
    if found is None:
        raise NoiseError(
            f"no calibration of the script in the experiment of run {candidate.run_id}",
            fix="run `tracking calibrate` in the project first",
        )
    parent, noise = found
    variant = "control" if "control" in noise.variants else next(iter(noise.variants))
    reference = load_run(client, noise.runs_of(variant)[0]["run_id"])
    diff = diff_runs(client, reference, candidate, metrics, alpha, calibration=parent, repo=root, min_effect=min_effect)
    if diff.verdict is not None:
        client.set_tag(candidate.run_id, VERDICT_TAG, diff.verdict)
        client.set_tag(candidate.run_id, BAND_VARIANT_TAG, diff.band.get("variant") or "")
        client.set_tag(candidate.run_id, REASON_TAG, diff.band.get("reason", "")[:5000])
        changed = changes(reference.params, candidate.params, ("",))
        client.update_run(candidate.run_id, name=judged_name(candidate.name, diff.verdict, changed))
    return diff
