"""End to end: a team's own train.py (examples/own-train-script) adopting `tracking.start`, under its own dvc.yaml.

One session fixture copies the example out, as its README says, and runs it twice with real `dvc repro` (the second
time after a commit that edits train.py); every test reads what those runs left, through MLflow's API.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_user_error, built_once, client_for, project_env, run, runs_of

from tracking.determinism.seeds import derive_seed

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "own-train-script"
EDIT = "# a comment the second run's train.py has\n"


def _two_runs(folder: Path) -> None:
    team = folder / "team"
    shutil.copytree(EXAMPLE, team)
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "config", "core.analytics", "false"]):
        run(cmd, team)
    run(["git", "add", "-A"], team)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "team's project"], team)
    run(["dvc", "repro"], team)
    run(["git", "add", "-A"], team)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first run"], team)
    with open(team / "train.py", "a") as handle:
        handle.write(EDIT)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "edit train.py"], team)
    run(["dvc", "repro"], team)


@pytest.fixture(scope="session")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example copied out and trained twice by `dvc repro`: before and after a committed edit of train.py."""
    return built_once(tmp_path_factory, "own-train-script", _two_runs) / "team"


def team_runs(team: Path) -> list:
    """The fixture's two runs of the script, oldest first (a rerun's run comes later)."""
    client = client_for(team)
    experiment = client.get_experiment_by_name("team")
    return sorted(client.search_runs([experiment.experiment_id]), key=lambda found: found.info.start_time)[:2]


def test_the_script_logs_our_provenance_from_its_own_params(team: Path):
    first, second = team_runs(team)
    tags = second.data.tags
    assert first.info.status == second.info.status == "FINISHED"
    assert second.data.params["train.seed"] == "7" and "seeds.base" not in second.data.params
    assert tags["prov.seeds.base"] == "7" and tags["prov.script.seeds_from.base"] == "train.seed"
    assert tags["prov.seeds.init"].isdigit() and tags["prov.model.seeded_weights"] == "2"
    # Keras's own fit(shuffle=True) decided the order: the record says so rather than naming an unused seed.
    assert tags["prov.seeds.shuffle"].startswith("script: Keras fit's own order")
    assert (
        tags["prov.determinism.requested.op_determinism"] == tags["prov.determinism.effective.op_determinism"] == "true"
    )
    assert tags["prov.determinism.effective.onednn"] == "false"
    assert tags["prov.software.versions.keras"] and "prov.cpu.model" in tags and "prov.gpu.count" in tags
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=team, capture_output=True, text=True).stdout.strip()
    assert tags["prov.git.commit"] == head and tags["prov.git.dirty"] == "false"
    assert tags["pipeline.stage"] == tags["prov.script.stage"] == "train"
    assert tags["prov.weights_sha256"] == json.loads((team / "metrics.json").read_text())["weights_sha256"]
    assert {"test_accuracy", "test_loss", "epoch_loss", "epoch_val_loss"} <= set(second.data.metrics)
    (dataset,) = second.inputs.dataset_inputs
    assert len(dataset.dataset.digest) == 32
    # Same code, data and seeds but for a comment: the same weights, bit for bit.
    assert first.data.tags["prov.weights_sha256"] == tags["prov.weights_sha256"]


# What only our builder schema has: `model.builder` and its kwargs, file and hash. A script's model is its own
# code, recorded by `prov.script.command` and the git commit and diff.
BUILDER_FIELDS = {"prov.model.spec", "prov.model.file", "prov.model.file_sha256", "prov.model.kwargs"}


def provenance_fields(tags: dict[str, str]) -> set[str]:
    """The `prov.*` fields a run records, each DVC dep's path and each package's name taken out (they name the
    project's own files and environment, not what was recorded)."""
    fields = set()
    for tag in tags:
        if tag.startswith("prov.dvc.deps."):
            fields.add("prov.dvc.deps")
        elif tag.startswith("prov."):
            fields.add(tag)
    return fields


