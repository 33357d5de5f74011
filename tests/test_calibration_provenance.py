"""Calibration repeats carry the provenance that applies to them, so they line up with the candidate's run."""

import json
import sys
from pathlib import Path

import pytest
from conftest import client_for, recorded, run, runs_of, train_run_id

from tracking.inspect.diff import load_run

# Tags of the candidate's run that cannot apply to a repeat: the dvc.lock hashes of the `train` stage's deps,
# which `evaluate` logs because the candidate was made by `train`; a repeat is made by `calibrate` (its data
# content and code are recorded in full: the manifest, prov.dvc.deps.prepare.*, the git commit and diff).
NOT_FOR_REPEATS = ("prov.dvc.deps.train.",)


def candidate_and_repeat(project: Path):
    candidate = train_run_id(project)
    runs = {found.info.run_id: found for found in runs_of(project)}
    repeat = next(found for found in runs.values() if found.data.tags.get("noise.repeat") == "0")
    return runs[candidate], repeat


@pytest.mark.slow
@pytest.mark.format
def test_a_repeat_carries_every_provenance_tag_the_candidate_has(calibrated: Path):
    candidate, repeat = candidate_and_repeat(calibrated)
    candidate_fields, repeat_fields = (recorded(calibrated, found.info.run_id) for found in (candidate, repeat))
    expected = {key for key in candidate_fields if key.startswith("prov.") and not key.startswith(NOT_FOR_REPEATS)}
    assert len(expected) > 50
    assert expected - set(repeat_fields) == set()
    assert {key for key in candidate_fields if key.startswith(NOT_FOR_REPEATS)}, "the exception list is stale"
    tagged = {key for key in candidate.data.tags if key.startswith("prov.") and not key.startswith(NOT_FOR_REPEATS)}
    assert tagged - set(repeat.data.tags) == set()  # the searchable ones as tags on both
    same = ("prov.git.commit", "prov.software.versions.keras", "prov.cpu.model", "prov.dvc.deps.prepare.data/raw")
    assert {key: repeat_fields[key] for key in same} == {key: candidate_fields[key] for key in same}
    assert repeat.data.tags["prov.seeds.init"] != candidate.data.tags["prov.seeds.init"]
    assert repeat.data.tags["prov.weights_sha256"] != candidate.data.tags["prov.weights_sha256"]
    assert repeat.data.params.keys() == candidate.data.params.keys()
    assert {key: value for key, value in repeat.data.params.items() if not key.startswith("seeds.")} == {
        key: value for key, value in candidate.data.params.items() if not key.startswith("seeds.")
    }
    assert [dataset.dataset.digest for dataset in repeat.inputs.dataset_inputs] == [
        dataset.dataset.digest for dataset in candidate.inputs.dataset_inputs
    ]
    # compute.system_metrics is on by default: every training run says what its worker's hardware did; the
    # calibration's parent run trains nothing.
    system = {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"}
    assert system <= set(repeat.data.metrics) and system <= set(candidate.data.metrics)
    (parent,) = [found for found in runs_of(calibrated) if found.data.tags.get("noise.role") == "calibration"]
    assert not [key for key in parent.data.metrics if key.startswith("system/")]


@pytest.mark.slow
def test_the_calibration_run_s_page_states_its_band(calibrated: Path):
    """Issue 50: the calibration parent's page showed child links and 115 tags, no description and no metrics; the
    band a user came for was only in the artifact calibration/noise.json."""
    (parent,) = [found for found in runs_of(calibrated) if found.data.tags.get("noise.role") == "calibration"]
    noise = json.loads((calibrated / "calibration/noise.json").read_text())
    band = noise["variants"]["algo"]["bands"]["test_accuracy"]
    clipped = {"low": max(band["low"], 0.0), "high": min(band["high"], 1.0)}  # an accuracy's interval within [0, 1]
    for figure in ("n", "mean", "std", "low", "high"):
        expected = clipped.get(figure, band[figure])
        assert parent.data.metrics[f"band.algo.test_accuracy.{figure}"] == pytest.approx(expected, rel=1e-12)
    assert {key.split(".")[2] for key in parent.data.metrics if key.startswith("band.")} == {
        "test_accuracy",
        "test_loss",
    }
    lines = parent.data.tags["mlflow.note.content"].splitlines()
    assert lines[0] == "**Noise band: 3 calibration runs over 1 variant(s)**"
    assert f"| algo | test_accuracy | 3 | {band['mean']:.4g} | {band['std']:.3g} | " in "\n".join(lines)
    assert lines[-1] == (
        f"Drawn: [calibration/band.png](#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}/artifacts/"
        "calibration/band.png). Every banded metric, each run and its seeds: `calibration/noise.json`."
    )


@pytest.mark.slow
def test_diff_of_a_repeat_and_the_candidate_names_only_the_seeds(calibrated: Path):
    candidate, repeat = candidate_and_repeat(calibrated)
    done = run(
        [sys.executable, "-m", "tracking", "diff", repeat.info.run_id, candidate.info.run_id, "--format", "json"],
        calibrated,
    )
    found = json.loads(done.stdout)
    assert [group["name"] for group in found["groups"] if not group["identical"]] == ["seeds"], found["groups"]
    assert found["conclusion"].startswith("only seeds differ"), found["conclusion"]


def test_an_experiment_name_means_its_candidate_not_its_later_calibration_runs(tmp_path: Path):
    client = client_for(tmp_path)
    experiment = client.create_experiment("test")
    tags = {"dvc.exp_name": "lucky-lamb"}
    candidate = client.create_run(experiment, tags={**tags, "pipeline.stage": "evaluate"}, start_time=1000)
    client.create_run(experiment, tags={**tags, "pipeline.stage": "calibrate"}, start_time=2000)
    assert load_run(client, "lucky-lamb").run_id == candidate.info.run_id
