"""Sweeps (issue 66): a grid queued with DVC's own syntax, run by two queue workers and by `dvc exp run --run-all`
on one committed calibration, then judged as one family by `tracking sweep --all --confirm 2`, read back through
MLflow's API (docs/sweeps.md).

The queued sweep trains 9 experiments of 2 candidate runs each and confirms the best on 2 more: minutes on 2 cores,
which the 20-minute budget of `make test` leaves no room for; `make test-sweep` (TRACKING_TEST_SWEEP=1) runs it, and
CI after `make test-cluster`. The error lines are checked in `make test`, on an empty project.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, client_for, project_env, run, runs_of, tiny_calibration, write_params

from tracking.names import (
    CALIBRATION_ROLE,
    CANDIDATE_REPEAT_TAG,
    DVC_EXP_NAME_TAG,
    MLFLOW_NOTE_TAG,
    MLFLOW_PARENT_RUN_TAG,
    NOISE_REPEAT_TAG,
    NOISE_ROLE_TAG,
    REPEAT_KEY_TAG,
    SWEEP_RANK_TAG,
    SWEEP_ROLE,
    SWEEP_TAG,
    VERDICT_TAG,
    sweep_name,
    tag_is,
)

SWEEP_TESTS = "TRACKING_TEST_SWEEP"  # set by `make test-sweep`
GRID = ["-S", "train.learning_rate=1e-4,3e-4,1e-3,3e-3", "-S", "model.kwargs.dropout=0.1,0.3"]  # 8 experiments
QUEUE_S = 1500  # a loaded 2-core machine trains the 8 in 4 to 10 minutes


def start_workers(project: Path) -> None:
    """`dvc queue start -j 2`, its output left unread: the workers it starts in the background inherit it, and a
    pipe would hold the call open until they exit."""
    subprocess.run(
        ["dvc", "queue", "start", "-j", "2"],
        cwd=project,
        env=project_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=120,
    )


def queue_drained(project: Path) -> str:
    """`dvc queue status` once no experiment is queued or running. Two workers on DVC's file-system broker race on
    its messages, and one sometimes stops (`Unrecoverable error: JSONDecodeError`, treeverse/dvc#10428): the other
    goes on alone; where none is left with experiments queued, they are started again, as docs/sweeps.md says."""
    deadline = time.monotonic() + QUEUE_S
    while time.monotonic() < deadline:
        status = run(["dvc", "queue", "status"], project).stdout
        if "Queued" not in status and "Running" not in status:
            return status
        if "Queued" in status and "Running" not in status and "0 active" in status:
            start_workers(project)
        time.sleep(5)
    raise AssertionError(f"the queue still runs after {QUEUE_S} s:\n{status}")


def test_sweep_errors_are_one_line(root: Path, capsys: pytest.CaptureFixture[str]):
    """No selection, and no store to judge in: one `error:` line each, exit 2 (in process: `tracking`'s own
    `main`; the queued sweep below runs the command)."""
    from tracking.cli import main

    for argv, expected in ((["sweep"], "name the sweep's experiments"), (["sweep", "--all"], "no MLflow store")):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert exited.value.code == 2 and lines[-1].startswith("error: ") and expected in lines[-1], lines


def test_the_report_and_the_run_description_open_on_the_ranked_table(tmp_path: Path):
    """A sweep of 4 read from numbers (no store): the report's table comes first, then the expected-best plot, then
    what confirmation would do, then the study of the learning rate; the parent run's description is the table
    first."""
    from tracking.noise.record import NoiseRecord, Variant
    from tracking.sweeps.family import expected_best_curve, judge_as_study, judge_family
    from tracking.sweeps.members import Member, Sweep
    from tracking.sweeps.page import JudgedSweep, description, draw_plot, report

    rng = np.random.default_rng(66)
    band = {"test_accuracy": 0.95 + 0.004 * rng.standard_normal(5), "test_loss": 0.2 + 0.01 * rng.standard_normal(5)}
    runs = [{"metrics": {metric: float(values[i]) for metric, values in band.items()}} for i in range(5)]
    bands = {
        metric: {"mean": float(values.mean()), "std": float(values.std(ddof=1))} for metric, values in band.items()
    }
    noise = NoiseRecord(
        baseline={"train.learning_rate": 0.001},
        data_sha256="0" * 64,
        alpha=0.05,
        repeats=5,
        runs=runs,
        variants={"algo": Variant(list(range(5)), bands, {}, {}, False, [])},
    )
    shift = {"lr-3": 0.03}  # one real winner among 4
    members = tuple(
        Member(
            run_id=f"{i:032x}",
            name=f"lr-{i}",
            experiment_id="1",
            values={
                "test_accuracy": list(0.95 + shift.get(f"lr-{i}", 0) + 0.004 * rng.standard_normal(3)),
                "test_loss": list(0.2 + 0.01 * rng.standard_normal(3)),
            },
            changed={"train.learning_rate": f"{i}e-4"},
            single_verdict="inconclusive",
            variant="algo",
            params={"train.learning_rate": f"{i % 2}e-4", "model.kwargs.dropout": f"0.{i // 2}"},
        )
        for i in range(4)
    )
    modes = {"test_accuracy": "max", "test_loss": "min"}
    sweep = Sweep("e175548b0e-983352590b", members, noise, "calibration/noise.json", "algo", modes, {})
    verdict = judge_family(sweep, 0.05, "holm")
    assert verdict.rows[0].name == "lr-3" and len(verdict.rows) == 4
    study = judge_as_study(sweep, "test_accuracy", "train.learning_rate", 0.05)  # 2 values, 2 nuisance settings each
    assert [arm.trials for arm in study.arms] == [2, 2] and study.arms[0].best == "lr-3"
    judged = JudgedSweep(sweep, verdict, "test_accuracy", expected_best_curve(sweep, "test_accuracy"), study=study)
    assert [point[0] for point in judged.curve] == [1, 2, 3, 4]
    text = report(judged)
    assert text.index(verdict.table()) < text.index("sweep_expected_best.png") < text.index("## Confirmation")
    assert text.index("## Confirmation") < text.index(study.table())
    assert description(judged, "1", "f" * 32).startswith(verdict.table())
    draw_plot(judged, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000


def test_an_experiments_compare_stage_tags_its_sweep(readme_typed: Path):
    """The README's experiments (`dvc exp run`: DVC sets DVC_EXP_BASELINE_REV) carry the sweep's tag, named from
    their base commit and the calibration that judged them, which `tracking sweep --all` selects; the first
    `dvc repro`'s run, no experiment, carries none."""
    from tracking.data.hashing import file_sha256

    project = readme_typed / "project"
    head = run(["git", "rev-parse", "HEAD"], project).stdout.strip()
    expected = sweep_name(head, file_sha256(project / "calibration/noise.json"))
    judged = [found for found in runs_of(project) if VERDICT_TAG in found.data.tags]
    tags = {found.data.tags.get(DVC_EXP_NAME_TAG): found.data.tags.get(SWEEP_TAG) for found in judged}
    assert tags.pop(None) is None and "reseeded" in tags, tags
    assert set(tags.values()) == {expected}, tags


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get(SWEEP_TESTS), reason="9 queued experiments and a confirmation: `make test-sweep`"
)
def test_a_queued_grid_is_judged_as_one_family_and_its_best_confirmed(tmp_path: Path):
    project = tiny_calibration(tmp_path / "project", ["algo"])
    write_params(project, compare={"candidate_repeats": 2})
    run(["dvc", "repro"], project)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "calibrated, the baseline judged"], project)

    run(["dvc", "exp", "run", "--queue", *GRID], project)
    start_workers(project)
    status = queue_drained(project)
    assert status.count("Success") == 8, status
    run(["dvc", "exp", "run", "--queue", "-n", "reseeded", "-S", "seeds.base=7"], project)
    run(["dvc", "exp", "run", "--run-all"], project)
    status = queue_drained(project)
    assert status.count("Success") == 9, status
    names = [line.split()[1] for line in status.splitlines() if line.endswith("Success")]
    for name in names:  # the one committed calibration, checked out in every temporary workspace, not re-run
        logs = run(["dvc", "queue", "logs", name], project).stdout
        assert "Stage 'calibrate' didn't change, skipping" in logs, logs
        assert "Running stage 'calibrate'" not in logs

    started = time.monotonic()
    done = run(["tracking", "sweep", "--all", "--confirm", "2"], project)
    took = time.monotonic() - started
    assert done.stdout.startswith("**") and "\nsweep " in done.stdout, done.stdout  # the table, then the headline

    client = client_for(project)
    (experiment,) = [found.experiment_id for found in client.search_experiments() if found.name == "test"]
    runs = client.search_runs([experiment], max_results=1000)
    calibrations = [found for found in runs if found.data.tags.get(NOISE_ROLE_TAG) == CALIBRATION_ROLE]
    assert len(calibrations) == 1 and len([found for found in runs if NOISE_REPEAT_TAG in found.data.tags]) == 3
    (parent,) = [found for found in runs if found.data.tags.get(NOISE_ROLE_TAG) == SWEEP_ROLE]
    assert parent.info.status == "FINISHED"
    note = parent.data.tags[MLFLOW_NOTE_TAG]
    assert note.startswith("**") and note.splitlines()[2].startswith("| rank"), note  # the table, first on the page
    assert all(name in note for name in names)
    grouped = client.search_runs([experiment], tag_is(SWEEP_TAG, parent.data.tags[SWEEP_TAG]), max_results=100)
    candidates = [found for found in grouped if found.info.run_id != parent.info.run_id]
    assert sorted(found.data.tags[DVC_EXP_NAME_TAG] for found in candidates) == sorted(names)
    assert sorted(int(found.data.tags[SWEEP_RANK_TAG]) for found in candidates) == list(range(1, 10))
    for found in candidates:  # each kept its compare stage's extra run, a child of its run
        extras = client.search_runs([experiment], tag_is(MLFLOW_PARENT_RUN_TAG, found.info.run_id))
        assert [extra.data.tags[CANDIDATE_REPEAT_TAG] for extra in extras] == ["1"]
    confirmations = client.search_runs([experiment], tag_is(MLFLOW_PARENT_RUN_TAG, parent.info.run_id))
    assert sorted(found.data.tags[CANDIDATE_REPEAT_TAG] for found in confirmations) == ["2", "3"]
    assert {found.info.status for found in confirmations} == {"FINISHED"}
    for found in confirmations:  # kept like every repeat
        assert (project / "calibration/repeats" / f"{found.data.tags[REPEAT_KEY_TAG]}.npz").is_file()
    artifacts = {item.path for item in client.list_artifacts(parent.info.run_id, "sweep")}
    assert {"sweep/sweep.md", "sweep/sweep_expected_best.png", "sweep/sweep.json"} <= artifacts
    assert "expected_best_test_accuracy" in parent.data.metrics
    report = (project / "reports/sweep.md").read_text()
    assert report.index("| rank") < report.index("sweep_expected_best.png") < report.index("## Confirmation")
    assert "confirmed on fresh seeds" in report

    again = run(["tracking", "sweep", "--all", "--confirm", "2"], project)  # the confirmation runs are kept
    assert "candidate #" not in again.stderr, again.stderr
    assert_user_error(run(["tracking", "sweep", "no-such-exp"], project, check=False), "no-such-exp")
    assert_user_error(
        run(["tracking", "sweep", "--filter", "tags.`noise.sweep` = 'none'"], project, check=False),
        "no experiments selected",
    )
    print(f"tracking sweep --all --confirm 2: {took:.0f} s")
