"""A sweep as the store holds it: its candidate runs (by DVC experiment name, by the sweep tag of the experiments
queued from this commit, by an MLflow filter or by a parent run), each candidate's values (its run's and the compare
stage's extra runs', `compare.candidate_repeats`), and the band the compare stage judged them against.

The readers are `tracking diff`'s and `tracking judge`'s: a name resolves as `tracking diff` resolves it
(`load_run`), the band comes from calibration/noise.json (else the store's newest calibration, as `tracking diff`
finds it), and the judged metrics, their modes and `min_effect` from the candidates' logged params.
"""

from __future__ import annotations

import hashlib
import math
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.data.hashing import file_sha256
from tracking.errors import RunNotFound, RunSelectionError, RunStateError
from tracking.inspect.diff import load_run
from tracking.inspect.diff.bands import find_calibration
from tracking.inspect.diff.metrics import logged_compare_metrics, logged_min_effects
from tracking.layout import CALIBRATE, COMPARE, NOISE_FILE
from tracking.names import (
    BAND_VARIANT_TAG,
    CANDIDATE_REPEAT_TAG,
    DVC_EXP_NAME_TAG,
    NOISE_REPEAT_TAG,
    NOISE_ROLE_TAG,
    STAGE_TAG,
    SWEEP_TAG,
    VERDICT_TAG,
    status_is,
    sweep_name,
    tag_is,
)
from tracking.noise.policy import ALGO, CONFIG_SECTIONS, DETERMINISM
from tracking.noise.record import NoiseRecord
from tracking.noise.run_name import SEEDS, changes, own_name
from tracking.store.reads import all_runs, children_of, experiment_ids, present_run, run_metrics

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

FINISHED = "FINISHED"


@dataclass(frozen=True)
class Selection:
    """Which runs make the sweep: DVC experiment names or run references (`names`), the experiments queued from this
    commit against this checkout's calibration (`every`), an MLflow filter string, or a parent run's children."""

    names: tuple[str, ...] = ()
    every: bool = False
    filter_string: str = ""
    parent: str | None = None


@dataclass(frozen=True)
class Member:
    """One candidate: its run (the train stage's, which compare judged), its name (the DVC experiment's, else the
    run's), its runs' values per judged metric (the run's own first, then the compare stage's extra runs), the
    params it changed from the baseline, its own verdict and the band variant that gave it, and its logged params."""

    run_id: str
    name: str
    experiment_id: str
    values: dict[str, list[float]]
    changed: dict[str, str]
    single_verdict: str | None
    variant: str | None
    params: dict[str, str]


@dataclass(frozen=True)
class Sweep:
    """The sweep's name (its tag's value), its members, the calibration (`source` says where it was read) and the
    band variant that judges them all, with the judged metrics' modes and smallest effects that matter."""

    name: str
    members: tuple[Member, ...]
    noise: NoiseRecord
    source: str
    variant: str
    modes: dict[str, str]
    min_effect: dict[str, float]

    def band(self) -> dict[str, list[float]]:
        """Each judged metric's values in the band's runs."""
        values = self.noise.band_values(self.variant)
        return {metric: values[metric] for metric in self.modes}

    def member(self, name: str) -> Member:
        return next(member for member in self.members if member.name == name)


def read_sweep(client: MlflowClient, root: Path | None, selection: Selection) -> Sweep:
    """The sweep `selection` names, read from the store at `client` and the project at `root` (None: outside one)."""
    noise, source, calibration_sha256 = _calibration(client, root, selection.every)
    queued = sweep_name(_head(root), calibration_sha256) if selection.every and root is not None else None
    runs = _newest_per_name(_candidate_runs(client, root, selection, queued))
    if not runs:
        raise RunSelectionError(
            "no experiments selected: " + _nothing_found(selection, queued),
            fix="queue a sweep (`dvc exp run --queue -S 'train.learning_rate=1e-4,1e-3'`, `dvc queue start`), or name "
            "its experiments (`tracking sweep EXP ...`), a filter (--filter) or a parent run (--parent)",
        )
    modes = logged_compare_metrics(runs[0].data.params)
    members = tuple(_member(client, run, noise, modes) for run in runs)
    variant = _variant(members, noise)
    missing = [metric for metric in modes if metric not in noise.variant(variant).bands]
    if missing:
        raise RunStateError(
            f"{source}: the {variant} band has no {', '.join(missing)}, which the candidates judge",
            fix=f"calibrate again with those metrics logged (`dvc repro {CALIBRATE}`)",
        )
    tags = {run.data.tags.get(SWEEP_TAG) for run in runs}
    ids = ",".join(sorted(run.info.run_id for run in runs))
    name = queued or (tags.pop() if len(tags) == 1 and None not in tags else None)
    name = name or sweep_name(hashlib.sha256(ids.encode()).hexdigest(), calibration_sha256)
    return Sweep(name, members, noise, source, variant, modes, logged_min_effects(runs[0].data.params))


def _calibration(client: MlflowClient, root: Path | None, required: bool) -> tuple[NoiseRecord, str, str]:
    """The calibration this checkout judges with (calibration/noise.json), else the store's newest; where it was
    read, and its file's SHA-256 (of its record, from the store). `required`: the file is (`--all`)."""
    if root is not None and ((root / NOISE_FILE).is_file() or required):
        return NoiseRecord.read(root / NOISE_FILE), NOISE_FILE.as_posix(), file_sha256(root / NOISE_FILE)
    found = find_calibration(client, experiment_ids(client))
    if found is None:
        raise RunStateError(
            f"no band to judge the sweep: no {NOISE_FILE} here and no calibration in {client.tracking_uri}",
            fix=f"calibrate the baseline first (`dvc repro {CALIBRATE}`)",
        )
    run_id, noise = found
    digest = hashlib.sha256(repr(sorted(noise.results().items())).encode()).hexdigest()
    return noise, f"calibration run {run_id}", digest


