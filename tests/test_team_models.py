"""Team models as Keras's guides write them, built and seeded as the team made them: a teacher the builder trained
is kept (keras-io's knowledge distillation, its `compile` of its own arguments), a subclassed model built only when
called is built before seeding (keras-io's RecommenderNet, a dict of integer inputs), a guide's metric whose
`result()` returns a variable's value passes the one-step check on TensorFlow, and a metric factory is called."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

TEAM = '''\
import keras

TRAINED = []  # the teacher's weights as the builder's fit left them


class Distiller(keras.Model):
    """keras-io's knowledge distillation (examples/vision/knowledge_distillation.py), as written there, with the
    get_config a saved model needs."""

    def __init__(self, student, teacher):
        super().__init__()
        self.teacher = teacher
        self.student = student

    def compile(self, optimizer, metrics, student_loss_fn, distillation_loss_fn, alpha=0.1, temperature=3):
        super().compile(optimizer=optimizer, metrics=metrics)
        self.student_loss_fn = student_loss_fn
        self.distillation_loss_fn = distillation_loss_fn
        self.alpha = alpha
        self.temperature = temperature

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
        teacher_pred = self.teacher(x, training=False)
        student_loss = self.student_loss_fn(y, y_pred)
        distillation_loss = self.distillation_loss_fn(
            keras.ops.softmax(teacher_pred / self.temperature, axis=1),
            keras.ops.softmax(y_pred / self.temperature, axis=1),
        ) * (self.temperature**2)
        return self.alpha * student_loss + (1 - self.alpha) * distillation_loss

    def call(self, x):
        return self.student(x)

    # Not in keras-io (it never saves the distiller): what the one-step check's error line asks for.
    def get_config(self):
        serialize = keras.saving.serialize_keras_object
        return {**super().get_config(), "student": serialize(self.student), "teacher": serialize(self.teacher)}

    @classmethod
    def from_config(cls, config):
        return cls(*(keras.saving.deserialize_keras_object(config[name]) for name in ("student", "teacher")))


def net(input_shape, n_outputs, name):
    inputs = keras.Input(input_shape)
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(n_outputs)(hidden), name=name)


def distiller(input_shape, n_outputs, train):
    teacher = net(input_shape, n_outputs, "teacher")
    teacher.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    teacher.fit(train["x"], train["y"], epochs=1, verbose=0)
    TRAINED.append([weight.copy() for weight in teacher.get_weights()])
    return Distiller(net(input_shape, n_outputs, "student"), teacher)


def student_loss():
    """A factory: `compile` gets the loss it returns, configured."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


class RecommenderNet(keras.Model):
    """keras-io's collaborative filtering model (examples/structured_data/collaborative_filtering_movielens.py),
    fed a dict of integer ids."""

    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.num_users, self.num_movies, self.embedding_size = num_users, num_movies, embedding_size
        self.user_embedding = keras.layers.Embedding(num_users, embedding_size, embeddings_initializer="he_normal")
        self.user_bias = keras.layers.Embedding(num_users, 1)
        self.movie_embedding = keras.layers.Embedding(num_movies, embedding_size, embeddings_initializer="he_normal")
        self.movie_bias = keras.layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user = self.user_embedding(inputs["user"])
        movie = self.movie_embedding(inputs["movie"])
        dot = keras.ops.sum(user * movie, axis=-1, keepdims=True)
        return keras.ops.sigmoid(dot + self.user_bias(inputs["user"]) + self.movie_bias(inputs["movie"]))

    def get_config(self):
        return {**super().get_config(), "num_users": self.num_users, "num_movies": self.num_movies,
                "embedding_size": self.embedding_size}


def recommender(input_shape, n_outputs):
    return RecommenderNet(5, 7, 3)


class CategoricalTruePositives(keras.metrics.Metric):
    """The "Training & evaluation with the built-in methods" guide's metric, verbatim."""

    def __init__(self, name="categorical_true_positives", **kwargs):
        super().__init__(name=name, **kwargs)
        self.true_positives = self.add_variable(shape=(), name="ctp", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = keras.ops.reshape(keras.ops.argmax(y_pred, axis=1), (-1, 1))
        values = keras.ops.cast(y_true, "int32") == keras.ops.cast(y_pred, "int32")
        values = keras.ops.cast(values, "float32")
        if sample_weight is not None:
            sample_weight = keras.ops.cast(sample_weight, "float32")
            values = keras.ops.multiply(values, sample_weight)
        self.true_positives.assign_add(keras.ops.sum(values))

    def result(self):
        return self.true_positives.value

    def reset_state(self):
        self.true_positives.assign(0)


def classifier(input_shape, n_outputs):
    inputs = keras.Input(input_shape)
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(inputs))


def auc():
    """A metric factory, as the docs name the form: called for the configured metric."""
    return keras.metrics.AUC(multi_label=True, name="auc_labels")


def mean_prediction(y_true, y_pred):
    """A metric function: Keras calls it on each batch."""
    return keras.ops.mean(y_pred)
