"""The pipeline on Keras's JAX and PyTorch backends, as a user reaches it: `dvc repro` with `determinism.backend` set,
a CONTROL calibration, the saved model reloaded and scored on its own, and `tracking rerun`.

Opt-in (`make test-backends`, which sets TRACKING_TEST_BACKENDS=1): each backend trains the whole pipeline, which
the 20-minute budget of `make test` leaves no room for; `make test` checks the backends through
tests/test_backends.py. A backend that is not installed here (PyTorch: docs/backends.md) is skipped, with why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import client_for, make_project, project_env, run, write_params

pytestmark = pytest.mark.skipif(
    not os.environ.get("TRACKING_TEST_BACKENDS"), reason="the pipeline on each backend: `make test-backends`"
)
BACKENDS = ("jax", "torch")


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
    """The id of the run the train stage opened (outputs/run.json)."""
    return json.loads((project / "outputs/run.json").read_text())["run_id"]