def test_the_script_records_every_provenance_field_the_train_stage_does(team: Path, calibrated: Path):
    """One record for both ways in: a field the train stage's `train_model` gains and the script's
    `tracking.start` lacks fails here, so the library path cannot fall behind the pipeline."""
    (stage_run,) = [found for found in runs_of(calibrated) if found.data.tags.get("pipeline.stage") != "calibrate"]
    _, script_run = team_runs(team)
    stage_fields = provenance_fields(stage_run.data.tags)
    script_fields = provenance_fields(script_run.data.tags)
    assert {"prov.seeds.base", "prov.git.commit", "prov.cpu.model", "prov.dvc.deps"} <= stage_fields
    assert stage_fields - script_fields == BUILDER_FIELDS
    assert {field for field in script_fields - stage_fields if not field.startswith("prov.script.")} == set()
    assert script_run.data.tags["prov.model.outputs"] == "probabilities"  # the example's loss is named by string
    assert script_run.data.tags["prov.model.jit_compile"] in ("true", "false")


def test_the_running_stage_deps_are_hashed_fresh_not_read_from_a_stale_lock(team: Path):
    first, second = team_runs(team)
    now = hashlib.md5((team / "train.py").read_bytes()).hexdigest()
    assert second.data.tags["prov.dvc.deps.train.train.py"] == now
    assert first.data.tags["prov.dvc.deps.train.train.py"] != now  # the first run saw train.py before the edit


def test_a_seeds_mapping_to_a_missing_key_is_one_error_line(team: Path):
    code = "import tracking; tracking.start(seeds={'base': 'train.sed'})"
    done = subprocess.run([sys.executable, "-c", code], cwd=team, env=project_env(), capture_output=True, text=True)
    assert_user_error(done, "params.yaml: no key 'train.sed'", "train.seed")


def test_start_after_tensorflow_without_a_restart_says_what_is_lost(team: Path):
    code = "import tensorflow\nimport tracking\ntracking.start(seeds={'base': 'train.seed'})\n"
    env = {key: value for key, value in project_env().items() if key not in ("TF_ENABLE_ONEDNN_OPTS", "PYTHONHASHSEED")}
    done = subprocess.run([sys.executable, "-"], input=code, cwd=team, env=env, capture_output=True, text=True)
    assert_user_error(done, "TensorFlow was imported with TF_ENABLE_ONEDNN_OPTS=unset", "before importing keras")


def test_diff_of_two_runs_of_the_script_names_the_edit_and_fresh_dep_hashes(team: Path):
    first, second = team_runs(team)
    out = run(["tracking", "diff", first.info.run_id, second.info.run_id], team).stdout
    assert "file train.py" in out and "dvc dep train.train.py" in out
    assert "Weights: bit-identical" in out and "test_accuracy" in out
    assert "params" in out.split("identical:")[1] and "seeds" in out.split("identical:")[1]


def test_rerun_of_a_script_run_runs_its_stage_again_bit_identical(team: Path):
    _, second = team_runs(team)
    out = run(["tracking", "rerun", second.info.run_id], team).stdout
    assert "rerun [4/4] run: dvc repro --quiet --single-item --force train" in out
    assert "weights: bit-identical" in out and "verdict: weights are bit-identical" in out
    assert "dvc repro calibrate" not in out  # issue 36: the script's project has no such stage
    client = client_for(team)
    (new,) = client.search_runs([second.info.experiment_id], f"tags.rerun_of = '{second.info.run_id}'")
    assert new.info.status == "FINISHED" and new.data.tags["prov.git.commit"] == second.data.tags["prov.git.commit"]


def test_provenance_command_works_on_a_teams_own_params(team: Path):
    done = run(["tracking", "provenance"], team)  # it used to stop: "params.yaml: unknown key 'data.test_size'"
    record = json.loads(done.stdout)
    assert "recording it as a team's own params" in done.stderr
    assert record["seeds"]["base"] == 42 and record["script"]["params"] == "params.yaml" and record["git"]["commit"]
    assert record["dvc"]["deps"]["train"]["train.py"] == hashlib.md5((team / "train.py").read_bytes()).hexdigest()


