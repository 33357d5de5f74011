"""The pipeline on Keras's JAX and PyTorch backends, as a user reaches it: `dvc repro` with `determinism.backend` set,
a CONTROL calibration, the saved model reloaded and scored on its own, and `tracking rerun`.

Opt-in (`make test-backends`, which sets TRACKING_TEST_BACKENDS=1): each backend trains the whole pipeline, and
bench/gpu_check.py's `--tiny` run trains on JAX, which the 20-minute budget of `make test` leaves no room for;
`make test` checks the backends through tests/test_backends.py. A backend that is not installed here (PyTorch: docs/backends.md) is skipped, with why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import add_deps, client_for, make_project, project_env, run, train_run_id, write_params
from test_zoo import MODELS as ZOO_MODELS
from test_zoo import ZOO

from tracking.layout import MODEL_STAGES

pytestmark = pytest.mark.skipif(
    not os.environ.get("TRACKING_TEST_BACKENDS"), reason="the pipeline on each backend: `make test-backends`"
)
BACKENDS = ("jax", "torch")
REPO = Path(__file__).resolve().parents[1]
TINY_CHECK = ("--models", "small_cnn", "--runs", "2", "--epochs", "1", "--tiny")


@pytest.fixture(scope="module", params=BACKENDS)
def on_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A tiny project whose baseline and candidate train on the backend, after `dvc repro` (CONTROL calibration)."""
    backend = request.param
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed here (docs/backends.md says how)")
    project = make_project(tmp_path_factory.mktemp(backend) / "project")
    write_params(
        project,
        determinism={"backend": backend},
        train={"epochs": 1},
        calibration={"variants": ["control"], "repeats": 3},
    )
    run([sys.executable, "-m", "tracking", "baseline"], project)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", f"train on {backend}"], project)
    run(["dvc", "repro"], project)
    return backend, project


def test_the_control_verdict_is_within_noise_and_bit_identical(on_backend):
    _, project = on_backend
    verdict = json.loads((project / "metrics/compare.json").read_text())
    assert (verdict["verdict"], verdict["band_variant"]) == ("within_noise", "control"), verdict
    assert verdict["bit_identical_to_control"] is True


def test_the_run_records_the_backend_it_trained_on(on_backend):
    backend, project = on_backend
    train = client_for(project).get_run(candidate_run(project))
    tags, params = train.data.tags, train.data.params
    assert params["determinism.backend"] == backend
    assert tags["prov.software.backend.name"] == backend
    assert tags["prov.determinism.effective.backend"] == backend
    assert tags["prov.determinism.effective.op_determinism"] == "true"


