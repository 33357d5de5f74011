"""`tracking audit`: real tiny trainings with op determinism on and off, traced step by step, read back from MLflow."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TEMPLATE_BUILDER, assert_user_error, client_for, make_project, run, runs_of, write_params

from tracking.inspect.audit_measures import cost_interval, diagnose, first_divergence, pairwise_sad, unsupported_line

AUDIT = [sys.executable, "-m", "tracking", "audit", "--repeats", "3", "--steps", "3"]
NOISY_BUILDER = '''\
import keras
import tensorflow as tf


class UnseededNoise(keras.layers.Layer):
    """Noise from a random op without a seed: under op determinism TensorFlow refuses to run it."""

    def call(self, x):
        return x + 0.01 * tf.raw_ops.RandomUniform(shape=tf.shape(x), dtype=x.dtype)


def build(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    x = keras.layers.Flatten()(UnseededNoise(name="unseeded_noise")(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(x))
'''


def audit_project(root: Path) -> Path:
    make_project(root)
    shutil.copytree(REPO / "audit", root / "audit")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "audit stage"], root)
    return root


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """One real audit of the tiny model: 3 repeats x 3 steps per mode."""
    root = audit_project(tmp_path_factory.mktemp("audit") / "project")
    run(["dvc", "repro", "prepare"], root)
    done = run(AUDIT, root)
    client = client_for(root)
    parent = next(r for r in runs_of(root) if r.data.tags.get("audit") == "true")
    summary = json.loads(
        Path(client.download_artifacts(parent.info.run_id, "audit/audit.json", str(root / "dl"))).read_text()
    )
    return root, done, parent, summary


def test_first_divergence_names_the_step_and_the_first_tensor_in_order():
    names = ["loss", "gradient/a", "gradient/b", "weight/a", "weight/b"]
    hashes = np.full((3, 4, 5), "h", dtype="<U8")
    assert first_divergence(hashes, names) is None
    hashes[2, 2, 4] = hashes[1, 2, 2] = hashes[2, 3, 0] = "x"
    found = first_divergence(hashes, names)
    assert (found.step, found.tensor, found.repeats) == (2, "gradient/b", [1])
    assert found.describe() == "step 3, `gradient/b` (repeat #1 vs #0)"
    predictions = np.zeros((3, 5, 2))
    predictions[1, 0, 0] = 1e-7
    only_predictions = first_divergence(np.full((3, 4, 5), "h"), names, predictions)
    assert (only_predictions.step, only_predictions.tensor, only_predictions.repeats) == (None, "predictions", [1])


def test_pairwise_sad_by_hand():
    matrix = pairwise_sad(np.array([[0.0, 1.0], [1.0, 1.0], [3.0, -1.0]]))
    assert matrix.tolist() == [[0, 1, 5], [1, 0, 4], [5, 4, 0]]


def test_diagnose_finds_the_layer_whose_call_raised():
    class Pool:
        name, trainable_weights = "pool", []

        def call(self):
            raise ValueError(
                "tf.nn.fractional_max_pool requires a non-zero seed to be passed in when determinism is "
                "enabled, but got seed=0."
            )

    with pytest.raises(ValueError) as caught:
        Pool().call()
    found = diagnose(caught.value, [])
    assert (found["op"], found["layer"]) == ("tf.nn.fractional_max_pool", "'pool' (Pool)")
    assert "seed" in found["alternatives"] and "MaxPooling2D" in found["alternatives"]
    assert unsupported_line(found).startswith(
        "op tf.nn.fractional_max_pool in layer 'pool' (Pool) has no deterministic"
    )


CNN = {
    "model": {"builder": TEMPLATE_BUILDER, "kwargs": {"filters": [4, 4, 4], "dense_units": 8, "dropout": 0.2}},
    "train": {"epochs": 2, "batch_size": 64},
}
# Another builder, task, loss and optimizer: the step loop must use what params.yaml configures, not a fixed one.
HUBER_SGD = {
    "model": {"builder": "pipelines.models:mlp", "kwargs": {"hidden_units": [8], "batch_norm": True}},
    "data": {"task": "regression"},
    "train": {
        "epochs": 2,
        "batch_size": 64,
        "loss": "huber",
        "optimizer": "sgd",
        "optimizer_kwargs": {"momentum": 0.9, "nesterov": True},
    },
}

# Class weights and an augmentation of the input pipeline (the zoo's): the loop weights and maps its batches as fit does.
WEIGHTED_AUGMENTED = {**CNN, "train": {**CNN["train"], "class_weight": {3: 10.0}, "augment": "zoo.augmented:augment"}}


@pytest.mark.parametrize(
    "config",
    [CNN, HUBER_SGD, WEIGHTED_AUGMENTED],
    ids=["small_cnn-default", "mlp-huber-sgd-regression", "class-weighted-augmented"],
)
def test_traced_steps_reproduce_keras_fit_bit_for_bit(config: dict):
    """The audit's GradientTape loop is the train stage's training, across an epoch boundary, with within-batch noise."""
    from tracking.config.params import Params
    from tracking.data.dataset import load_source
    from tracking.data.hashing import weights_sha256
    from tracking.determinism.process import seed_frameworks
    from tracking.determinism.seeds import resolve_seeds
    from tracking.inspect.audit_training import train_traced
    from tracking.training.fitting import train_model
    from tracking.training.model import BuildInputs, prepare_model

    source = load_source("sklearn:digits")
    params = Params.model_validate(config)
    regression = params.data.task == "regression"
    data = {"x": source.x[:200], "y": source.y[:200].astype("float32") if regression else source.y[:200]}
    outputs = 1 if regression else 10
    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    inputs = BuildInputs(data, outputs, None, Path("."))
    fitted, _ = train_model(params, seeds, inputs, None, within_batch_seed=7)
    seed_frameworks(params, seeds)
    model = prepare_model(params, seeds, inputs).model
    traced = train_traced(model, params, seeds, data, data, steps=8, within_batch_seed=7)
    assert traced["weights_sha256"] == weights_sha256(fitted.get_weights())
    assert len(traced["hashes"]) == 8


@pytest.mark.slow
def test_audit_reports_bit_identity_divergence_matrices_and_logs_to_mlflow(audited):
    root, done, parent, summary = audited
    assert "deterministic bit-identical: yes" in done.stdout
    # Issue 50: each trainer process said a start-up line of its own beside the stage's, with other figures.
    assert len([line for line in done.stderr.splitlines() if ": started in " in line]) <= 1, done.stderr
    det, nondet = summary["modes"]["det"], summary["modes"]["nondet"]
    assert det["bit_identical"] and det["divergence"] is None and det["op_determinism"] is True
    assert not nondet["bit_identical"] and nondet["op_determinism"] is False
    # Dropout masks and the summation order both move with the within-batch permutation, so the loss of
    # the very first step already differs, and it is the first tensor in the order.
    assert nondet["divergence"] == {"step": 0, "tensor": "loss", "repeats": [1, 2]}
    assert nondet["differing_tensors_at_divergence"][:2] == ["loss", "gradient/small_cnn/conv2d/kernel"]
    assert list(det["matrices"]) == [
        "predictions",
        "loss, step 1",
        "loss, step 3",
        "gradients, step 1",
        "gradients, step 3",
    ]
    for name in det["matrices"]:
        same, noisy = np.array(det["matrices"][name]), np.array(nondet["matrices"][name])
        assert same.shape == noisy.shape == (3, 3)
        assert np.all(same == 0)
        assert np.all(np.diag(noisy) == 0) and np.array_equal(noisy, noisy.T)
        assert np.all(noisy[~np.eye(3, dtype=bool)] > 0), name
    assert len(set(det["weights_sha256"])) == 1 and len(set(nondet["weights_sha256"])) == 3
    assert summary["time_ratio"] > 0 and summary["settings"]["steps"] == 3

    metrics = json.loads((root / "metrics/audit.json").read_text())
    assert metrics["det_bit_identical"] == 1.0 and metrics["nondet_bit_identical"] == 0.0
    assert metrics["nondet_divergence_step"] == 1.0 and "det_divergence_step" not in metrics
    report = (root / "reports/audit.md").read_text()
    assert "| deterministic | on | none | yes | — |" in report and "Cost of determinism" in report
    assert "3 paired repeats)**" in report  # the cost's interval, issue 34
    assert "not the cost of determinism on a GPU" in report and (root / "reports/audit.png").stat().st_size > 10_000

    client = client_for(root)
    assert parent.info.status == "FINISHED" and parent.data.metrics["det_bit_identical"] == 1.0
    assert parent.data.params["audit.repeats"] == "3" and parent.data.tags["audit.det.bit_identical"] == "true"
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "audit")} >= {"audit/audit.md", "audit/audit.png"}
    children = [r for r in runs_of(root) if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted((r.data.tags["audit.mode"], r.data.tags["audit.repeat"]) for r in children) == [
        ("det", str(k)) for k in range(3)
    ] + [("nondet", str(k)) for k in range(3)]
    assert {r.info.status for r in children} == {"FINISHED"}
    for child in children:
        mode, repeat = child.data.tags["audit.mode"], int(child.data.tags["audit.repeat"])
        assert child.data.tags["prov.weights_sha256"] == summary["modes"][mode]["weights_sha256"][repeat]
        assert child.data.params["determinism.op_determinism"] == ("true" if mode == "det" else "false")
        assert child.data.metrics["run_seconds"] > 0
        assert not [key for key in child.data.metrics if key.startswith("system/")]  # logged after training
    # The parent run is open while both modes train: it holds what the hardware did meanwhile.
    assert "system/cpu_utilization_percentage" in parent.data.metrics


@pytest.mark.slow
def test_audit_stage_is_not_in_the_default_pipeline(audited):
    root = audited[0]
    # A dry run cannot go past stages whose inputs earlier stages would write; --ignore-errors lists the rest.
    default = run(["dvc", "repro", "--dry", "--ignore-errors"], root).stdout
    assert "Running stage 'train'" in default and "audit/dvc.yaml" not in default and "pipelines.audit" not in default
    targeted = run(["dvc", "repro", "--dry", "audit/dvc.yaml"], root).stdout
    assert "Running stage 'audit/dvc.yaml:audit'" in targeted


@pytest.mark.slow
def test_op_without_deterministic_implementation_is_named_not_crashed(tmp_path):
    root = audit_project(tmp_path / "project")
    assert_user_error(run(AUDIT, root, check=False), "data/prepared/manifest.json not found", "dvc repro prepare")
    assert runs_of(root) == []
    (root / "models").mkdir()
    (root / "models/noisy.py").write_text(NOISY_BUILDER)  # a team's builder, listed as the audit stage's dep
    audit_stage = root / "audit/dvc.yaml"
    audit_stage.write_text(
        audit_stage.read_text().replace(
            "      - pipelines/audit.py\n", "      - models/noisy.py\n      - pipelines/audit.py\n"
        )
    )
    write_params(root, audit={"steps": 2}, model={"builder": "models.noisy:build", "kwargs": {}})
    run(["dvc", "repro", "prepare"], root)
    done = run([sys.executable, "-m", "tracking", "audit"], root, check=False)
    assert_user_error(
        done,
        "op RandomUniform in layer 'unseeded_noise' (UnseededNoise) has no deterministic implementation",
        "random ops must have a seed specified",
        "tf.random.stateless_uniform",
        "see reports/audit.md",
    )
    report = (root / "reports/audit.md").read_text()
    assert "- op: `RandomUniform`" in report and "- layer: 'unseeded_noise' (UnseededNoise)" in report
    assert not (root / "metrics/audit.json").exists()
    (parent,) = runs_of(root)
    assert parent.info.status == "FAILED" and parent.data.tags["audit.unsupported_op"] == "RandomUniform"
    assert "UnsupportedOpError" in parent.data.tags["error"]


@pytest.mark.parametrize("repeats", [2, 3, 5, 20])
def test_the_cost_of_determinism_has_the_t_interval_of_its_paired_repeats(repeats):
    """Issue 34: the cost was printed without uncertainty (0.583x, then 1.025x, back to back)."""
    from scipy import stats

    rng = np.random.default_rng(repeats)
    det, nondet = np.exp(rng.normal(0.1, 0.2, (repeats, 6))), np.exp(rng.normal(0, 0.2, (repeats, 6)))
    logs = np.log(np.median(det[:, 1:], axis=1) / np.median(nondet[:, 1:], axis=1))  # the tracing step left out
    low, high = stats.t.interval(0.95, repeats - 1, loc=logs.mean(), scale=stats.sem(logs))
    assert cost_interval(det, nondet) == pytest.approx((np.exp(low), np.exp(high)))
    assert cost_interval(det * 3, nondet * 3) == pytest.approx(cost_interval(det, nondet))  # a ratio: no unit
    tied = np.ones((repeats, 6))
    assert cost_interval(tied * 1.2, tied) is None  # no spread: no interval from float residue
    for bad in (0.0, np.nan, np.inf):  # a repeat whose median step time is not a positive number
        assert cost_interval(np.vstack([np.full((1, 6), bad), det[1:]]), nondet) is None
