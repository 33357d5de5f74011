"""A team's pretrained backbone fine-tuned as keras-io's transfer-learning guide does it: its weights (read from a file
the test writes) are kept bit for bit whether it is frozen before or after `run.seeded`, or inside a builder; only
the new head is drawn from `seeds.init`; the two phases (frozen, then unfrozen at a low learning rate) log on one
step axis, and train the same weights again in a second process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import client_for, project_env, run

from tracking.determinism.seeds import derive_seed
from tracking.provenance import RECORD_ARTIFACT

BACKBONE = '''\
import keras


def backbone(input_shape=(8, 8, 3)):
    """MobileNet's block in small: conv, batch norm, depthwise conv, batch norm, pointwise conv."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Conv2D(8, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
    x = keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
    x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
    return keras.Model(inputs, keras.layers.Conv2D(16, 1, use_bias=False)(x), name="backbone")


def classifier(base, n_outputs):
    """keras-io's head: the backbone in inference mode, pooling, dropout, a new dense layer of logits."""
    inputs = keras.Input(base.input_shape[1:])
    x = keras.layers.GlobalAveragePooling2D()(base(inputs, training=False))
    return keras.Model(inputs, keras.layers.Dense(n_outputs)(keras.layers.Dropout(0.2)(x)))


def pretrained(input_shape, n_outputs, weights):
    """The template's route: a builder loading the team's backbone from `weights`, frozen, under a new head."""
    base = backbone(input_shape)
    base.load_weights(weights)
    base.trainable = False
    return classifier(base, n_outputs)
'''

SCRIPT = """\
import sys

import keras
import numpy as np

import tracking
from team_backbone import backbone, classifier

rng = np.random.default_rng(0)
x, y = rng.uniform(size=(32, 8, 8, 3)).astype("float32"), np.arange(32) % 3
for order in ("freeze_then_seed", "seed_then_freeze"):
    with tracking.start(seeds={"base": "train.seed"}) as run:
        run.log_data(x, y)
        base = backbone()
        base.load_weights("backbone.weights.h5")
        if order == "freeze_then_seed":
            base.trainable = False
        model = run.seeded(classifier(base, 3))
        if order == "seed_then_freeze":
            base.trainable = False
        seeded = base.get_weights()
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        model.compile(keras.optimizers.Adam(1e-2), loss)
        model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[run.callback()])
        base.trainable = True  # phase two: the whole model, at a low learning rate, recompiled
        model.compile(keras.optimizers.Adam(1e-4), loss)
        model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[run.callback()])
        np.savez(f"{sys.argv[1]}-{order}.npz", *seeded, *model.get_weights(), run_id=run.run_id)
"""
ORDERS = ("freeze_then_seed", "seed_then_freeze")


def pretrained_weights(backbone) -> list[np.ndarray]:
    """The team's pretraining, stood in for: every weight away from its initializer (positive variances)."""
    rng = np.random.default_rng(42)
    return [rng.uniform(0.5, 1.5, size=w.shape).astype(w.dtype) for w in backbone.get_weights()]


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    """A team's git project holding the backbone module and its pretrained weights (`backbone.weights.h5`)."""
    from tracking.config.user_code import import_module

    root = tmp_path_factory.mktemp("pretrained")
    (root / "team_backbone.py").write_text(BACKBONE)
    base = import_module("team_backbone", "model.builder", root).backbone()
    weights = pretrained_weights(base)
    base.set_weights(weights)
    base.save_weights(root / "backbone.weights.h5")
    return root, weights


def test_a_builder_freezing_its_loaded_backbone_keeps_it_and_seeds_the_head(team: tuple[Path, list[np.ndarray]]):
    """The template's route: the builder loads and freezes the backbone; seeding keeps all 11 of its arrays (3 kernels,
    2 batch norms' 8 arrays) and draws the head's kernel from `seeds.init`."""
    from tracking.config.params import Params
    from tracking.determinism.process import seed_frameworks
    from tracking.determinism.seeds import resolve_seeds
    from tracking.training.model import BuildInputs, build_model

    root, weights = team
    train = {"x": np.zeros((4, 8, 8, 3), "float32"), "y": np.arange(4) % 3}
    heads = []
    for init in (11, 12):
        params = Params.model_validate(
            {
                "model": {
                    "builder": "team_backbone:pretrained",
                    "kwargs": {"weights": str(root / "backbone.weights.h5")},
                },
                "seeds": {"base": 5, "init": init, "dropout": 22, "augment": 33},
            }
        )
        seeds = resolve_seeds(params.seeds)
        seed_frameworks(params, seeds)
        built = build_model(params, seeds, BuildInputs(train, 3, None, root))
        base = built.model.get_layer("backbone")
        assert all(np.array_equal(a, b) for a, b in zip(base.get_weights(), weights, strict=True))
        assert (built.seeding.kept, built.seeding.init) == (len(weights), 1)
        heads.append(built.model.layers[-1].kernel.numpy())
    assert not np.array_equal(*heads), "seeds.init does not reach the new head"


@pytest.mark.slow
def test_a_frozen_backbone_is_kept_in_either_order_and_two_phases_log_one_step_axis(
    team: tuple[Path, list[np.ndarray]],
):
    """The library route, keras-io's order (freeze, then `run.seeded`) and the other: every pretrained array kept bit
    for bit (the frozen order re-drew its kernels from `seeds.init`), recorded as kept, nothing left to `seeds.base`;
    the two phases' epochs logged at steps 0..3 (the second phase logged 0..1 over the first); a second process
    fine-tunes to the same weights."""
    root, weights = team
    (root / "train.py").write_text(SCRIPT)
    (root / "params.yaml").write_text("train:\n  seed: 7\n")
    (root / ".gitignore").write_text("mlflow.db*\nmlartifacts/\n.tracking/\n__pycache__/\n*.npz\n*.h5\n")
    run(["git", "init", "-q"], root)
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "team's project"], root)
    env = project_env(PYTHONHASHSEED=str(derive_seed(7, "hash")), TF_ENABLE_ONEDNN_OPTS="0")
    for attempt in ("first", "again"):
        run([sys.executable, "train.py", attempt], root, env=env)
    client = client_for(root)
    for order in ORDERS:
        first, again = (np.load(root / f"{attempt}-{order}.npz") for attempt in ("first", "again"))
        arrays = [first[f"arr_{i}"] for i in range(len(first.files) - 1)]
        seeded, trained = arrays[: len(weights)], arrays[len(weights) :]
        assert [np.array_equal(a, b) for a, b in zip(seeded, weights, strict=True)] == [True] * len(weights), order
        assert all(np.array_equal(first[name], again[name]) for name in first.files if name != "run_id"), order
        assert not np.array_equal(trained[0], weights[0]), f"{order}: phase two did not fine-tune the backbone"
        found = client.get_run(str(first["run_id"]))
        tags = found.data.tags
        assert found.info.status == "FINISHED", order
        # The backbone's three kernels kept (its batch norms draw nothing), the head's kernel seeded.
        assert (tags["prov.model.kept_weights"], tags["prov.model.seeded_weights"]) == ("3", "1"), order
        assert "prov.seeds.unattributed" not in tags, order
        steps = [metric.step for metric in client.get_metric_history(found.info.run_id, "epoch_loss")]
        assert steps == [0, 1, 2, 3], order
    recorded = json.loads(Path(client.download_artifacts(str(first["run_id"]), RECORD_ARTIFACT)).read_text())
    assert recorded["model"]["seeded_dropout_layers"] == "Dropout: 1"
