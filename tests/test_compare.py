"""The compare stage: which band a candidate is judged against, and the verdict end to end with real DVC."""

import json
from pathlib import Path

import pytest

from conftest import client_for, run, runs_of, write_params
from pipelines.compare import choose_variant
from tracking.errors import RunStateError
from tracking.params import Params

ALL = ["algo+impl", "algo", "impl", "control"]


def test_choose_variant():
    baseline = Params()
    assert choose_variant(Params(), baseline, False, ALL)[0] == "control"
    seeds_only = Params.model_validate({"seeds": {"dropout": 5}})
    assert choose_variant(seeds_only, baseline, False, ALL) == ("algo+impl", "differs from the baseline only in seeds")
    changed = Params.model_validate({"train": {"learning_rate": 0.01}, "seeds": {"base": 1}})
    variant, reason = choose_variant(changed, baseline, False, ALL)
    assert variant == "algo+impl" and "train.learning_rate" in reason and "seeds" not in reason
    assert "data content" in choose_variant(Params(), baseline, True, ALL)[1]
    nondeterministic = Params.model_validate({"determinism": {"op_determinism": False}})
    assert "determinism.op_determinism" in choose_variant(nondeterministic, baseline, False, ALL)[1]
    assert choose_variant(seeds_only, baseline, False, ["algo"])[0] == "algo"
    with pytest.raises(RunStateError, match="add one of control"):
        choose_variant(Params(), baseline, False, ["algo"])


@pytest.mark.slow
def test_calibrate_then_compare_and_edit_without_recalibrating(project: Path):
    first = run(["dvc", "repro"], project)
    assert "calibrated 12 runs over 4 variant(s)" in first.stdout
    noise = json.loads((project / "calibration/noise.json").read_text())
    assert noise["variants"]["control"]["bit_identical"] is True
    assert noise["variants"]["impl"]["impl_noise"] == "simulated" and noise["variants"]["impl"]["bit_identical"] is False
    compare = json.loads((project / "metrics/compare.json").read_text())
    assert compare["band_variant"] == "control" and compare["verdict"] == "within_noise"

    client = client_for(project)
    runs = runs_of(project)
    parent = next(r for r in runs if r.data.tags.get("noise.role") == "calibration")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["noise.variant"] for r in children) == sorted(ALL * 3)
    assert all(r.info.status == "FINISHED" for r in runs)
    candidate = next(r for r in runs if r.data.tags.get("pipeline.stage") == "compare")
    assert candidate.data.tags["noise.verdict"] == "within_noise" and "z_test_accuracy" in candidate.data.metrics
    assert {a.path for a in client.list_artifacts(candidate.info.run_id, "compare")} >= {
        "compare/compare.md", "compare/accuracy_spread.png", "compare/churn_heatmap.png", "compare/per_class_spread.png"}

    write_params(project, train={"learning_rate": 0.01})
    second = run(["dvc", "repro"], project)
    assert "Stage 'calibrate' didn't change, skipping" in second.stdout
    assert "Running stage 'train'" in second.stdout and "Running stage 'compare'" in second.stdout
    compare = json.loads((project / "metrics/compare.json").read_text())
    assert compare["band_variant"] == "algo+impl"
    report = (project / "reports/compare.md").read_text()
    assert "train.learning_rate" in report and "Holm-Bonferroni" in report

    write_params(project, compare={"fail_on_drift": True, "known_bands": {"test_accuracy": {"mean": 0.999, "std": 0.0001, "n": 10}}})
    gated = run(["dvc", "repro"], project, check=False)
    assert gated.returncode != 0 and "compare.fail_on_drift is true" in gated.stderr
    assert json.loads((project / "metrics/compare.json").read_text())["verdict"] == "exceeds_noise"
