"""The model zoo: public keras-io and TensorFlow code (tests/zoo/, each module naming its source) through the
pipeline as a team runs it. For each model, one project (built once per session): `dvc repro` end to end with a
CONTROL calibration of three repeats.

`make test` runs the pipelines of two models that between them take the paths a team's model takes: the CCT
(its own loss function, AdamW, StochasticDepth layers drawing from their own SeedGenerator) and the ticket model
(its own loader, three named inputs, two named outputs, a loss per output, `loss_weights`); `custom_fit` (its own
`train_step`, `test_step` and metric trackers) and text classification (its own loader of token sequences) run
in `make test-zoo`, which the 20-minute budget of `make test` no longer leaves room for (their paths are taken in
`make test` by keras-io's DCGAN with its own `train_step` in tests/test_own_script.py and by
tests/test_loader_inputs.py's loader). Checked for each:
the CONTROL verdict is `within_noise`, and every CONTROL repeat
reproduces the candidate bit for bit (weights, every test metric, every prediction); `test_loss` is what
`model.evaluate` of the saved model gives, recomputed here with Keras alone; a classifier's test scores are
computed from probabilities even where it outputs logits. For every zoo model cheap to build, each seed moves its
own stream only (in this process, through the library's seeding: initial weights, and the draws of a
training-mode call on a fixed batch, mapped through `train.augment` where the model has one).

The costly checks (`dvc exp run train -S seeds.<name>=<n>` per seed, `tracking rerun`, a learning rate 100 times
smaller judged against an ALGO band) run in `make test-zoo` only; `make test` takes each path on other projects: a
seed through `dvc exp run` on a team's model (tests/test_user_model_pipeline.py), `tracking rerun` in the examples
and tests/test_rerun.py, a learning rate 100 times smaller in the README's commands (tests/test_readme.py).
`make test-zoo` (TRACKING_TEST_ZOO=1) runs every model's pipeline, every costly check for every model and every
seed: the `matrix_only` models' pipelines (applications, the VAE, regression, the transformer, the GRU with its
own metric class, siamese, fraud, augmentation in the input pipeline, and issue 48's ports: a U-Net's masks,
multi-hot labels, a tf.data loader, FeatureSpace, a subclassed recommender, distillation) run there only: the
suite's 20-minute budget cannot take them (each pipeline costs 100 to 200 s on the 2-core machines CI runs on).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import add_deps, built_once, make_project, recorded, run, runs_of, train_run_id, write_params

from tracking.config.baseline import freeze
from tracking.layout import MODEL_STAGES
from tracking.yaml_text import parse_yaml

pytestmark = pytest.mark.slow

ZOO = Path(__file__).parent / "zoo"
# The seeds a `seeds_through_dvc` model varies through `dvc exp run` (a run of about 27 CPU seconds each), in the
# whole matrix only; `make test` checks every seed of every zoo model in this process, and a layer's stream through
# `dvc exp run` on a team's model (tests/test_user_model_pipeline.py, `seeds.dropout`).
SEEDS_THROUGH_DVC = ("init",)
# `make test-zoo` (TRACKING_TEST_ZOO=1): the whole matrix, every costly check for every model and every seed through
# `dvc exp run`: about 25 CPU minutes on top of the suite's zoo, which its 20-minute budget on 2 cores cannot take.
FULL_MATRIX = bool(os.environ.get("TRACKING_TEST_ZOO"))
if FULL_MATRIX:
    SEEDS_THROUGH_DVC = ("init", "shuffle", "dropout", "augment")
# What a user types after `-S seeds.<name>=`, one value per seed.
TYPED = {"init": "123", "dropout": "124", "augment": "125", "shuffle": "126"}
# The records of what the fixture ran (command, exit status, output, seconds), one JSON file per step.
STEPS = ("repro", "rerun", "smaller_lr", *(f"seeds.{seed}" for seed in SEEDS_THROUGH_DVC))


@dataclass(frozen=True)
class Model:
    """A zoo module, the params.yaml sections it trains with, the seeds whose streams it draws from (besides
    `init`; `shuffle` is the batch order, drawn for every model), and which of the costlier checks it takes:
    `dvc exp run` per seed (else the seeds are checked in this process), `tracking rerun`. A `loader` model trains
    on what its module's `load` returns (`data.loader`) and takes the `model.evaluate` check; `smaller_lr` adds an
    ALGO calibration and one `dvc exp run` with a learning rate 100 times smaller."""

    name: str
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    streams: frozenset[str] = frozenset()
    seeds_through_dvc: bool = False
    rerun: bool = False
    loader: bool = False
    smaller_lr: bool = False
    # Its own `test_step` or `compute_loss` reports another loss than the compiled one (the VAE's reconstruction and
    # KL terms, the Distiller's blend of the labels' and the teacher's): `test_loss` is that, and the cross-entropy
    # is `test_crossentropy` beside it.
    adds_to_loss: bool = False
    # Sections merged into `sections` for the whole matrix (`make test-zoo`): what the model needs to learn at all,
    # so that a learning rate 100 times smaller can be seen.
    learns_with: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Its pipeline runs in the whole matrix only (`make test-zoo`); `make test` checks its seeding in this process
    # unless building it five times costs more than a few seconds (`costly_build`: a U-Net, a trained teacher).
    matrix_only: bool = False
    costly_build: bool = False

    @property
    def task(self) -> str:
        return self.sections.get("data", {}).get("task", "classification")

    @property
    def several_outputs(self) -> bool:
        """A loss per output: the loader's `y` is a dict keyed by the model's output names."""
        return isinstance(self.sections.get("train", {}).get("loss"), dict)


MODELS = {
    model.name: model
    for model in (
        # Its BatchNorm layers' moving statistics leave their first values only after about 20 epochs: until then it
        # predicts one class at inference whatever its learning rate (test accuracy 0.098 after 8 epochs at 0.001 and
        # at 0.00001; 0.52 after 20 at 0.01), and a 100 times smaller rate is truly within noise.
        Model(
            "applications",
            streams=frozenset({"dropout", "augment"}),
            learns_with={"train": {"epochs": 20, "learning_rate": 0.01}},
            matrix_only=True,
        ),
        Model(
            "cct",
            {"train": {"loss": "models.cct:loss", "optimizer": "adamw", "optimizer_kwargs": {"weight_decay": 0.0001}}},
            frozenset({"dropout", "augment"}),
        ),
        # Two epochs: the train stage's validation pass after the first draws from the Sampling layer's generator.
        Model("vae", {"train": {"epochs": 2}}, frozenset({"dropout"}), adds_to_loss=True, matrix_only=True),
        Model("custom_fit", matrix_only=True),
        Model(
            "regression",
            {
                "data": {"source": "sklearn:diabetes", "task": "regression"},
                "train": {"loss": "mean_absolute_error"},
                "compare": {"metrics": None},  # the task's: test_loss and test_mae
            },
            matrix_only=True,
        ),  # a regression through `dvc repro` in `make test`: the regression example's (tests/test_examples.py)
        Model("transformer", streams=frozenset({"dropout"}), matrix_only=True),
        Model(
            "gru",
            {"train": {"epochs": 2, "metrics": ["accuracy", "models.gru:CategoricalTruePositives"]}},
            loader=True,
            matrix_only=True,
        ),
        # In the whole matrix, eight epochs of 16 at a learning rate of 0.01: the model learns whatever its seeds (test
        # accuracy 0.94 to 0.98; at five epochs one reseeded run in three stayed at chance), so a learning rate 100
        # times smaller (about 0.52) is a change the ALGO band should see.
        Model(
            "text",
            streams=frozenset({"dropout"}),
            loader=True,
            learns_with={"train": {"epochs": 8, "batch_size": 16, "learning_rate": 0.01}},
            matrix_only=True,
        ),
        Model(
            "siamese",
            {"train": {"epochs": 2, "loss": "models.siamese:contrastive_loss"}},
            loader=True,
            matrix_only=True,
        ),
        # Several outputs: judged on the compiled total and the department's own loss (the task's default,
        # test_accuracy, is not a score of a model of several outputs).
        Model(
            "ticket",
            {
                "train": {
                    "epochs": 2,
                    "loss": {"priority": "models.ticket:priority_loss", "department": "models.ticket:department_loss"},
                    "loss_weights": {"priority": 1.0, "department": 0.2},
                    "metrics": {"department": ["categorical_accuracy"]},
                },
                "compare": {"metrics": {"test_loss": "min", "test_department_loss": "min"}},
            },
            loader=True,
        ),
        Model(
            "fraud",
            {"train": {"epochs": 5, "learning_rate": 0.01, "class_weight": "balanced"}},
            frozenset({"dropout"}),
            loader=True,
            matrix_only=True,
        ),
        # Its augmentation is in the input pipeline, not the model: the in-process check maps a batch through it.
        Model(
            "augmented", {"train": {"augment": "models.augmented:augment"}}, frozenset({"augment"}), matrix_only=True
        ),
        # Issue 48's ports (tests/zoo/<name>.py names each source). Labels per pixel: (16, 16) masks of 3 classes.
        Model("unet", {"train": {"epochs": 2}}, loader=True, matrix_only=True, costly_build=True),
        # Multi-hot rows of 4 labels: data.task multilabel, judged on its default scores.
        Model(
            "multilabel",
            {"data": {"task": "multilabel"}, "train": {"epochs": 3}, "compare": {"metrics": None}},
            loader=True,
            matrix_only=True,
        ),
        # The loader returns a tf.data.Dataset (timeseries_dataset_from_array's batches).
        Model(
            "timeseries",
            {"data": {"task": "regression"}, "train": {"epochs": 2}, "compare": {"metrics": None}},
            loader=True,
            matrix_only=True,
        ),
        # A dict of features through keras.utils.FeatureSpace, adapted to the training split by the builder.
        Model(
            "structured",
            {"train": {"epochs": 2}},
            frozenset({"dropout"}),
            loader=True,
            matrix_only=True,
            costly_build=True,
        ),
        # Needs build48 (a subclassed model built before seeding): otherwise seeds.init moves no weight.
        Model(
            "recommender",
            {
                "data": {"task": "regression"},
                "train": {"epochs": 2, "loss": "binary_crossentropy"},
                "compare": {"metrics": None},
            },
            loader=True,
            matrix_only=True,
        ),
        # Needs build48 (a trained teacher kept, Distiller's own compile arguments through train.compile_kwargs).
        Model(
            "distillation",
            {
                "train": {
                    "epochs": 2,
                    "metrics": ["sparse_categorical_accuracy"],
                    "compile_kwargs": {
                        "student_loss_fn": "models.distillation:student_loss_fn",
                        "distillation_loss_fn": "models.distillation:distillation_loss_fn",
                        "alpha": 0.1,
                        "temperature": 10,
                    },
                },
            },
            loader=True,
            adds_to_loss=True,
            matrix_only=True,
            costly_build=True,
        ),
    )
}
if FULL_MATRIX:
    MODELS = {
        name: replace(
            model,
            sections={
                section: {**model.sections.get(section, {}), **model.learns_with.get(section, {})}
                for section in {*model.sections, *model.learns_with}
            },
            seeds_through_dvc=True,
            rerun=True,
            smaller_lr=True,
        )
        for name, model in MODELS.items()
    }
IN_PROCESS = [name for name, model in MODELS.items() if FULL_MATRIX or not model.costly_build]
# The models whose pipeline runs: every one in the whole matrix, all but the `matrix_only` in `make test`.
PIPELINES = {name: model for name, model in MODELS.items() if FULL_MATRIX or not model.matrix_only}
RERUN = [name for name, model in PIPELINES.items() if model.rerun]
OWN_DATA = [name for name, model in PIPELINES.items() if model.loader]
SMALLER_LR = [name for name, model in PIPELINES.items() if model.smaller_lr]
CLASSIFIERS = [
    name for name, model in PIPELINES.items() if model.task == "classification" and not model.several_outputs
]
KEPT_TEACHER = [name for name in PIPELINES if name == "distillation"]
SEVERAL_OUTPUTS = [name for name, model in PIPELINES.items() if model.several_outputs]


def record(folder: Path, step: str, cmd: list[str], root: Path) -> dict[str, Any]:
    """Run `cmd` in `root` as a user would, keeping its exit status, output and duration under `folder`."""
    started, cpu = time.monotonic(), _children_cpu()
    done = run(cmd, root, check=False, timeout=900)
    result = {
        "cmd": cmd,
        "returncode": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "seconds": round(time.monotonic() - started, 1),
        "cpu_seconds": round(_children_cpu() - cpu, 1),
    }
    (folder / f"{step}.json").write_text(json.dumps(result, indent=2))
    return result


def _children_cpu() -> float:
    """CPU seconds (user and system) of the finished child processes: a step's cost whatever else the machine runs."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