def _head(root: Path) -> str:
    """The commit checked out at `root`: the base of the experiments queued from it."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise RunSelectionError(
            f"--all: {root} has no git commit to find the experiments queued from ({done.stderr.strip()[:200]})",
            fix="run it in the project whose experiments make the sweep, or name them",
        )
    return done.stdout.strip()


def _candidate_runs(client: MlflowClient, root: Path | None, selection: Selection, queued: str | None) -> list[Run]:
    """The runs `selection` names, without calibration runs, repeats and sweep parents."""
    from mlflow.exceptions import MlflowException

    if selection.names:
        return [client.get_run(load_run(client, name, root).run_id) for name in selection.names]
    try:
        if selection.parent:
            parent = present_run(client, selection.parent)
            if parent is None:
                raise RunNotFound(f"--parent {selection.parent}: no such run in {client.tracking_uri}")
            found = children_of(client, parent.info.experiment_id, parent.info.run_id)
        elif queued is not None:
            found = all_runs(client, experiment_ids(client), f"{tag_is(SWEEP_TAG, queued)} and {status_is(FINISHED)}")
        else:
            found = all_runs(client, experiment_ids(client), selection.filter_string)
    except MlflowException as err:
        raise RunSelectionError(
            f"--filter {selection.filter_string!r}: {err.message}", fix="e.g. --filter \"tags.`noise.sweep` = 'X'\""
        ) from err
    return [run for run in found if _candidate(run)]


def _candidate(run: Run) -> bool:
    """Whether `run` trained a candidate: not a calibration's run, a repeat or a sweep's parent."""
    tags = run.data.tags
    auxiliary = (NOISE_ROLE_TAG, NOISE_REPEAT_TAG, CANDIDATE_REPEAT_TAG)
    return not any(tag in tags for tag in auxiliary) and tags.get(STAGE_TAG) != CALIBRATE


def _newest_per_name(runs: Sequence[Run]) -> list[Run]:
    """One run per candidate name, the newest (an experiment queued twice from one commit), ordered by name."""
    newest: dict[str, Run] = {}
    for run in sorted(runs, key=lambda found: found.info.start_time or 0):
        newest[_name(run)] = run
    return [newest[name] for name in sorted(newest)]


def _name(run: Run) -> str:
    return run.data.tags.get(DVC_EXP_NAME_TAG) or own_name(run.info.run_name or "") or run.info.run_id


def _member(client: MlflowClient, run: Run, noise: NoiseRecord, modes: dict[str, str]) -> Member:
    """`run` as a member of the sweep, its compare stage's extra runs read as its children."""
    extras: dict[str, Run] = {}
    children = children_of(client, run.info.experiment_id, run.info.run_id, status_is(FINISHED))
    for child in sorted(children, key=lambda found: found.info.start_time or 0):
        if CANDIDATE_REPEAT_TAG in child.data.tags:
            extras[child.data.tags[CANDIDATE_REPEAT_TAG]] = child
    own = run_metrics(run)
    missing = [metric for metric in modes if metric not in own]
    if missing:
        raise RunStateError(
            f"run {run.info.run_id} ({_name(run)}) logged no {', '.join(missing)}: its pipeline did not reach "
            f"{COMPARE}",
            fix="finish the experiment (`dvc exp run`), or leave it out of the sweep",
        )
    runs = [own, *(run_metrics(extras[index]) for index in sorted(extras, key=int))]
    tags = run.data.tags
    return Member(
        run_id=run.info.run_id,
        name=_name(run),
        experiment_id=run.info.experiment_id,
        values={metric: [found.get(metric, math.nan) for found in runs] for metric in modes},
        changed=changes(noise.baseline, dict(run.data.params), (*CONFIG_SECTIONS, SEEDS, DETERMINISM)),
        single_verdict=tags.get(VERDICT_TAG),
        variant=tags.get(BAND_VARIANT_TAG),
        params=dict(run.data.params),
    )


def _variant(members: Sequence[Member], noise: NoiseRecord) -> str:
    """The band variant that judges the sweep: the one the compare stage judged most of its candidates against, else
    (runs no compare stage judged: a tuner's trials) ALGO, the band of a changed hyperparameter."""
    judged = Counter(member.variant for member in members if member.variant in noise.variants)
    if judged:
        return judged.most_common(1)[0][0]
    if ALGO in noise.variants:
        return ALGO
    raise RunStateError(
        f"none of the {len(members)} candidates was judged against this calibration's bands "
        f"({', '.join(noise.variants)}) and it has no {ALGO} band: the band that fits them is unknown",
        fix=f"calibrate with the {ALGO} variant (calibration.variants), or run each experiment's {COMPARE} stage",
    )


def _nothing_found(selection: Selection, queued: str | None) -> str:
    if queued is not None:
        return f"no finished experiment queued from this commit carries the sweep tag {SWEEP_TAG} = '{queued}'"
    if selection.parent:
        return f"run {selection.parent} has no candidate runs as children"
    return f"the filter {selection.filter_string!r} selects no candidate run"
