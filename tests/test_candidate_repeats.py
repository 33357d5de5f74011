"""A replicated candidate (`compare.candidate_repeats`, issue 26): the compare stage trains the candidate's extra runs
through the calibration's machinery, kept and resumed, and judges the runs as two samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import client_for, run, train_run_id, write_params

from tracking.config.params import Params
from tracking.determinism.seeds import resolve_seeds
from tracking.layout import REPEATS_DIR
from tracking.names import (
    BAND_VARIANT_TAG,
    CANDIDATE_REPEAT_TAG,
    CANDIDATE_RUNS_TAG,
    MLFLOW_PARENT_RUN_TAG,
    NOISE_VARIANT_TAG,
)
from tracking.repeats.candidate_runs import extra_runs
from tracking.repeats.variants import variant_setup


def test_candidate_draws_are_not_the_calibrations_and_control_trains_none():
    """A candidate that keeps the baseline's seeds must not re-draw a band run's seeds (its runs would be paired
    with the band's, not independent); under CONTROL the extra runs would be copies."""
    params = Params.model_validate({"compare": {"candidate_repeats": 3}})
    seeds = resolve_seeds(params.seeds)
    for variant in ("algo", "algo+impl", "impl"):
        band = {variant_setup(variant, r, params, seeds, True, False, "repeat")[1:3] for r in range(1, 6)}
        ours = {variant_setup(variant, r, params, seeds, True, False, "candidate")[1:3] for r in range(1, 6)}
        assert band.isdisjoint(ours), variant
    assert variant_setup("algo", 2, params, seeds, True, False) == variant_setup(
        "algo", 2, params, seeds, True, False, "repeat"
    )
    assert [extra_runs(params.compare, name) for name in ("algo", "impl", "control")] == [2, 2, 0]
    one = Params.model_validate({"compare": {"candidate_repeats": 1}})
    assert extra_runs(Params().compare, "algo") == 2 and extra_runs(one.compare, "algo") == 0


def compare_with(project: Path, repeats: int) -> str:
    """`dvc exp run -S compare.candidate_repeats=<repeats>`: the output of the compare stage, alone re-run."""
    done = run(
        ["dvc", "exp", "run", "-n", f"replicated-{repeats}", "-S", f"compare.candidate_repeats={repeats}"], project
    )
    assert "Running stage 'train'" not in done.stdout
    return done.stdout + done.stderr


@pytest.mark.slow
def test_candidate_runs_fixed_then_until_decided(calibrated: Path, tmp_path: Path):
    project = tmp_path / "project"
    shutil.copytree(calibrated, project, symlinks=True)
    candidate = train_run_id(project)
    noise = json.loads((project / "calibration/noise.json").read_text())
    ended = client_for(project).get_run(candidate).info.end_time

    output = compare_with(project, 3)
    assert "; 3 candidate runs (2 trained here); judged against algo (3 runs). Report: reports/compare.md" in output
    summary = json.loads((project / "metrics/compare.json").read_text())
    assert summary["candidate_runs"] == 3 and summary["band_variant"] == "algo"
    report = (project / "reports/compare.md").read_text()
    assert "3 candidate runs: the pooled two-sample t on the means" in report

    client = client_for(project)
    # Training the extra runs under the candidate's run does not lengthen it: its duration stays train's and evaluate's.
    assert client.get_run(candidate).info.end_time == ended
    extras = client.search_runs(
        [client.get_run(candidate).info.experiment_id], f"tags.`{MLFLOW_PARENT_RUN_TAG}` = '{candidate}'"
    )
    assert sorted(found.data.tags[CANDIDATE_REPEAT_TAG] for found in extras) == ["1", "2"]
    for found in extras:
        tags = found.data.tags
        assert found.info.status == "FINISHED" and tags[BAND_VARIANT_TAG] == "algo" and NOISE_VARIANT_TAG not in tags
        assert tags["pipeline.stage"] == "compare" and tags["dvc.exp_name"] == "replicated-3"
        assert found.data.params["train.learning_rate"] == client.get_run(candidate).data.params["train.learning_rate"]
    seeds = {found.data.tags["prov.seeds.init"] for found in extras} | {
        client.get_run(candidate).data.tags["prov.seeds.init"]
    }
    band_seeds = {str(found["seeds"]["init"]) for found in noise["runs"]}
    assert len(seeds) == 3 and seeds.isdisjoint(band_seeds)  # seeds varied as ALGO varies them, on draws of their own
    weights = {found.data.tags["prov.weights_sha256"] for found in extras}

    from tracking.inspect.diff.runs import load_run

    assert load_run(client, "replicated-3", project).run_id == candidate  # by name: the candidate, not a child

    output = compare_with(project, 4)  # the kept runs are reused: only the new one trains
    assert "; 4 candidate runs (1 trained here); judged against algo (3 runs)" in output
    assert len(list((project / REPEATS_DIR).glob("*.npz"))) == len(noise["runs"]) + 3
    kept = client.search_runs(
        [client.get_run(candidate).info.experiment_id], f"tags.`{MLFLOW_PARENT_RUN_TAG}` = '{candidate}'"
    )
    assert len(kept) == 3 and weights < {found.data.tags["prov.weights_sha256"] for found in kept}

    # `compare.candidate_repeats: auto`: a look after each run; here the train stage's run alone decides (a shift
    # that matters of 0.5, which three band runs see), so it stops at the first look and trains nothing.
    write_params(
        project,
        compare={
            "candidate_repeats": "auto",
            "candidate_repeats_max": 3,
            "min_effect": {"test_accuracy": 0.5, "test_loss": 5},
        },
    )
    done = run(["dvc", "repro", "compare"], project)
    output = done.stdout + done.stderr
    assert "candidate run 1 of at most 3: within_noise, stopping (decided)" in output
    assert "candidate_repeats auto: 1 of at most 3, decided; judged against algo" in output
    summary = json.loads((project / "metrics/compare.json").read_text())
    assert summary["verdict"] == "within_noise" and summary["candidate_runs"] == 1
    assert (summary["candidate_runs_cap"], summary["candidate_runs_stopped"]) == (3, "decided")
    assert "1 of at most 3, stopped: **decided**" in (project / "reports/compare.md").read_text()
    assert client.get_run(candidate).data.tags[CANDIDATE_RUNS_TAG] == "1 of at most 3: decided"
    after = client.search_runs(
        [client.get_run(candidate).info.experiment_id], f"tags.`{MLFLOW_PARENT_RUN_TAG}` = '{candidate}'"
    )
    assert len(after) == 3  # nothing trained: the three kept runs are the fixed design's
