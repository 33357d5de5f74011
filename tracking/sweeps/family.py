"""`tracking sweep`'s work: read the sweep, judge its candidates as one family (`tracking.noise.sweep`), confirm
the selected best on fresh runs where asked, and publish it all (reports/sweep.md, its plot and the sweep's MLflow
parent run)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tracking.errors import RunStateError, UsageError
from tracking.layout import SWEEP
from tracking.names import NOISE_ROLE_TAG, SWEEP_ROLE, SWEEP_TAG
from tracking.noise.policy import CONTROL
from tracking.sweeps.members import Selection, Sweep, read_sweep
from tracking.sweeps.page import JudgedSweep, publish

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from tracking.noise.study import Study
    from tracking.noise.sweep import SweepCandidate, SweepVerdict


def candidates(sweep: Sweep) -> list[SweepCandidate]:
    """The sweep's members as the core judges them: names and values, with what each changed and its verdict."""
    from tracking.noise.sweep import SweepCandidate

    return [
        SweepCandidate(member.name, member.values, member.changed, member.single_verdict) for member in sweep.members
    ]


def judge_family(sweep: Sweep, alpha: float, method: str) -> SweepVerdict:
    """Every candidate of `sweep` judged against its band as one family."""
    from tracking.noise.sweep import judge_sweep

    return judge_sweep(
        sweep.band(),
        candidates(sweep),
        modes=sweep.modes,
        alpha=alpha,
        min_effect=sweep.min_effect or None,
        method=method,
    )


def expected_best_curve(sweep: Sweep, primary: str) -> list[tuple[int, float, float, float]]:
    """The expected best of `primary` after 1 to K trials, from each candidate's mean over its runs."""
    from tracking.noise.selection import expected_best

    means = [statistics.fmean(member.values[primary]) for member in sweep.members]
    return expected_best([mean for mean in means if math.isfinite(mean)], sweep.modes[primary])


@dataclass(frozen=True)
class Asked:
    """What `tracking sweep` was asked: the family's error rate, `holm` or `fdr`, how many fresh runs confirm the
    best (0: none), and the param under study (None: a grid judged as one family only)."""

    alpha: float = 0.05
    method: str = "holm"
    confirm: int = 0
    study: str | None = None


def judge_as_study(sweep: Sweep, primary: str, scientific: str, alpha: float) -> Study:
    """The playbook's study: the candidates grouped by their value of the `scientific` param (the others are
    nuisance, re-tuned for each value), each value's best judged with the noise its selection adds."""
    from tracking.noise.study import judge_study

    arms: dict[str, list[SweepCandidate]] = {}
    for member, candidate in zip(sweep.members, candidates(sweep), strict=True):
        if scientific in member.params:
            arms.setdefault(member.params[scientific], []).append(candidate)
    if len(arms) < 2:
        raise UsageError(
            f"--study {scientific}: the candidates logged {len(arms)} value(s) of it; a study compares 2 or more",
            fix="name the param the sweep varies, e.g. --study train.learning_rate",
        )
    mode = sweep.modes[primary]
    return judge_study(sweep.band(), arms, metric=primary, mode=mode, scientific=scientific, alpha=alpha)


def run_sweep(client: MlflowClient, root: Path, selection: Selection, asked: Asked) -> JudgedSweep:
    """Judge the sweep `selection` names in the project at `root` as `asked`, write and log it all; what it
    found."""
    from tracking.noise.selection import judge_confirmation
    from tracking.run.tracker import Tracker
    from tracking.sweeps.confirmation import confirm as train_confirmation
    from tracking.sweeps.confirmation import prepare_confirmation

    alpha, confirm = asked.alpha, asked.confirm
    sweep = read_sweep(client, root, selection)
    verdict = judge_family(sweep, alpha, asked.method)
    primary = verdict.primary or next(iter(sweep.modes))
    study = judge_as_study(sweep, primary, asked.study, alpha) if asked.study else None
    best = sweep.member(verdict.rows[0].name)
    if confirm and sweep.variant == CONTROL:
        raise RunStateError(
            f"the sweep is judged against the {CONTROL} band (nothing varied): fresh runs of {best.name} would be "
            "copies of its run, which confirm nothing",
            fix="leave out --confirm, or judge candidates that differ from the baseline",
        )
    params = prepare_confirmation(best) if confirm else None  # before anything is logged: it may restart us
    judged = JudgedSweep(sweep, verdict, primary, expected_best_curve(sweep, primary), study=study)
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
            judged = replace(judged, confirmation=confirmation, confirmation_runs=confirm)
        publish(judged, parent, root)
    return judged
