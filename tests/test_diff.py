"""`tracking diff`: the story of a worse rerun, built for real; and the pieces it is made of."""

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, client_for, project_env, run, train_run_id, write_params

from tracking.inspect.diff import RunDiff, RunSnapshot
from tracking.inspect.diff.bands import band_for, differences
from tracking.inspect.diff.changes import Change, GroupDiff
from tracking.inspect.diff.code import code_group, split_diff
from tracking.inspect.diff.conclusion import conclude
from tracking.inspect.diff.metrics import metric_deltas
from tracking.names import WEIGHTS_TAG
from tracking.noise.knobs import LIBRARY, advising
from tracking.noise.policy import INCONCLUSIVE, choose_band
from tracking.noise.record import NoiseRecord

DATA = "data/raw/digits.npz"


def save_digits(root: Path, samples: int) -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    np.savez(root / DATA, x=digits.images[:samples].astype("float32") / 16.0, y=digits.target[:samples])


def repro(root: Path, *targets: str) -> str:
    run(["dvc", "repro", *targets], root)
    return train_run_id(root)


def diff(root: Path, a: str, b: str, fmt: str = "json"):
    done = run([sys.executable, "-m", "tracking", "diff", a, b, "--format", fmt], root)
    return json.loads(done.stdout) if fmt == "json" else done.stdout


@pytest.mark.slow
def test_diff_names_grown_data_and_changed_lr_then_calls_a_seed_only_gap_noise(project: Path):
    save_digits(project, 900)
    run(["dvc", "add", "-q", DATA], project)
    write_params(project, data={"source": DATA}, calibration={"variants": ["algo"]})
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "own data"], project)
    colleague = repro(project, "evaluate", "calibrate")

    save_digits(project, 1200)
    run(["dvc", "add", "-q", DATA], project)
    write_params(project, train={"learning_rate": 0.01})
    newcomer = repro(project, "evaluate")

    found = diff(project, colleague, newcomer)
    changed = {group["name"]: group for group in found["groups"] if not group["identical"]}
    assert set(changed) == {"data", "params"}, found["groups"]
    data = {change["key"]: (change["a"], change["b"]) for change in changed["data"]["changes"]}
    assert data["train samples"][1] > data["train samples"][0] and "content_sha256" in data
    assert [change["key"] for change in changed["params"]["changes"]] == ["train.learning_rate"]
    assert found["conclusion"].startswith("data and train.learning_rate changed")
    assert "beyond the ALGO band (t = " in found["conclusion"] and "sigma" not in found["conclusion"]
    assert found["band"]["variant"] == "algo"

    run(["git", "checkout", "--", f"{DATA}.dvc"], project)
    run(["dvc", "checkout", "-q", DATA], project)
    write_params(project, train={"learning_rate": 0.001}, seeds={"init": 7, "shuffle": 8, "dropout": 9})
    restored = repro(project, "evaluate")

    found = diff(project, colleague, restored)
    assert [group["name"] for group in found["groups"] if not group["identical"]] == ["seeds"]
    assert found["band"]["variant"] == "algo" and found["band"]["reason"] == "the runs differ in seeds"
    # baseline.yaml still names sklearn:digits, so the colleague's run is not the calibrated baseline: B is judged around A
    assert found["band"]["reference"] == "run A" and found["metrics"][0]["reference_runs"] == 1
    # within noise, but 3 calibration runs and one candidate run cannot see the smallest shifts that matter
    assert {delta["verdict"] for delta in found["metrics"]} <= {"within_noise", "inconclusive"}
    assert found["verdict"] == "inconclusive" and len(found["metrics"]) == 2
    assert found["weights_identical"] is False
    assert found["conclusion"].startswith("only seeds differ; the ALGO band leaves test_")
    assert "inconclusive: within noise, but blind to a shift of " in found["conclusion"]
    assert "more candidate runs" in found["conclusion"] or "not even 100 runs" in found["conclusion"]

    text = diff(project, colleague, restored, "text")
    assert (
        "seeds (3 of 6 fields differ)" in text
        and "identical: backend" in text
        and ", data" in text
        and "Conclusion: only seeds differ" in text
    )
    markdown = diff(project, colleague, newcomer, "md")
    assert "| `train.learning_rate` | 0.001 | 0.01 |" in markdown and "**Conclusion:** data and" in markdown

    # An experiment that changes only what `train` does not depend on trains no run to tag with its name: the name
    # means the run DVC reused, the one that trained what its outputs/run.json records, for diff and rerun alike.
    run(["dvc", "exp", "run", "-n", "moved", "-S", "compute.workers=1"], project)
    done = run([sys.executable, "-m", "tracking", "diff", colleague, "moved", "--format", "json"], project)
    assert json.loads(done.stdout)["b"]["run_id"] == restored
    assert done.stderr.strip().splitlines() == [
        f"'moved': no run is tagged dvc.exp_name with that name; using run {restored}, which trained what its "
        "outputs/run.json records (the training DVC ran or reused there)"
    ]
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    client_for(elsewhere).search_experiments()
    command = [sys.executable, "-m", "tracking", "diff", "moved", colleague]
    uri = f"sqlite:///{elsewhere / 'mlflow.db'}"
    done = run(command, project, env=project_env(MLFLOW_TRACKING_URI=uri), check=False)
    assert_user_error(
        done, "no run in this store trained what outputs/run.json records at 'moved'", "MLFLOW_TRACKING_URI"
    )