def test_calibrate_the_script_resume_it_and_judge_a_run(team: Path):
    _, second = team_runs(team)
    out = run(["tracking", "calibrate", "--repeats", "3", "--variants", "algo"], team).stdout
    assert "algo: 3 runs, 3 distinct weights; test_accuracy" in out
    client = client_for(team)
    (parent,) = client.search_runs([second.info.experiment_id], "tags.`noise.role` = 'calibration'")
    children = client.search_runs([second.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(child.data.tags["noise.repeat"] for child in children) == ["0", "1", "2"]
    assert len({child.data.tags["prov.seeds.base"] for child in children} | {"7"}) == 4  # ALGO varies every seed
    assert {child.data.tags["pipeline.stage"] for child in children} == {"train"}
    again = run(["tracking", "calibrate", "--repeats", "3", "--variants", "algo"], team).stdout  # kept: nothing trains
    assert "calibrate [" not in again
    (latest, _) = client.search_runs(
        [second.info.experiment_id], "tags.`noise.role` = 'calibration'", order_by=["attributes.start_time DESC"]
    )
    assert latest.data.tags["noise.reused_repeats"] == "3"
    judged = run(["tracking", "judge", "HEAD"], team)  # issue 36: a git revision was refused in a script project
    verdict = judged.stdout
    assert f"using run {second.info.run_id}, the latest logged at commit" in judged.stderr
    assert verdict.startswith("tracking judge\n")  # not "tracking diff"
    assert "ALGO band of calibration run" in verdict and verdict.splitlines()[-1] == "verdict: within_noise"
    assert client.get_run(second.info.run_id).data.tags["noise.verdict"] == "within_noise"


def test_calibrating_a_command_that_logs_no_run_is_one_error_line(tmp_path: Path):
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        run(cmd, tmp_path)
    (tmp_path / "dvc.yaml").write_text("stages:\n  train:\n    cmd: python -c pass\n")
    run(["git", "add", "-A"], tmp_path)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], tmp_path)
    done = subprocess.run(["tracking", "calibrate"], cwd=tmp_path, env=project_env(), capture_output=True, text=True)
    assert_user_error(done, "`python -c pass` (stage train) finished but logged no MLflow run", "tracking.start")


def test_run_batches_records_the_shuffle_seed_and_seeding_a_trained_model_fails_its_run(team: Path):
    """One process, two runs (one TensorFlow start-up for both): the first fits on `run.batches`, the second is
    handed the first's model, already trained, to seed."""
    code = (
        "import tracking, keras, numpy as np\n"
        "x, y = np.arange(24, dtype='float32').reshape(12, 2), np.ones(12, dtype='float32')\n"
        "with tracking.start(experiment='batches', seeds={'shuffle': 5}) as run:\n"
        "    model = run.seeded(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]))\n"
        "    model.compile(loss='mse')\n"
        "    model.fit(run.batches(x, y, 4, 2), epochs=2, steps_per_epoch=3, shuffle=False, verbose=0)\n"
        "run = tracking.start(experiment='misuse', seeds={'shuffle': 5})\n"
        "run.seeded(model)\n"
    )
    env = project_env(PYTHONHASHSEED=str(derive_seed(42, "hash")), TF_ENABLE_ONEDNN_OPTS="0")  # no restart needed
    done = subprocess.run([sys.executable, "-c", code], cwd=team, env=env, capture_output=True, text=True)
    assert_user_error(done, "run.seeded(): the model already trained 6 step(s)")
    client = client_for(team)
    (batched,) = client.search_runs([client.get_experiment_by_name("batches").experiment_id])
    assert batched.info.status == "FINISHED" and batched.data.tags["prov.seeds.shuffle"] == "5"
    assert (
        batched.data.tags["prov.script.seeds_from.shuffle"] == "given"
        and batched.data.tags["pipeline.stage"] == "script"
    )
    (failed,) = client.search_runs([client.get_experiment_by_name("misuse").experiment_id])
    assert failed.info.status == "FAILED" and "already trained" in failed.data.tags["error"]