'''
SEEDS = {"base": 5, "init": 11, "dropout": 22, "augment": 33}


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project root holding the team's module `team_models` (imported from the root, as a builder is)."""
    root = tmp_path_factory.mktemp("team")
    (root / "team_models.py").write_text(TEAM)
    return root


def params_for(builder: str, train: dict | None = None, task: str = "classification", **seeds: int):
    from tracking.config.params import Params

    return Params.model_validate(
        {
            "model": {"builder": f"team_models:{builder}", "kwargs": {}},
            "data": {"task": task},
            "seeds": {**SEEDS, **seeds},
            "train": train or {},
        }
    )


def team_module(root: Path):
    """The team's module, imported as a builder's is (from the project root)."""
    from tracking.config.user_code import import_module

    return import_module("team_models", "model.builder", root)


def prepared(root: Path, params, train: dict, n_outputs: int, check: bool = True):
    """The model `params` builds on `train`, seeded and (with `check`) compiled and checked, as the train stage
    prepares it."""
    from tracking.determinism.process import seed_frameworks
    from tracking.determinism.seeds import resolve_seeds
    from tracking.training.model import BuildInputs, build_model, prepare_model

    seeds = resolve_seeds(params.seeds)
    seed_frameworks(params, seeds)
    target = None if params.data.task == "classification" else ()
    inputs = BuildInputs(train, n_outputs, target, root)
    return (prepare_model if check else build_model)(params, seeds, inputs)


def digits(n: int = 32) -> dict:
    rng = np.random.default_rng(0)
    return {"x": rng.normal(size=(n, 6)).astype("float32"), "y": (np.arange(n) % 3).astype("int64")}


DISTILLATION = {
    "metrics": ["sparse_categorical_accuracy"],
    "compile_kwargs": {
        "student_loss_fn": "team_models:student_loss",
        "distillation_loss_fn": "keras.losses:KLDivergence",
        "alpha": 0.1,
        "temperature": 10,
    },
}


def test_a_teacher_the_builder_trained_is_kept_and_only_the_student_is_seeded(team: Path):
    """keras-io's distillation: the builder trains the teacher and returns `Distiller(student, teacher)`; the teacher
    keeps its trained weights (hashed), `seeds.init` draws the student's alone, and the Distiller's own `compile`
    takes its arguments from `train.compile_kwargs`."""
    from tracking.data.hashing import weights_sha256
    from tracking.training.model import with_model

    first = prepared(team, params_for("distiller", DISTILLATION), digits(), 3)
    other = prepared(team, params_for("distiller", DISTILLATION, init=99), digits(), 3, check=False)
    trained = team_module(team).TRAINED[0]
    for built in (first, other):
        teacher = built.model.teacher.get_weights()
        assert all(np.array_equal(a, b) for a, b in zip(teacher, trained, strict=True)), "the teacher was re-drawn"
        assert built.seeding.kept == 4 and built.seeding.init == 2  # the teacher's 4 weights; the student's kernels
        assert built.seeding.kept_sha256 == weights_sha256(trained)
    students = [weights_sha256(built.model.student.get_weights()) for built in (first, other)]
    assert students[0] != students[1], "seeds.init does not reach the student"
    record = with_model({"seeds": {"init": 11, "dropout": 22, "augment": 33}}, first, params_for("distiller"))
    assert record["model"]["kept_weights"] == 4 and record["model"]["kept_weights_sha256"] == weights_sha256(trained)
    # No dropout or augmentation layer: those seeds drew nothing and are recorded so.
    assert record["seeds"]["init"] == 11 and record["seeds"]["dropout"].startswith("unused: ")
    assert record["seeds"]["augment"].startswith("unused: ")
    assert first.model.temperature == 10 and first.model.student_loss_fn.from_logits  # the factory was called


def test_a_subclassed_model_of_integer_inputs_is_built_before_seeding(team: Path):
    """keras-io's RecommenderNet returned unbuilt: called on samples of the data (integer ids) before seeding, so
    `seeds.init` draws its four embeddings, and its call is traced for unattributed randomness."""
    rng = np.random.default_rng(1)
    train = {
        "x": {"user": rng.integers(0, 5, 16), "movie": rng.integers(0, 7, 16)},
        "y": rng.uniform(size=16).astype("float32"),
    }
    first = prepared(team, params_for("recommender", task="regression"), train, 1, check=False)
    other = prepared(team, params_for("recommender", task="regression", init=99), train, 1, check=False)
    assert first.seeding.init == other.seeding.init == 4
    assert first.initial_weights_sha256 != other.initial_weights_sha256
    assert first.seeding.unattributed == ()


def test_a_guide_metric_returning_a_variable_value_passes_the_check_on_tensorflow(team: Path):
    """The guide's `CategoricalTruePositives` (`result()` returns `self.true_positives.value`) once failed the
    one-step check on TensorFlow ('NoneType' object has no attribute 'is_set'), though Keras's `fit` trains it."""
    built = prepared(team, params_for("classifier", {"metrics": ["team_models:CategoricalTruePositives"]}), digits(), 3)
    assert [type(metric).__name__ for metric in built.model._compile_metrics._user_metrics] == [
        "CategoricalTruePositives"
    ]


def test_a_metric_factory_is_called_and_a_metric_function_is_kept(team: Path):
    import keras

    from tracking.training.compiling import resolve_metrics

    made, function = resolve_metrics(["team_models:auc", "team_models:mean_prediction"], team)
    assert isinstance(made, keras.metrics.AUC) and made.multi_label and made.name == "auc_labels"
    assert function.__name__ == "mean_prediction"


@pytest.mark.parametrize(
    ("train", "expected"),
    [
        ({"compile_kwargs": {"temprature": 3}}, "train.compile_kwargs.temprature: Distiller.compile has no parameter"),
        ({"compile_kwargs": {"alpha": 0.5}}, "needs student_loss_fn, distillation_loss_fn"),
        ({"loss": "mse", **DISTILLATION}, "train.loss: the model's own Distiller.compile takes no loss"),
        ({"compile_kwargs": {**DISTILLATION["compile_kwargs"], "loss": "mse"}}, "move it there"),
    ],
)
def test_a_models_own_compile_arguments_are_checked_one_line_each(team: Path, train: dict, expected: str):
    from tracking.errors import UserCodeError
    from tracking.training.compiling import compile_model

    team_models = team_module(team)
    model = team_models.Distiller(team_models.net((6,), 3, "s"), team_models.net((6,), 3, "t"))
    with pytest.raises(UserCodeError, match=r"^train\.") as caught:
        compile_model(model, params_for("distiller", train), team)
    assert expected in str(caught.value)


SCRIPT = """\
import json

import keras
import numpy as np

import tracking
from team_models import Distiller, RecommenderNet, net

rng = np.random.default_rng(0)
ids = {"user": rng.integers(0, 5, 32), "movie": rng.integers(0, 7, 32)}
ratings = rng.uniform(size=32).astype("float32")
with tracking.start(seeds={"base": "train.seed", "init": "train.init"}) as run:
    run.log_data(ids, ratings)
    model = run.seeded(RecommenderNet(5, 7, 3))  # unbuilt: called on the logged data's first samples
    model.compile("adam", "mse")
    model.fit(ids, ratings, epochs=1, batch_size=8, verbose=0, callbacks=[run.callback()])
    run.log_model(model)

x, y = rng.normal(size=(32, 6)).astype("float32"), np.arange(32) % 3
with tracking.start(seeds={"base": "train.seed"}) as run:
    teacher = net((6,), 3, "teacher")
    teacher.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    teacher.fit(x, y, epochs=1, verbose=0)
    trained = teacher.get_weights()
    run.log_data(x, y)
    distiller = run.seeded(Distiller(net((6,), 3, "student"), teacher))
    kept = all(np.array_equal(a, b) for a, b in zip(teacher.get_weights(), trained, strict=True))
    json.dump({"teacher_kept": kept}, open("kept.json", "w"))
"""


@pytest.mark.slow
def test_a_script_seeds_a_subclassed_model_and_keeps_a_trained_teacher(team: Path, tmp_path: Path):
    """The library route: `run.seeded` builds keras-io's RecommenderNet on the logged data's first samples (it was
    refused as not built), records the seeds nothing drew from as unused (they were recorded as numbers), traces it
    and logs it as an MLflow model (it was taken for "a model of models, as a GAN's"); a Distiller whose teacher
    trained before keeps the teacher and seeds the student."""
    import json
    import shutil
    import sys

    from conftest import client_for, project_env, run

    from tracking.determinism.seeds import derive_seed

    project = tmp_path / "team"
    project.mkdir()
    shutil.copy(team / "team_models.py", project)
    (project / "train.py").write_text(SCRIPT)
    (project / "params.yaml").write_text("train:\n  seed: 7\n  init: 123\n")
    (project / ".gitignore").write_text("mlflow.db*\nmlartifacts/\n.tracking/\nkept.json\n__pycache__/\n")
    run(["git", "init", "-q"], project)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "team's project"], project)
    env = project_env(PYTHONHASHSEED=str(derive_seed(7, "hash")), TF_ENABLE_ONEDNN_OPTS="0")
    run([sys.executable, "train.py"], project, env=env)
    client = client_for(project)
    experiment = client.get_experiment_by_name("team").experiment_id
    recommender, distilled = sorted(client.search_runs([experiment]), key=lambda found: found.info.start_time)
    tags = recommender.data.tags
    assert recommender.info.status == distilled.info.status == "FINISHED"
    assert tags["prov.seeds.init"] == "123" and tags["prov.model.seeded_weights"] == "4"
    assert tags["prov.seeds.dropout"].startswith("unused: ") and tags["prov.seeds.augment"].startswith("unused: ")
    assert "prov.seeds.unattributed" not in tags  # traced on the data's dtypes, not "not checked"
    assert [found.source_run_id for found in client.search_logged_models([experiment])] == [recommender.info.run_id]
    assert json.loads((project / "kept.json").read_text()) == {"teacher_kept": True}
    assert distilled.data.tags["prov.model.kept_weights"] == "2"  # the teacher's kernels; its biases draw nothing
    assert distilled.data.tags["prov.model.seeded_weights"] == "2"  # the student's kernels