def test_a_revision_whose_run_file_a_clone_lacks_names_the_file_and_how_to_fetch_it(calibrated: Path, tmp_path: Path):
    """A clone has dvc.lock from git but not the DVC cache it points into: `tracking diff HEAD RUN` there says
    that, instead of 'not found'; a revision whose lock names no run file is still plainly not found."""
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(calibrated), str(clone)], tmp_path)
    shutil.copy(calibrated / "dvc.lock", clone / "dvc.lock")
    run(["git", "add", "dvc.lock"], clone)
    run(["git", "commit", "-qm", "pipeline ran"], clone)
    candidate = train_run_id(calibrated)
    env = project_env(MLFLOW_TRACKING_URI=f"sqlite:///{calibrated / 'mlflow.db'}")

    done = run([sys.executable, "-m", "tracking", "diff", "HEAD", candidate], clone, env=env, check=False)
    assert_user_error(
        done,
        "the outputs/run.json that dvc.lock names at 'HEAD' (md5 ",
        "this project has no DVC remote to pull it from",
    )
    assert "dvc pull" not in done.stderr  # issue 36: no remote, nothing to pull from
    run(["dvc", "remote", "add", "-d", "team", str(tmp_path / "remote")], clone)
    done = run([sys.executable, "-m", "tracking", "diff", "HEAD", candidate], clone, env=env, check=False)
    assert_user_error(done, "`git checkout HEAD && dvc pull outputs/run.json` from the DVC remote")
    done = run([sys.executable, "-m", "tracking", "diff", "HEAD~1", candidate], clone, env=env, check=False)
    assert_user_error(done, "run 'HEAD~1' not found", "no run with that id, name or id prefix")


def test_unknown_run_or_no_store_is_one_line_and_exit_2(project: Path):
    command = [sys.executable, "-m", "tracking", "diff", "0" * 32, "no-such-exp"]
    done = run(command, project, env=project_env(), check=False)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"error: no MLflow store {project / 'mlflow.db'} yet (nothing was logged here); run the pipeline first, "
        "or set MLFLOW_TRACKING_URI to the store that holds the runs"
    ]
    assert not (project / "mlflow.db").exists()
    client_for(project).search_experiments()
    done = run(command, project, env=project_env(), check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: run '{'0' * 32}' not found in sqlite:///{project / 'mlflow.db'}: no run with that id, name or id "
        "prefix and no run tagged dvc.exp_name with that name; give a run's id or its first 8 characters, its name "
        "(train-29bdb4), a DVC experiment's name or a git revision; `mlflow ui` lists runs with their names and ids"
    ]


def test_a_run_is_found_by_the_name_and_id_prefix_that_diff_and_the_ui_print(tmp_path: Path):
    """Issue 36: `train-29bdb4` and an 8-character id prefix, as printed, were refused."""
    from tracking.errors import RunNotFound, RunSelectionError
    from tracking.inspect.diff import load_run

    client = client_for(tmp_path)
    experiment = client.create_experiment("team")
    first, second, twin = (client.create_run(experiment, run_name=name) for name in ("train-aaaaaa", "x", "x"))
    assert load_run(client, "train-aaaaaa").run_id == first.info.run_id
    assert load_run(client, second.info.run_id[:8]).run_id == second.info.run_id
    with pytest.raises(RunSelectionError, match=rf"2 runs are named 'x': .*{twin.info.run_id}"):
        load_run(client, "x")
    ids = [found.info.run_id for found in (first, second, twin)]
    absent = next(digit * 8 for digit in "0123" if not any(run_id.startswith(digit * 8) for run_id in ids))
    with pytest.raises(RunNotFound, match="no run with that id, name or id prefix"):
        load_run(client, absent)


