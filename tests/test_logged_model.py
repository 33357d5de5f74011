"""The model a run logs loads through every MLflow loader a newcomer would try, and predicts what evaluate scored."""

import json
import sys
from pathlib import Path

import pytest
from conftest import project_env, run

# A user's script: each MLflow loader on the run's model, its predictions on the test set saved for the test.
LOAD_THREE_WAYS = """
import sys
import mlflow.keras, mlflow.pyfunc, mlflow.tensorflow, numpy as np
from tracking.data.dataset import load_split

uri, out = sys.argv[1], sys.argv[2]
x = load_split(__import__("pathlib").Path("data/prepared"), "test")["x"]
np.savez(
    out,
    keras=mlflow.keras.load_model(uri).predict(x, verbose=0),
    tensorflow=mlflow.tensorflow.load_model(uri).predict(x, verbose=0),
    pyfunc=np.asarray(mlflow.pyfunc.load_model(uri).predict(x)),
)
"""


@pytest.mark.slow
def test_the_logged_model_loads_through_mlflow_keras_tensorflow_and_pyfunc(calibrated: Path, tmp_path: Path):
    import numpy as np

    link = json.loads((calibrated / ".tracking/runs/train.json").read_text())
    run_id = link["run_id"]
    out = tmp_path / "predicted.npz"
    env = project_env(
        MLFLOW_TRACKING_URI=link["tracking_uri"]
    )  # the store as the train link names it, as a user reads it
    run([sys.executable, "-c", LOAD_THREE_WAYS, f"runs:/{run_id}/model", str(out)], calibrated, env=env)
    scored = np.load(calibrated / "outputs/probabilities.npy")
    predicted = np.load(out)
    for loader in ("keras", "tensorflow", "pyfunc"):
        np.testing.assert_allclose(predicted[loader], scored, rtol=1e-5, atol=1e-6, err_msg=loader)