def test_the_saved_model_reloaded_on_its_backend_scores_what_evaluate_logged(on_backend):
    backend, project = on_backend
    script = (
        "import json, sys, numpy as np, keras\n"
        "model = keras.saving.load_model('outputs/model.keras', compile=False)\n"
        "x, y = np.load('data/prepared/test_x.npy'), np.load('data/prepared/test_y.npy')\n"
        "p = np.asarray(keras.ops.convert_to_numpy(model.predict(x, batch_size=512, verbose=0)))\n"
        "print(json.dumps({'accuracy': float(np.mean(p.argmax(1) == y))}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=project,
        env=project_env(KERAS_BACKEND=backend),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    recomputed = json.loads(done.stdout.strip().splitlines()[-1])["accuracy"]
    logged = json.loads((project / "metrics/eval.json").read_text())["test_accuracy"]
    assert recomputed == pytest.approx(logged, abs=1e-12)


def test_tracking_rerun_is_bit_identical(on_backend):
    _, project = on_backend
    done = run([sys.executable, "-m", "tracking", "rerun", candidate_run(project)], project, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "weights: bit-identical" in done.stdout


def candidate_run(project: Path) -> str:
    """The id of the run the train stage opened (this checkout's link to it)."""
    return train_run_id(project)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_teams_own_script_on_the_backend_records_it_and_trains_bit_identically(backend: str, tmp_path: Path):
    """examples/own-train-script, its `import keras` first as a team writes it, run twice with KERAS_BACKEND set:
    the runs record the backend and what its determinism reads back, and train the same weights."""
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed here (docs/backends.md says how)")
    team = tmp_path / "team"
    shutil.copytree(REPO / "examples/own-train-script", team)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "team's project"]):
        run(cmd, team)
    env = project_env(KERAS_BACKEND=backend)
    for _ in range(2):
        done = subprocess.run([sys.executable, "train.py"], cwd=team, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    client = client_for(team)
    runs = client.search_runs([client.get_experiment_by_name("team").experiment_id])
    assert len(runs) == 2
    tags = [found.data.tags for found in runs]
    assert {found["prov.software.backend.name"] for found in tags} == {backend}
    assert {found["prov.determinism.effective.backend"] for found in tags} == {backend}
    assert tags[0]["prov.weights_sha256"] == tags[1]["prov.weights_sha256"]
    if backend == "jax":  # XLA read the flags the run records: set before JAX started, the script restarted for it
        assert "--xla_gpu_exclude_nondeterministic_ops=true" in tags[0]["prov.determinism.effective.xla_flags"]


# The zoo's models that use no TensorFlow of their own (tests/zoo/; the others call tf.* or TextVectorization).
# keras-io's GRU metric class returns its variable from result(), which JAX 0.10 refuses to trace: one error line.
NEUTRAL_ZOO = ("applications", "regression", "transformer", "gru", "siamese", "ticket")
REFUSED_ON_JAX = {"gru": "on JAX a metric's result() returns a value, e.g. `self.total.value`, not the variable"}


@pytest.mark.parametrize("name", NEUTRAL_ZOO)
def test_a_zoo_model_on_jax_is_within_noise_of_its_control_calibration_bit_for_bit(name: str, tmp_path: Path):
    """The zoo's model, with its own params, loss, metrics and loader, through `dvc repro` on JAX."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed here")
    model = ZOO_MODELS[name]
    root = make_project(tmp_path / "project")
    (root / "models").mkdir()
    shutil.copy(ZOO / f"{name}.py", root / "models" / f"{name}.py")
    others = {section: values for section, values in model.sections.items() if section != "train"}
    if model.loader:
        others["data"] = {"source": None, "loader": f"models.{name}:load"}
    write_params(
        root,
        determinism={"backend": "jax"},
        model={"builder": f"models.{name}:build", "kwargs": {}},
        train={"epochs": 1, "batch_size": 64, **model.sections.get("train", {})},
        calibration={"variants": ["control"], "repeats": 3},
        **others,
    )
    add_deps(root, f"models/{name}.py", *MODEL_STAGES, *(["prepare"] if model.loader else []))
    run([sys.executable, "-m", "tracking", "baseline"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", f"zoo on jax: {name}"], root)
    done = run(["dvc", "repro"], root, check=name not in REFUSED_ON_JAX)
    if name in REFUSED_ON_JAX:  # the train stage's one line, under DVC's own
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "one training step of the model" in line and REFUSED_ON_JAX[name] in line
        return
    verdict = json.loads((root / "metrics/compare.json").read_text())
    assert (verdict["verdict"], verdict["band_variant"], verdict["bit_identical_to_control"]) == (
        "within_noise",
        "control",
        True,
    ), verdict


def test_the_gpu_check_trains_on_jax_here_bit_identically_with_each_seed_moving_its_own_source(tmp_path):
    done = subprocess.run(
        [sys.executable, "bench/gpu_check.py", "--out", str(tmp_path), "--backends", "jax", *TINY_CHECK],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads((tmp_path / "gpu_check.json").read_text())["rows"]
    assert row["backend"] == "jax" and row["build"]["name"] == "jax"
    assert row["control_bit_identical"] and row["control_runs"] == 3
    assert row["seeds_alone"] == {
        "init": {"initial_weights": True, "trained_weights": True},
        "shuffle": {"initial_weights": False, "trained_weights": True},
        "dropout": {"initial_weights": False, "trained_weights": True},
        "augment": {"initial_weights": False, "trained_weights": True},
    }
    on, off = row["determinism_on"]["effective"], row["determinism_off"]["effective"]
    assert on["backend"] == "jax" and on["op_determinism"] and not off["op_determinism"]
    assert "--xla_gpu_exclude_nondeterministic_ops=true" in on["xla_flags"]
    assert row["impl_distinct_weights"] == 1  # a CPU's kernels are deterministic: IMPL noise is a GPU's
    page = (tmp_path / "gpu_check.md").read_text()
    assert "| jax (" in page and "bit-identical (3 runs) | init, shuffle, dropout, augment |" in page