def snapshot(metrics: dict[str, float] | None = None, **tags: str) -> RunSnapshot:
    return RunSnapshot("r", "", "0", "FINISHED", {}, metrics or {}, dict(tags), None, "")


DET = {"prov.determinism.effective.op_determinism": "true"}


def test_band_choice_follows_what_differs():
    det, nondet = snapshot(**DET), snapshot()
    group = lambda name: GroupDiff(name, 1, [Change("train.learning_rate", "0.001", "0.01")])  # noqa: E731
    all_variants = ["algo+impl", "algo", "impl", "control"]

    def chosen(groups, a, b, available=all_variants):
        return choose_band(differences(groups, a, b), available)

    assert chosen([group("seeds")], det, det).variant == "algo"
    assert chosen([group("seeds")], det, nondet).variant == "algo+impl"
    assert chosen([group("seeds"), group("hardware")], det, det).variant == "algo+impl"
    assert chosen([], nondet, nondet).variant == "impl"
    assert chosen([group("software")], det, det).variant == "impl"
    assert chosen([], det, det).variant == "control"
    # a changed cause is judged (did it move the metric beyond reseeding?), as the compare stage does
    params = chosen([group("params")], det, det)
    assert params.variant == "algo" and params.reason.startswith("train.learning_rate changed")
    assert chosen([group("params")], det, nondet).variant == "algo+impl"
    # never a band narrower than the noise in play
    missing = chosen([group("seeds")], det, nondet, ["algo"])
    assert missing.variant is None and "add one of algo+impl to calibration.variants" in missing.reason
    with advising(LIBRARY):  # a team's script calibrates with `tracking calibrate`, its project has no such key
        missing = chosen([group("seeds")], det, nondet, ["algo"])
    assert "calibrate with one of algo+impl in tracking calibrate --variants" in missing.reason
    assert chosen([], det, det, ["algo"]).variant == "algo"


def test_weights_bit_identical_to_control_are_judged_against_control():
    # issue 34: `tracking judge` of such a run took the ALGO band "because code (.gitignore) changed"
    variant = {"runs": [], "bands": {}, "churn": {}, "weight_distance": {}, "bit_identical": True}
    noise = NoiseRecord.from_dict(
        {"baseline": {}, "data_sha256": "d", "alpha": 0.05, "repeats": 3, "runs": [],
         "variants": {"algo": {**variant, "weights_sha256": ["x", "y"]}, "control": {**variant, "weights_sha256": ["c"]}}}
    )  # fmt: skip
    code = [GroupDiff("code", 2, [Change("file .gitignore", "a", "b")])]
    same = band_for(noise, code, snapshot(**DET), snapshot(**DET, **{WEIGHTS_TAG: "c"}))
    assert same.variant == "control" and "bit-identical" in same.reason
    assert band_for(noise, code, snapshot(**DET), snapshot(**DET, **{WEIGHTS_TAG: "z"})).variant == "algo"


def test_files_dvc_writes_declared_outputs_and_prose_are_not_code(tmp_path: Path):
    (tmp_path / "dvc.yaml").write_text("stages:\n  train:\n    cmd: python train.py\n    metrics: [metrics.json]\n")
    run(["git", "init", "-q"], tmp_path)
    written = (".gitignore", "data/.gitignore", "metrics.json", "README.md", "docs/guide.rst")
    parts = "".join(f"diff --git a/{path} b/{path}\n+x\n" for path in written)
    edited = RunSnapshot("r", "", "0", "FINISHED", {}, {}, DET, None, parts + "diff --git a/train.py b/train.py\n+y\n")
    assert [change.key for change in code_group(snapshot(**DET), edited, tmp_path, set()).changes] == ["file train.py"]
    written = RunSnapshot("r", "", "0", "FINISHED", {}, {}, DET, None, parts)
    assert code_group(snapshot(**DET), written, tmp_path, set()).changes == []