# An MLflow store as the product creates it (tables, MLflow's migrations, write-ahead logging) with no runs.
EMPTY_STORE = """
import sys

import mlflow

from tracking.store.sqlite import create_private, use_wal

uri = "sqlite:///" + sys.argv[1]
create_private(uri)
mlflow.MlflowClient(uri).search_experiments()
use_wal(uri)
"""


def _empty_store(folder: Path) -> None:
    """`mlflow.db` in `folder`, made once per session: a fresh store's creation runs MLflow's migrations, each a
    synced SQLite write, about 10 s of a train stage's start-up (1 s of CPU) that every zoo project paid."""
    run([sys.executable, "-c", EMPTY_STORE, str(folder / "mlflow.db")], folder)


def _pipeline(model: Model, folder: Path, store: Path) -> None:
    """A project training `model` (1 epoch, three CONTROL repeats), after `dvc repro`, `tracking rerun` and, for
    the models that take that path, one `dvc exp run train -S seeds.<name>=<n>` per seed. The project starts from
    a copy of the empty `store` (git ignores it): its creation is checked elsewhere (tests/test_run_lifecycle.py, every stage test)."""
    root = make_project(folder / "project")
    shutil.copy2(store, root / "mlflow.db")
    (root / "models").mkdir()
    shutil.copy(ZOO / f"{model.name}.py", root / "models" / f"{model.name}.py")
    train = {"epochs": 1, "batch_size": 64, **model.sections.get("train", {})}
    others = {name: values for name, values in model.sections.items() if name != "train"}
    if model.loader:
        others["data"] = {**others.get("data", {}), "source": None, "loader": f"models.{model.name}:load"}
    write_params(
        root,
        model={"builder": f"models.{model.name}:build", "kwargs": {}},
        train=train,
        calibration={"variants": ["control", "algo"] if model.smaller_lr else ["control"], "repeats": 3},
        **others,
    )
    add_deps(root, f"models/{model.name}.py", *MODEL_STAGES, *(["prepare"] if model.loader else []))
    freeze(root / "params.yaml", root / "baseline.yaml")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", f"zoo: {model.name}"], root)
    if record(folder, "repro", ["dvc", "repro"], root)["returncode"] != 0:
        return
    shutil.copy(root / ".tracking/runs/train.json", folder / "run.json")  # the link to the run, kept beside
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "results of the pipeline"], root)
    if model.seeds_through_dvc:
        for seed in SEEDS_THROUGH_DVC:
            record(folder, f"seeds.{seed}", ["dvc", "exp", "run", "train", "-S", f"seeds.{seed}={TYPED[seed]}"], root)
            run(["git", "checkout", "--", "."], root)
        run(["dvc", "checkout", "--force"], root)  # the committed results' outputs, as the checks read them
    if model.smaller_lr:
        rate = parse_yaml((root / "params.yaml").read_text())["train"]["learning_rate"]  # the model's or the default
        smaller = f"train.learning_rate={rate / 100:g}"  # as a user types it: 1e-05
        record(folder, "smaller_lr", ["dvc", "exp", "run", "compare", "-S", smaller], root)
        shutil.copy(root / "metrics/compare.json", folder / "smaller_lr_compare.json")
        run(["git", "checkout", "--", "."], root)
        run(["dvc", "checkout", "--force"], root)
    if model.rerun:
        run_id = json.loads((folder / "run.json").read_text())["run_id"]
        record(folder, "rerun", [sys.executable, "-m", "tracking", "rerun", run_id], root)


