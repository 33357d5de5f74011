"""`tracking sweep`'s work: read the sweep, judge its candidates as one family (`tracking.noise.sweep`), confirm
the selected best on fresh runs where asked, and publish it all (reports/sweep.md, its plot and the sweep's MLflow
parent run)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.errors import RunStateError
from tracking.layout import SWEEP
from tracking.names import NOISE_ROLE_TAG, SWEEP_ROLE, SWEEP_TAG
from tracking.noise.policy import CONTROL
from tracking.sweeps.members import Selection, Sweep, read_sweep
from tracking.sweeps.page import JudgedSweep, publish

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from tracking.noise.sweep import SweepVerdict


def judge_family(sweep: Sweep, alpha: float, method: str) -> SweepVerdict:
    """Every candidate of `sweep` judged against its band as one family."""
    from tracking.noise.sweep import SweepCandidate, judge_sweep

    candidates = [
        SweepCandidate(member.name, member.values, member.changed, member.single_verdict) for member in sweep.members
    ]
    return judge_sweep(
        sweep.band(), candidates, modes=sweep.modes, alpha=alpha, min_effect=sweep.min_effect or None, method=method
    )


def expected_best_curve(sweep: Sweep, primary: str) -> list[tuple[int, float, float, float]]:
    """The expected best of `primary` after 1 to K trials, from each candidate's mean over its runs."""
    from tracking.noise.selection import expected_best

    means = [statistics.fmean(member.values[primary]) for member in sweep.members]
    return expected_best([mean for mean in means if math.isfinite(mean)], sweep.modes[primary])


def run_sweep(
    client: MlflowClient, root: Path, selection: Selection, alpha: float, method: str, confirm: int
) -> JudgedSweep:
    """Judge the sweep `selection` names in the project at `root`, confirm its best on `confirm` fresh runs (0:
    none), write and log it all; what it found."""
    from tracking.noise.selection import judge_confirmation
    from tracking.run.tracker import Tracker
    from tracking.sweeps.confirmation import confirm as train_confirmation
    from tracking.sweeps.confirmation import prepare_confirmation

    sweep = read_sweep(client, root, selection)
    verdict = judge_family(sweep, alpha, method)
    primary = verdict.primary or next(iter(sweep.modes))
    best = sweep.member(verdict.rows[0].name)
    if confirm and sweep.variant == CONTROL:
        raise RunStateError(
            f"the sweep is judged against the {CONTROL} band (nothing varied): fresh runs of {best.name} would be "
            "copies of its run, which confirm nothing",
            fix="leave out --confirm, or judge candidates that differ from the baseline",
        )
    params = prepare_confirmation(best) if confirm else None  # before anything is logged: it may restart us
    judged = JudgedSweep(sweep, verdict, primary, expected_best_curve(sweep, primary))
    experiment = client.get_experiment(best.experiment_id).name
    tags = {NOISE_ROLE_TAG: SWEEP_ROLE, SWEEP_TAG: sweep.name}
    with Tracker(experiment, root, stage=SWEEP, run_name=f"sweep {sweep.name}", tags=tags) as parent:
        if params is not None:
            runs = train_confirmation(sweep, best, params, confirm, root, parent)
            values = {metric: [run.get(metric, math.nan) for run in runs] for metric in sweep.modes}
            confirmation = judge_confirmation(
                sweep.band(),
                verdict.rows[0],
                values,
                modes=sweep.modes,
                alpha=alpha,
                min_effect=sweep.min_effect or None,
            )
            judged = JudgedSweep(sweep, verdict, primary, judged.curve, confirmation, confirm)
        publish(judged, parent, root)
    return judged