def test_dvc_files_read_every_path_as_written(tmp_path: Path):
    """Paths YAML would type (a float, a boolean, a date) stay the file's text; a merge key is merged; bad YAML is
    the project's one-line error."""
    from tracking.dvc_files import declared_outputs, stage_deps
    from tracking.errors import RepoError

    (tmp_path / "dvc.yaml").write_text(
        "shared: &shared\n  deps: [on, 1e5]\nstages:\n  train:\n    cmd: python train.py\n    deps: [2024-01-02, yes]\n"
        "    outs: [no, 1e-5, {off: {cache: false}}]\n  fit:\n    <<: *shared\n    cmd: python fit.py\n"
    )
    run(["git", "init", "-q"], tmp_path)
    assert [str(dep) for dep in stage_deps(tmp_path, "train")] == ["2024-01-02", "yes"]
    assert [str(dep) for dep in stage_deps(tmp_path, "fit")] == ["on", "1e5"]
    (tmp_path / "dvc.yaml").write_text("stages:\n  train:\n    outs: [no, 1e-5, {off: {cache: false}}]\n")
    assert declared_outputs(tmp_path, tmp_path) == ["1e-5", "dvc.lock", "no", "off"]
    (tmp_path / "dvc.yaml").write_text("stages:\n  train: [unclosed\n")
    with pytest.raises(RepoError, match=r"is not a valid dvc\.yaml"):
        declared_outputs(tmp_path, tmp_path)


def test_tied_band_cannot_judge_through_diff():
    a, b = (
        snapshot({"test_accuracy": 356 / 360, "test_loss": 0.05}, **DET),
        snapshot({"test_accuracy": 352 / 360, "test_loss": 0.06}, **DET),
    )
    tied = {"mean": 356 / 360, "std": 0.0, "n": 3, "source": "calibration:algo"}
    spread = {"mean": 0.05, "std": 0.01, "n": 3, "source": "calibration:algo"}
    deltas = metric_deltas(
        a,
        b,
        ["test_accuracy", "test_loss"],
        {"test_accuracy": tied, "test_loss": spread},
        0.05,
        baseline_reference=True,
    )
    # test_loss is within noise, but 3 runs of std 0.01 and 1 do not see its default smallest shift (4 band stds)
    assert [delta.verdict for delta in deltas] == [INCONCLUSIVE, INCONCLUSIVE]
    assert "blind to a shift of 0.04 (the default, 4 band stds" in deltas[1].judgement.note
    assert deltas[0].z is None and deltas[0].as_dict()["within_noise"] is None
    groups = [GroupDiff("seeds", 7, [Change("init", "1", "2")])]
    band = {
        "variant": "algo",
        "reason": "the runs differ in seeds",
        "calibration_run": "c",
        "repeats": 3,
        "reference": "run A",
    }
    text = conclude(RunDiff(a, b, groups, False, deltas, band, 0.05))
    assert text.startswith("only seeds differ; the ALGO band leaves test_accuracy inconclusive: 3 identical values")
    assert "raise calibration.repeats" in text and "inf" not in text


def test_split_diff_keeps_each_file_part():
    text = (
        "diff --git a/params.yaml b/params.yaml\n--- a/params.yaml\n+++ b/params.yaml\n@@ -1 +1 @@\n-a: 1\n+a: 2\n"
        "diff --git a/pipelines/train.py b/pipelines/train.py\n@@ -1 +1 @@\n-x\n+y\n"
    )
    parts = split_diff(text)
    assert list(parts) == ["params.yaml", "pipelines/train.py"]
    assert parts["pipelines/train.py"].endswith("+y\n") and "".join(parts.values()) == text


def test_control_with_different_weights_and_equal_metrics_is_drift_in_every_word():
    """Issue 26: this read `exceeds_noise` and "inside the CONTROL band (0.0 sigma): noise"."""
    from tracking.inspect.diff.output import render

    metrics = {"test_accuracy": 356 / 360, "test_loss": 0.05}
    a = snapshot(metrics, **DET, **{"prov.weights_sha256": "a" * 64})
    b = snapshot(metrics, **DET, **{"prov.weights_sha256": "b" * 64})
    control = {"mean": 356 / 360, "std": 0.0, "n": 3, "source": "calibration:control"}
    loss = {"mean": 0.05, "std": 0.0, "n": 3, "source": "calibration:control"}
    deltas = metric_deltas(
        a, b, list(metrics), {"test_accuracy": control, "test_loss": loss}, 0.05, baseline_reference=True, exact=True
    )
    band = {"variant": "control", "reason": "r", "calibration_run": "c", "repeats": 3, "reference": "run A"}
    result = RunDiff(a, b, [], False, deltas, band, 0.05)
    result = RunDiff(**{**result.__dict__, "conclusion": conclude(result)})
    assert result.verdict == "exceeds_noise"
    assert "not bit-identical" in result.conclusion and "metrics judged are equal" in result.conclusion
    assert "noise" not in result.conclusion.replace("drift that chance", "") and "sigma" not in result.conclusion
    json.loads(render(result, "json"))  # strict JSON
    for fmt in ("text", "md"):
        assert "sigma" not in render(result, fmt)


