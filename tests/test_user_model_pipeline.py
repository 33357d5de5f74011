"""A team's builder in its own module, through the real pipeline: `dvc repro`, `dvc exp run -S`, `dvc status`,
read back through MLflow's API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import add_deps, make_project, recorded, run, runs_of, write_params

from tracking.layout import MODEL_STAGES

pytestmark = pytest.mark.slow

NET = '''\
import keras


class Shake(keras.layers.Layer):
    """Noise drawn without a generator of the layer's own: randomness no seed stream can claim."""

    def call(self, x, training=False):
        return x + 0.01 * keras.random.normal(keras.ops.shape(x)) if training else x


def build(input_shape, n_outputs, width=8):
    inputs = keras.Input(input_shape)
    x = Shake()(keras.layers.Flatten()(inputs))
    x = keras.layers.Dropout(0.3)(keras.layers.Dense(width, activation="relu")(x))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))
'''


@pytest.fixture(scope="module")
def team_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """A project training models/net.py's builder: `dvc repro train`, then `dvc exp run -S seeds.dropout=...`."""
    root = make_project(tmp_path_factory.mktemp("team") / "project")
    (root / "models").mkdir()
    (root / "models/net.py").write_text(NET)
    write_params(root, model={"builder": "models.net:build", "kwargs": {"width": 8}}, train={"epochs": 1})
    add_deps(root, "models/net.py", *MODEL_STAGES)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "our own model"], root)
    run(["dvc", "repro", "train"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "trained"], root)
    run(["dvc", "exp", "run", "train", "-S", "seeds.dropout=123"], root)
    runs = sorted(runs_of(root), key=lambda found: found.info.start_time)
    return root, runs


def test_unattributed_randomness_is_named_in_provenance(team_project):
    root, runs = team_project
    tags = recorded(root, runs[0].info.run_id)
    assert "keras.random without a SeedGenerator" in tags["prov.seeds.unattributed"]
    assert "shake" in tags["prov.seeds.unattributed"]
    assert tags["prov.model.spec"] == "models.net:build" and tags["prov.model.file"] == "models/net.py"
    assert json.loads(tags["prov.model.kwargs"]) == {"width": 8}
    assert tags["prov.model.dtype_policy"] == "float32" and tags["prov.model.jit_compile"] in ("true", "false")
    assert len(tags["prov.model.file_sha256"]) == 64


def test_a_dropout_seed_change_keeps_the_initial_weights(team_project):
    _root, runs = team_project
    assert [found.info.status for found in runs] == ["FINISHED", "FINISHED"]
    first, second = (found.data.tags for found in runs)
    assert second["prov.seeds.dropout"] == "123" != first["prov.seeds.dropout"]
    assert first["prov.initial_weights_sha256"] == second["prov.initial_weights_sha256"]
    assert first["prov.weights_sha256"] != second["prov.weights_sha256"]


def test_editing_the_builder_changes_the_stages_that_run_it(team_project):
    root, _ = team_project
    before = json.loads(run(["dvc", "status", "--json", "train"], root).stdout or "{}")
    with open(root / "models/net.py", "a", encoding="utf-8") as handle:
        handle.write("# wider next time\n")
    try:
        after = json.loads(run(["dvc", "status", "--json", "train", "calibrate"], root).stdout)
    finally:
        run(["git", "checkout", "models/net.py"], root)
    assert "train" not in before
    for stage in ("train", "calibrate"):
        changed = [entry["changed deps"] for entry in after[stage] if "changed deps" in entry]
        assert changed and changed[0].get("models/net.py") == "modified", after