@pytest.fixture(scope="module")
def zoo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Model, Path]:
    """The model (the test's `zoo` parameter) and the folder of its pipeline (the project and the steps' records),
    built once per session by whichever pytest-xdist worker asks first."""
    model = MODELS[request.param]
    store = built_once(tmp_path_factory, "zoo-store", _empty_store) / "mlflow.db"
    return model, built_once(tmp_path_factory, f"zoo-{model.name}", lambda folder: _pipeline(model, folder, store))


def step(folder: Path, name: str) -> dict[str, Any]:
    """What step `name` printed; a failed `dvc repro` fails every check with its last lines."""
    repro = json.loads((folder / "repro.json").read_text())
    if repro["returncode"] != 0:
        pytest.fail(f"dvc repro exited {repro['returncode']}: {repro['stderr'].strip().splitlines()[-3:]}")
    return json.loads((folder / f"{name}.json").read_text())


def reloaded(model: Model, folder: Path) -> tuple[Path, Any, Any]:
    """After `dvc repro`: the project, the model's module as the project holds it, and the saved model reloaded
    with Keras alone and that module's classes and functions, uncompiled."""
    import keras

    step(folder, "repro")
    root = folder / "project"
    spec = importlib.util.spec_from_file_location(f"saved_{model.name}", root / "models" / f"{model.name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = {name: value for name, value in vars(module).items() if inspect.isclass(value) or inspect.isfunction(value)}
    return root, module, keras.models.load_model(root / "outputs/model.keras", custom_objects=found, compile=False)


def read(root: Path, path: str) -> Any:
    return json.loads((root / path).read_text())


def logged_metrics(scores: dict[str, Any]) -> dict[str, float]:
    """metrics/eval.json under the names evaluate logs and calibration bands: test_accuracy_class_3, ..."""
    flat = {name: value for name, value in scores.items() if isinstance(value, float)}
    flat.update({f"test_accuracy_class_{k}": v for k, v in scores.get("per_class_accuracy", {}).items()})
    return flat


@pytest.mark.parametrize("zoo", list(PIPELINES), indirect=True)
def test_dvc_repro_runs_every_stage(zoo):
    _model, folder = zoo
    done = step(folder, "repro")
    for stage in ("prepare", "train", "evaluate", "calibrate", "compare"):
        assert f"Running stage '{stage}'" in done["stdout"], (stage, done["stdout"][-2000:])


@pytest.mark.parametrize("zoo", list(PIPELINES), indirect=True)
def test_the_control_verdict_is_within_noise(zoo):
    _model, folder = zoo
    step(folder, "repro")
    verdict = read(folder / "project", "metrics/compare.json")
    assert (verdict["verdict"], verdict["band_variant"]) == ("within_noise", "control"), verdict


@pytest.mark.parametrize("zoo", list(PIPELINES), indirect=True)
def test_every_control_repeat_reproduces_the_candidate_bit_for_bit(zoo):
    """Weights, every test metric evaluate logged, and every prediction: the candidate is a CONTROL repeat."""
    _model, folder = zoo
    step(folder, "repro")
    root = folder / "project"
    scalars = logged_metrics(read(root, "metrics/eval.json"))
    runs = [found for found in read(root, "calibration/noise.json")["runs"] if found["variant"] == "control"]
    assert len(runs) == 3
    differing = {}
    for found in runs:
        repeat = {name: found["metrics"].get(name) for name in scalars}
        differing.update(
            {
                f"{name} #{found['repeat']}": f"candidate {scalars[name]!r}, repeat {value!r}"
                + (f", delta {value - scalars[name]:+.3g}" if value is not None else "")
                for name, value in repeat.items()
                if value != scalars[name]
            }
        )
    weights = read(root, "metrics/train.json")["weights_sha256"]
    trained = sorted({found["weights_sha256"][:12] for found in runs})
    assert trained == [weights[:12]], f"CONTROL repeats trained weights {trained}, the candidate {weights[:12]}"
    assert not differing, differing
    predicted = np.load(root / "outputs/predictions.npy")
    stored = np.load(root / "outputs/calibration.npz")
    for index, repeat in enumerate(stored["predictions"][stored["variants"] == "control"]):
        assert np.array_equal(repeat.reshape(predicted.shape), predicted.astype(repeat.dtype)), f"repeat {index}"


@pytest.mark.parametrize("zoo", CLASSIFIERS, indirect=True)
def test_test_scores_are_computed_from_probabilities(zoo):
    """Logits or not, `outputs/probabilities.npy` holds probabilities, and their cross-entropy is `test_loss`, or
    `test_crossentropy` beside it where the team compiled another loss or its `test_step` reports more."""
    model, folder = zoo
    step(folder, "repro")
    root = folder / "project"
    labels = np.load(root / "data/prepared/test_y.npy").reshape(-1)  # labels per pixel: one row per label
    probabilities = np.load(root / "outputs/probabilities.npy").astype(np.float64).reshape(len(labels), -1)
    if probabilities.shape[1] == 1:  # one sigmoid output: the positive class's probability
        probabilities = np.concatenate([1 - probabilities, probabilities], axis=1)
    scores = read(root, "metrics/eval.json")
    assert probabilities.min() >= 0 and np.allclose(probabilities.sum(axis=1), 1, atol=1e-5), (
        f"outputs/probabilities.npy is not probabilities: min {probabilities.min():.4g}, "
        f"row sums {probabilities.sum(axis=1).min():.4g} to {probabilities.sum(axis=1).max():.4g}"
    )
    picked = np.clip(probabilities[np.arange(len(labels)), labels], 1e-7, 1.0)
    crossentropy = scores[
        "test_crossentropy" if "loss" in model.sections.get("train", {}) or model.adds_to_loss else "test_loss"
    ]
    assert crossentropy == pytest.approx(-np.log(picked).mean(), rel=1e-5)
    assert scores["test_accuracy"] == pytest.approx((probabilities.argmax(axis=1) == labels).mean())


@pytest.mark.parametrize("zoo", RERUN, indirect=True)
def test_tracking_rerun_is_bit_identical(zoo):
    _model, folder = zoo
    done = step(folder, "rerun")
    assert done["returncode"] == 0, done["stderr"][-2000:]
    assert "weights: bit-identical" in done["stdout"], done["stdout"]
    runs = runs_of(folder / "project")
    (new,) = [found for found in runs if "rerun_of" in found.data.tags]
    (original,) = [found for found in runs if found.info.run_id == new.data.tags["rerun_of"]]
    tested = {name: value for name, value in original.data.metrics.items() if name.startswith("test_")}
    assert tested and {name: new.data.metrics.get(name) for name in tested} == tested


@pytest.mark.parametrize("seed", SEEDS_THROUGH_DVC)
@pytest.mark.parametrize("zoo", [name for name, model in PIPELINES.items() if model.seeds_through_dvc], indirect=True)
def test_each_seed_moves_its_own_stream_through_dvc(zoo, seed):
    """`dvc exp run train -S seeds.<seed>=<n>`: the initial weights (`prov.initial_weights_sha256`, read back
    through MLflow) change for `init` only; the trained weights change where the model draws from the stream."""
    model, folder = zoo
    done = step(folder, f"seeds.{seed}")
    assert done["returncode"] == 0, done["stderr"][-2000:]
    root = folder / "project"
    baseline_id = json.loads((folder / "run.json").read_text())["run_id"]
    runs = runs_of(root)
    (baseline,) = [found for found in runs if found.info.run_id == baseline_id]
    (varied,) = [found for found in runs if found.data.params.get(f"seeds.{seed}") == TYPED[seed]]
    before, after = baseline.data.tags, varied.data.tags
    if seed in {"init", "shuffle", *model.streams}:
        assert after[f"prov.seeds.{seed}"] == TYPED[seed] != before[f"prov.seeds.{seed}"]
    else:  # a seed nothing drew from is recorded as unused, never as used
        assert after[f"prov.seeds.{seed}"].startswith("unused: "), after[f"prov.seeds.{seed}"]
    initial_moved = after["prov.initial_weights_sha256"] != before["prov.initial_weights_sha256"]
    trained_moved = after["prov.weights_sha256"] != before["prov.weights_sha256"]
    assert initial_moved == (seed == "init"), f"seeds.{seed} moved the initial weights: {initial_moved}"
    assert trained_moved == (seed in {"init", "shuffle", *model.streams}), (
        f"seeds.{seed} moved the trained weights: {trained_moved}; the model draws from {sorted(model.streams)}"
    )


def _digest(*arrays: Any) -> str:
    hashed = hashlib.sha256()
    for array in arrays:
        hashed.update(np.ascontiguousarray(np.asarray(array, dtype=np.float32)).tobytes())
    return hashed.hexdigest()


def _streams(name: str, **seeds: int) -> dict[str, str]:
    """The zoo model built and seeded by the library with `seeds`: its initial weights, and what a training-mode
    call draws on a fixed batch (dropout, sampling, augmentation) besides them."""
    import keras
    from sklearn import datasets

    from tracking.config.params import Params
    from tracking.data.arrays import rows, shapes, widths
    from tracking.data.hashing import weights_sha256
    from tracking.data.streamed import streamed_arrays
    from tracking.determinism.process import seed_frameworks
    from tracking.determinism.seeding import capturing_weights, seed_model
    from tracking.determinism.seeds import resolve_seeds
    from tracking.training.augment import step_seed

    module = importlib.import_module(f"zoo.{name}")
    params = Params.model_validate(
        {"seeds": {"base": 5, "init": 11, "shuffle": 12, "dropout": 22, "augment": 33, **seeds}}
    )
    resolved = resolve_seeds(params.seeds)
    seed_frameworks(params, resolved)
    if MODELS[name].loader:
        data = module.load()
        if not isinstance(data, dict):  # a tf.data.Dataset, read as the prepare stage reads it
            data = streamed_arrays(data, name, Path(tempfile.mkdtemp(prefix="zoo-stream-")))
        y = data["y"]
        classes = MODELS[name].task == "classification" and not isinstance(y, dict)
        x, shape, n_outputs = data["x"], shapes(data["x"]), int(y.max()) + 1 if classes else widths(y)
        kwargs = {"train": data} if "train" in inspect.signature(module.build).parameters else {}
    elif MODELS[name].task == "regression":
        found = datasets.load_diabetes()
        x, kwargs = found.data.astype("float32"), {"train": {"x": found.data.astype("float32"), "y": found.target}}
        shape, n_outputs = x.shape[1:], 1
    else:
        x, kwargs = (datasets.load_digits().images / 16.0).astype("float32")[..., None], {}
        shape, n_outputs = x.shape[1:], 10
    with capturing_weights() as created:
        model = module.build(shape, n_outputs, **kwargs)
        if not model.built:  # called on two samples: a subclassed model's weights exist once it is called
            model(rows(x, slice(2)))
    seed_model(model, created, resolved, shape)
    initial = weights_sha256(model.get_weights())
    batch = rows(x, slice(16))
    if "augment" in MODELS[name].sections.get("train", {}):  # train.augment: the batch as the pipeline maps it
        batch = module.augment(batch, None, step_seed(resolved.augment, 0))[0]
    drawn = keras.tree.flatten(model(batch, training=True))  # every output's
    return {"init": initial, "draws": _digest(*map(keras.ops.convert_to_numpy, drawn))}


@pytest.mark.parametrize("name", IN_PROCESS)
def test_each_seed_moves_its_own_stream_in_process(name):
    """The library's seeding of each model: the same seeds give the same model, `init` moves the initial weights
    alone, and `dropout` and `augment` move a training-mode call's draws only where the model has the stream."""
    reference = _streams(name)
    assert _streams(name) == reference, "the same seeds built another model"
    streams = MODELS[name].streams
    for seed in ("init", "dropout", "augment"):
        changed = _streams(name, **{seed: 99})
        assert (changed["init"] != reference["init"]) == (seed == "init"), f"seeds.{seed} and the initial weights"
        moved = changed["draws"] != reference["draws"]
        assert moved == (seed in {"init", *streams}), f"seeds.{seed} moved the draws: {moved}; streams {streams}"


@pytest.mark.parametrize("zoo", list(PIPELINES), indirect=True)
def test_test_loss_is_what_evaluate_gives_the_saved_model(zoo):
    """`test_loss` in metrics/eval.json is the compiled loss of the saved model on the test split, recomputed here
    with Keras alone: the model reloaded with its module's objects, compiled with the loss params.yaml names (or
    the task's), evaluated on the prepared test arrays (a model's own `test_step` scores itself). A model that
    draws at inference (the VAE's sampling) scores from its generators' documented inference state
    (configuration.md: each stream's seed at counter 2^30), set here before evaluating."""
    import tensorflow as tf

    from tracking.config.params import Params
    from tracking.determinism.seeding import inference_streams
    from tracking.determinism.seeds import resolve_seeds

    model, folder = zoo
    root, module, saved = reloaded(model, folder)
    train = model.sections.get("train", {})

    def loss_named(name: str) -> Any:
        return getattr(module, name.split(":")[1]) if ":" in name else name

    named = train.get("loss")
    width = (
        None if named else np.load(root / "outputs/probabilities.npy").shape[-1]
    )  # a subclassed model has no .outputs; a classifier's last axis is its class scores
    task_loss = {"regression": "mean_squared_error", "multilabel": "binary_crossentropy"}.get(model.task)
    loss = (
        {output: loss_named(name) for output, name in named.items()}
        if isinstance(named, dict)
        else loss_named(named)
        if named
        else task_loss or ("binary_crossentropy" if width == 1 else "sparse_categorical_crossentropy")
    )
    own = train.get("compile_kwargs")
    if own:  # a model whose `compile` takes its own arguments (the Distiller's), made as params.yaml names them
        made = {key: loss_named(value)() if ":" in str(value) else value for key, value in own.items()}
        saved.compile(optimizer="adam", metrics=[], **made)
    else:
        saved.compile(loss=loss, loss_weights=train.get("loss_weights"))
    params = Params.model_validate(parse_yaml((root / "params.yaml").read_text()))
    inference_streams(saved, resolve_seeds(params.seeds))
    test = {path.stem.removeprefix("test_"): np.load(path) for path in (root / "data/prepared").glob("test_*.npy")}
    x, y = ({name[2:]: a for name, a in test.items() if name.startswith(f"{role}.")} or test[role] for role in "xy")
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(512)  # Keras's array adapter takes no text
    evaluated = saved.evaluate(batches, verbose=0, return_dict=True)["loss"]
    scores = read(root, "metrics/eval.json")
    assert scores["test_loss"] == pytest.approx(evaluated, rel=1e-5)
    standard = model.task in ("classification", "multilabel") and not model.several_outputs
    assert ("test_crossentropy" in scores) == (standard and (bool(named) or model.adds_to_loss)), sorted(scores)


@pytest.mark.parametrize("zoo", KEPT_TEACHER, indirect=True)
def test_the_saved_teacher_is_the_one_the_builder_trained(zoo):
    """keras-io's distillation after `dvc repro`: the saved model's teacher, reloaded with Keras alone, holds the
    weights the builder trained (the run's `prov.model.kept_weights_sha256`, taken before the student trained), so
    it scores what it scored before distillation, as a trained teacher and not as a random one (about 0.1)."""
    from tracking.data.hashing import weights_sha256

    model, folder = zoo
    root, _module, saved = reloaded(model, folder)
    x, y = (np.load(root / f"data/prepared/test_{role}.npy") for role in "xy")
    accuracy = float((saved.teacher.predict(x, verbose=0).argmax(axis=1) == y).mean())
    fields = recorded(root, train_run_id(root))
    assert fields["prov.model.kept_weights"] == str(len(saved.teacher.weights))
    assert weights_sha256(saved.teacher.get_weights()) == fields["prov.model.kept_weights_sha256"]
    assert accuracy > 0.25, f"the saved teacher scores {accuracy:.3f}: it was re-drawn, not kept"


@pytest.mark.parametrize("zoo", SEVERAL_OUTPUTS, indirect=True)
def test_a_model_of_several_outputs_is_scored_per_output(zoo):
    """Each output's loss and compiled metrics under Keras's names, beside the total; predictions are every
    output's values per sample; the CONTROL churn is of those values (regression's measure); the run records the
    outputs as scored by what was compiled, not as probabilities."""
    _model, folder = zoo
    step(folder, "repro")
    root = folder / "project"
    scores = read(root, "metrics/eval.json")
    assert {"test_loss", "test_priority_loss", "test_department_loss", "test_department_categorical_accuracy"} <= set(
        scores
    ), sorted(scores)
    assert scores["test_loss"] == pytest.approx(scores["test_priority_loss"] + 0.2 * scores["test_department_loss"])
    assert np.load(root / "outputs/predictions.npy").shape[1:] == (4 + 1,)
    assert read(root, "calibration/noise.json")["task"] == "regression"
    (trained,) = [found for found in runs_of(root) if found.info.run_id == train_run_id(root)]
    assert trained.data.tags["prov.model.outputs"] == "compiled"


@pytest.mark.parametrize("zoo", SMALLER_LR, indirect=True)
def test_a_learning_rate_100_times_smaller_is_not_within_noise(zoo):
    """`dvc exp run compare -S train.learning_rate=<100 times smaller>`, judged against the ALGO band (reseeded
    runs): the candidate trained differently and is not called within noise."""
    _model, folder = zoo
    done = step(folder, "smaller_lr")
    assert done["returncode"] == 0, done["stderr"][-2000:]
    verdict = json.loads((folder / "smaller_lr_compare.json").read_text())
    assert verdict["verdict"] != "within_noise", verdict