def test_diff_text_names_the_t_statistic_and_never_prints_p_as_zero():
    from tracking.inspect.diff.output import render

    a, b = snapshot({"test_accuracy": 0.98}, **DET), snapshot({"test_accuracy": 0.10}, **DET)
    spread = {"mean": 0.98, "std": 0.001, "n": 20, "source": "calibration:algo"}
    deltas = metric_deltas(a, b, ["test_accuracy"], {"test_accuracy": spread}, 0.05)
    band = {"variant": "algo", "reason": "r", "calibration_run": "c", "repeats": 20, "reference": "run A"}
    result = RunDiff(a, b, [GroupDiff("seeds", 7, [Change("init", "1", "2")])], None, deltas, band, 0.05)
    result = RunDiff(**{**result.__dict__, "conclusion": conclude(result)})
    text = render(result)
    assert "t=-" in text and "p < 1e-16" in text and "sigma" not in text and "p=0 " not in text
    assert "beyond the ALGO band (t = -" in result.conclusion and "p < 1e-16" in result.conclusion
    assert "band std 0.001 (n=" in text and "95% interval" not in text
    assert "is detected at least 80% of the time" in text
    row = json.loads(render(result, "json"))["metrics"][0]
    assert "sigma" not in row and row["scale"] == pytest.approx(0.001 * math.sqrt(2))


def test_better_or_worse_is_read_from_the_gap_t_is_from():
    """B above A but below the baseline's mean, t from that mean: the row read "better" beside a negative t."""
    from tracking.inspect.diff.output import render

    a, b = snapshot({"test_accuracy": 0.95}, **DET), snapshot({"test_accuracy": 0.96}, **DET)
    spread = {"mean": 0.98, "std": 0.005, "n": 5, "source": "calibration:algo"}
    deltas = metric_deltas(a, b, ["test_accuracy"], {"test_accuracy": spread}, 0.05, baseline_reference=True)
    assert deltas[0].direction == "worse" and deltas[0].z < 0
    band = {"variant": "algo", "reason": "r", "calibration_run": "c", "repeats": 5, "reference": "the mean"}
    result = RunDiff(a, b, [GroupDiff("seeds", 7, [Change("init", "1", "2")])], None, deltas, band, 0.05)
    (row,) = [line for line in render(result).splitlines() if line.startswith("  test_accuracy ")]
    assert "+0.01  (B - baseline mean 0.98: -0.02 worse)  t=-" in row and "better" not in row, row
    # judged around run A (no baseline mean), the word stays beside B - A
    deltas = metric_deltas(a, b, ["test_accuracy"], {"test_accuracy": spread}, 0.05)
    assert deltas[0].direction == "better"


def test_diff_says_a_run_is_deleted_and_that_runs_are_in_two_experiments(tmp_path: Path):
    """A soft-deleted run was shown FINISHED, and runs of two experiments were compared without a word."""
    from tracking.inspect.diff import diff_runs, load_run
    from tracking.inspect.diff.output import render

    client = client_for(tmp_path)
    kept, binned = (client.create_run(client.create_experiment(name)).info.run_id for name in ("team", "other"))
    for run_id in (kept, binned):
        client.set_terminated(run_id, "FINISHED")
    client.delete_run(binned)
    a, b = load_run(client, kept), load_run(client, binned)
    assert (a.status, b.status) == ("FINISHED", "FINISHED, deleted")
    text = render(diff_runs(client, a, b))
    assert f"B: run {binned} {b.name} (FINISHED, deleted)" in text
    assert f"the runs are in different MLflow experiments ({a.experiment_id} and {b.experiment_id})" in text
