"""The sweep's winner confirmed: the selected candidate re-trained on fresh seeds, judged on those runs alone.

The best of K candidates is selected by its own noise, so its gap is biased upwards (the winner's curse). Fresh
runs are not: they train through the compare stage's candidate repeats (tracking/repeats/candidate_runs.py), on
the candidate's logged params, this checkout's prepared data and `compute.executor`, as children of the sweep's
parent run, and are kept as every repeat is (calibration/repeats/), so judging the sweep again trains nothing. Their
indices start after the compare stage's extra runs (`compare.candidate_repeats`), so their seeds are fresh draws of
the candidate stream that none of the candidate's runs used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracking.config.params import Params
from tracking.data.dataset import load_splits
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process
from tracking.errors import RunStateError
from tracking.inspect.restore import params_from_logged
from tracking.layout import PREPARED
from tracking.repeats.candidate_runs import train_candidate_repeats
from tracking.sweeps.members import Member, Sweep

if TYPE_CHECKING:
    from tracking.run.tracker import Tracker


def trained_params(member: Member) -> Params:
    """The params `member`'s run trained with, as it logged them."""
    from pydantic import ValidationError

    try:
        return Params.model_validate(params_from_logged(member.params))
    except ValidationError as err:
        raise RunStateError(
            f"run {member.run_id} ({member.name}): its logged params do not read as this version's params.yaml "
            f"({err.error_count()} problem(s), first: {err.errors()[0]['msg']})",
            fix="confirm a candidate trained by this version of the project, or re-run its experiment",
        ) from None


def prepare_confirmation(member: Member) -> Params:
    """The selected candidate's params, with this process set up to train them reproducibly: call it before
    TensorFlow is imported and before anything is logged (it may restart the process with their hash seed)."""
    params = trained_params(member)
    reproducible_process(params)
    return params


def confirm(
    sweep: Sweep, member: Member, params: Params, runs: int, root: Path, parent: Tracker
) -> list[dict[str, Any]]:
    """`runs` fresh trainings of `member` (`params`, from `prepare_confirmation`) as children of the sweep's
    `parent` run, kept ones reused; each one's flat metrics."""
    manifest = Manifest.read(root / PREPARED)
    if manifest.content_sha256 != sweep.noise.data_sha256:
        raise RunStateError(
            f"{PREPARED} holds data of content {manifest.content_sha256[:12]}, not the calibration's "
            f"({sweep.noise.data_sha256[:12]}): the confirmation would train on other data than the sweep's",
            fix="check out the sweep's data (`dvc checkout`), then confirm again",
        )
    seeds = reproducible_process(params)
    first = params.compare.candidate_runs()  # the compare stage's extra runs take indices 1 to this minus 1
    kept, _ = train_candidate_repeats(
        params,
        sweep.variant,
        seeds,
        root,
        (manifest, load_splits(root / PREPARED, manifest)),
        parent,
        repeats=range(first, first + runs),
    )
    return [found.run["metrics"] for found in kept]
