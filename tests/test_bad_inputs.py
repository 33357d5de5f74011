"""Every input a user can get wrong, in one table: one `error:` line with the fix, exit 2, nothing written.

Each case copies one prepared project (git + DVC, tiny params, `data/prepared` and an MLflow store with an
empty experiment), breaks it, runs one real command, and checks: exit status 2 (DVC's own non-zero status
for `dvc repro`), exactly one `error: ` line holding the expected text, no traceback, no file written or
changed, and no MLflow run opened (so none is left RUNNING). Most cases fail before TensorFlow is imported,
which keeps them fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
from conftest import BIN, TINY, client_for, make_project, project_env, run, train_run_id, write_params

from tracking.env import TRACKING_FREE_SPACE_MB
from tracking.layout import MODEL_STAGES
from tracking.noise.record import NoiseRecord, Variant
from tracking.yaml_text import parse_yaml, yaml_editor

Setup = Callable[[Path], dict[str, str] | None]
UNKNOWN_RUN_ID = "0123456789abcdef0123456789abcdef"
# An outputs/run.json recording a training that no run in the store logged.
UNRECORDED_TRAINING = f'{{"experiment": "test", "inputs_sha256": "{"1" * 64}", "weights_sha256": "{"2" * 64}"}}\n'
EMPTY_EXPERIMENT = "empty"


def stage(name: str) -> list[str]:
    return [sys.executable, "-m", f"pipelines.{name}"]


def repro(name: str) -> list[str]:
    return [str(BIN / "dvc"), "repro", name]


def tracking(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracking", *args]


def params_text(text: str) -> Setup:
    """params.yaml holding `text` (a lone surrogate `\\udcXX` writes the byte 0xXX, not UTF-8)."""

    def setup(root: Path) -> None:
        (root / "params.yaml").write_bytes(text.encode("utf-8", "surrogateescape"))

    return setup


def params(**sections: dict) -> Setup:
    def setup(root: Path) -> None:
        write_params(root, **sections)

    return setup


def without_builder(root: Path) -> None:
    """params.yaml with no `model.builder`: the library has no default model to fall back on."""
    path = root / "params.yaml"
    tree = parse_yaml(path.read_text())
    del tree["model"]["builder"]
    with open(path, "w", encoding="utf-8") as handle:
        yaml_editor().dump(tree, handle)


def npz(**arrays: np.ndarray) -> Setup:
    """A user data set at data/mine.npz, named by data.source."""

    def setup(root: Path) -> None:
        np.savez(root / "data/mine.npz", **arrays)
        write_params(root, data={"source": "data/mine.npz"})

    return setup


def good_arrays(n: int = 60) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.random((n, 8, 8), dtype="float32"), "y": np.arange(n) % 4}


def with_x(change: Callable[[np.ndarray], np.ndarray]) -> Setup:
    arrays = good_arrays()
    return npz(x=change(arrays["x"]), y=arrays["y"])


def with_y(y: np.ndarray) -> Setup:
    return npz(x=good_arrays(len(y))["x"], y=y)


def nan_at_end(x: np.ndarray) -> np.ndarray:
    x[-1, -1, -1] = np.nan
    return x


def inf_at_start(x: np.ndarray) -> np.ndarray:
    x[0, 0, 0] = np.inf
    return x


def truncated_npz(root: Path) -> None:
    """A real .npz cut short, as an interrupted copy or download leaves it."""
    npz(**good_arrays())(root)
    path = root / "data/mine.npz"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def npy_instead_of_npz(root: Path) -> None:
    np.save(root / "data/mine.npy", good_arrays()["x"])
    write_params(root, data={"source": "data/mine.npy"})


def params_as(make: Callable[[Path], None]) -> Setup:
    """params.yaml replaced by what `make` puts at its path (a directory, a link, a FIFO)."""

    def setup(root: Path) -> None:
        (root / "params.yaml").unlink()
        make(root / "params.yaml")

    return setup


def looping_link(path: Path) -> None:
    path.symlink_to(path.name)


def source_at(source: str, make: Callable[[Path], None] | None = None) -> Setup:
    """data.source naming `source`, made by `make` (relative to the project) when given."""

    def setup(root: Path) -> None:
        if make is not None:
            make(root / source)
        write_params(root, data={"source": source})

    return setup


def x_saved_twice(root: Path) -> None:
    """An .npz holding x.npy twice (appended to with zipfile): np.load would keep one copy without a word."""
    import io
    import warnings
    import zipfile

    npz(**good_arrays())(root)
    saved = io.BytesIO()
    np.save(saved, good_arrays()["x"] * 2)
    with warnings.catch_warnings(), zipfile.ZipFile(root / "data/mine.npz", "a") as archive:
        warnings.simplefilter("ignore")  # zipfile's "Duplicate name" warning: the duplicate is the point
        archive.writestr("x.npy", saved.getvalue())


def header_claims_terabytes(root: Path) -> None:
    """An .npz whose x header claims shape (10^12, 8) over 60 samples' bytes: NumPy would allocate 29 TiB first."""
    import io
    import zipfile

    arrays = good_arrays()
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 8)})
    with zipfile.ZipFile(root / "data/mine.npz", "w") as archive:
        archive.writestr("x.npy", header.getvalue() + arrays["x"].tobytes())
        saved = io.BytesIO()
        np.save(saved, arrays["y"])
        archive.writestr("y.npy", saved.getvalue())
    write_params(root, data={"source": "data/mine.npz"})


# Nine levels of nine aliases each: 9^9 (387 million) strings once followed, a few hundred bytes as written.
YAML_BOMB = (
    "data:\n  source: null\n  loader: team_data:load\n  kwargs:\n    l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(f"    l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]\n" for level in range(1, 9))
)


def namespaced(script: str, command: list[str]) -> list[str]:
    """`command` run in a user and mount namespace after `script` (run in the project) changed its mounts: a
    read-only bind mount or a small tmpfs give real EROFS and ENOSPC errors, without root or a loop device."""
    return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", f'{script} && exec "$@"', "sh", *command]


def read_only(command: list[str]) -> list[str]:
    return namespaced('mount --bind -o ro "$PWD" "$PWD" && mount -o remount,bind,ro "$PWD"', command)


NAMESPACES = subprocess.run(namespaced("true", ["true"]), capture_output=True).returncode == 0
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="unprivileged user and mount namespaces are off")
DAMAGED_STORE = "damaged/mlflow.db"


def damaged_store(damage: Callable[[bytes], bytes]) -> Setup:
    """A copy of the project's store at damaged/mlflow.db, damaged, and MLFLOW_TRACKING_URI naming it (the
    project's own store stays whole, so the table can still check that no run was opened)."""

    def setup(root: Path) -> dict[str, str]:
        (root / "damaged").mkdir()
        (root / DAMAGED_STORE).write_bytes(damage((root / "mlflow.db").read_bytes()))
        return {"MLFLOW_TRACKING_URI": f"sqlite:///{root / DAMAGED_STORE}"}

    return setup


def another_applications_database(root: Path) -> dict[str, str]:
    """MLFLOW_TRACKING_URI naming another application's SQLite file (its one table, one row)."""
    import sqlite3
    from contextlib import closing

    (root / "app").mkdir()
    with closing(sqlite3.connect(root / "app/app.db")) as db:
        db.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
        db.execute("INSERT INTO customers VALUES (1, 'Ada')")
        db.commit()
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{root / 'app/app.db'}"}


def store_of_a_newer_mlflow(root: Path) -> dict[str, str]:
    """A copy of the project's store whose schema revision this MLflow does not know (a newer MLflow wrote it)."""
    import sqlite3
    from contextlib import closing

    env = damaged_store(lambda data: data)(root)
    with closing(sqlite3.connect(root / DAMAGED_STORE)) as db:
        db.execute("UPDATE alembic_version SET version_num = 'f0e1d2c3b4a5'")
        db.commit()
    return env


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 3]


def garbled_header(data: bytes) -> bytes:
    return b"garbage, not SQLite" + data[19:]


def garbled_pages(data: bytes) -> bytes:
    noise = np.random.default_rng(0).integers(0, 256, 40_000, dtype=np.uint8).tobytes()
    return data[:8192] + noise + data[8192 + len(noise) :]


def deleted_experiment(root: Path) -> None:
    client = client_for(root)
    client.delete_experiment(client.create_experiment("test"))


def truncated_prepared(root: Path) -> None:
    path = root / "data/prepared/train_x.npy"
    path.write_bytes(path.read_bytes()[:1000])


def remove(relative: str) -> Setup:
    def setup(root: Path) -> None:
        target = root / relative
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return setup


def environment(**variables: str) -> Setup:
    def setup(root: Path) -> dict[str, str]:
        return variables

    return setup


def unrecorded_training(root: Path) -> None:
    """Outputs of a train stage whose training no run in the store logged."""
    (root / "outputs").mkdir(exist_ok=True)
    (root / "outputs/run.json").write_text(UNRECORDED_TRAINING)
    (root / "outputs/model.keras").write_bytes(b"not reached: the training's run is looked up first")


def run_file_only(root: Path) -> None:
    (root / "outputs").mkdir(exist_ok=True)
    (root / "outputs/run.json").write_text(UNRECORDED_TRAINING)


def baseline_text(text: str) -> Setup:
    def setup(root: Path) -> None:
        (root / "baseline.yaml").write_text(text)

    return setup


USER_BUILDER = """\
def build(input_shape, n_outputs, width=8):
    import keras

    inputs = keras.Input(input_shape)
    hidden = keras.layers.Dense(width, activation="relu")(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(hidden))
"""


def user_builder(text: str = USER_BUILDER, listed: bool = True) -> Setup:
    """A team's builder at models/net.py named by model.builder, listed among the deps of the stages that build the
    model (train, calibrate and compare) or not."""

    def setup(root: Path) -> None:
        (root / "models").mkdir()
        (root / "models/net.py").write_text(text)
        write_params(root, model={"builder": "models.net:build", "kwargs": {}})
        if listed:
            content = parse_yaml((root / "dvc.yaml").read_text())
            for stage in MODEL_STAGES:
                content["stages"][stage]["deps"].append("models/net.py")
            with open(root / "dvc.yaml", "w", encoding="utf-8") as handle:
                yaml_editor().dump(content, handle)

    return setup


def unfrozen_baseline(root: Path) -> None:
    """The team's builder in params.yaml beside the template's baseline.yaml, never frozen from it: its small_cnn
    fails on the team's setting."""
    user_builder()(root)
    path = root / "baseline.yaml"
    tree = parse_yaml(path.read_text())
    tree["model"]["kwargs"]["dense_units"] = 0
    with open(path, "w", encoding="utf-8") as handle:
        yaml_editor().dump(tree, handle)


def user_loader(body: str, dep: bool = True, **data: object) -> Setup:
    """A team's loader at team_data.py named by data.loader; `dep`: listed among the prepare stage's deps."""

    def setup(root: Path) -> None:
        (root / "team_data.py").write_text(f"import numpy as np\n\n\ndef load(n=40):\n    {body}\n")
        if dep:
            dvc_file = root / "dvc.yaml"
            dvc_file.write_text(
                dvc_file.read_text().replace("      - data/raw\n", "      - data/raw\n      - team_data.py\n", 1)
            )
        write_params(root, data={"source": None, "loader": "team_data:load", **data})

    return setup


def compare_inputs(**compare: object) -> Setup:
    """The files the compare stage reads, as a calibrated pipeline leaves them, and `compare` in params.yaml."""

    def setup(root: Path) -> None:
        for folder in ("outputs", "metrics", "calibration"):
            (root / folder).mkdir(exist_ok=True)
        (root / "outputs/run.json").write_text(UNRECORDED_TRAINING)
        (root / "metrics/eval.json").write_text(
            '{"test_loss": 0.3, "test_accuracy": 0.9, "per_class_accuracy": {"0": 0.9}}\n'
        )
        algo = Variant(runs=[], bands={}, churn={}, weight_distance={}, bit_identical=False, weights_sha256=[])
        NoiseRecord(baseline={}, data_sha256="", alpha=0.05, repeats=3, runs=[], variants={"algo": algo}).write(
            root / "calibration/noise.json"
        )
        np.save(root / "outputs/predictions.npy", np.zeros(3, dtype="int64"))
        np.savez(root / "outputs/calibration.npz", predictions=np.zeros((3, 3), dtype="int16"))
        write_params(root, compare=compare)

    return setup


def made(relative: str, make: Callable[[Path], None]) -> Setup:
    """The path `relative` in the project made by `make` (whatever was there removed first)."""

    def setup(root: Path) -> None:
        path = root / relative
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        make(path)

    return setup


def compare_inputs_with(relative: str, damage: Callable[[bytes], bytes]) -> Setup:
    """The compare stage's inputs (`compare_inputs`) with the file at `relative` damaged: its bytes through `damage`."""

    def setup(root: Path) -> None:
        compare_inputs()(root)
        path = root / relative
        path.write_bytes(damage(path.read_bytes()))

    return setup


def halved(content: bytes) -> bytes:
    """A file cut off halfway, as a full disk or a killed copy leaves it."""
    return content[: len(content) // 2]


def user_loss(root: Path) -> None:
    """A team's loss at models/losses.py named by train.loss, not listed among the train stage's deps."""
    (root / "models").mkdir()
    (root / "models/losses.py").write_text("def focal(y_true, y_pred):\n    return y_pred\n")
    write_params(root, train={"loss": "models.losses:focal"})


def builder_returning(expression: str) -> Setup:
    """A listed team builder whose return statement is `expression` (with `keras` and `n_outputs` at hand)."""
    return user_builder(
        USER_BUILDER.replace(
            '    return keras.Model(inputs, keras.layers.Dense(n_outputs, activation="softmax")(hidden))',
            f"    return {expression}",
        )
    )


def written(relative: str, content: str) -> Setup:
    """The file at `relative` holding `content` (its folder made), as a damaged or hand-edited output leaves it."""

    def setup(root: Path) -> None:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content)

    return setup


def trained_outputs(run_file: str) -> Setup:
    """The train stage's outputs with `run_file` as outputs/run.json (the model a file Keras cannot load)."""

    def setup(root: Path) -> None:
        written("outputs/model.keras", "not a zip")(root)
        written("outputs/run.json", run_file)(root)

    return setup


def case(name: str, setup: Setup, command: list[str], *expected: str):
    """One row: what breaks the project, the command run, and the texts its `error:` line must hold."""
    return pytest.param(setup, command, expected, id=name)


def unchanged(root: Path) -> None:
    """The prepared project as it is (the command itself is the mistake)."""


def params_line(key: str, value: str) -> Setup:
    """params.yaml with `key`'s line (the first of that name) holding `value` as written, unquoted."""

    def setup(root: Path) -> None:
        path = root / "params.yaml"
        path.write_text(re.sub(rf"(?m)^(\s*{key}:).*$", rf"\g<1> {value}", path.read_text(), count=1))

    return setup


CASES = [
    # params.yaml
    case(
        "yaml-syntax-error",
        params_text("train:\n  epochs: [2\n"),
        stage("train"),
        "params.yaml: YAML syntax error at line 3",
        "fix the YAML",
    ),
    case(
        "params-not-a-mapping",
        params_text("- train\n- model\n"),
        stage("train"),
        "params.yaml: expected a mapping of sections",
        "got list",
    ),
    case("params-missing", remove("params.yaml"), stage("prepare"), "params.yaml: file not found", "create it"),
    case("params-a-directory", params_as(Path.mkdir), stage("prepare"), "params.yaml is a directory, not a file"),
    case("params-a-link-loop", params_as(looping_link), stage("prepare"), "params.yaml is a symbolic link that loops"),
    case("params-a-fifo", params_as(os.mkfifo), stage("prepare"), "params.yaml is a FIFO (named pipe), not a file"),
    case("params-empty", params_text(""), stage("prepare"), "params.yaml is empty", "write `{}`"),
    case(
        "params-yaml-date",
        params_line("experiment", "2024-01-01"),
        stage("train"),
        "params.yaml: mlflow.experiment: YAML reads 2024-01-01 as a date",
        'quote it to keep it as text (experiment: "2024-01-01")',
    ),
    case(
        "params-yaml-datetime",
        params_line("experiment", "2024-01-01 10:00:00"),
        stage("prepare"),
        "params.yaml: mlflow.experiment: YAML reads 2024-01-01 10:00:00 as a datetime",
    ),
    case(
        "prepare-under-its-old-module-name",
        environment(),
        stage("data"),
        "now pipelines.prepare",
        "`python3 -m pipelines.prepare`",
    ),
    case(
        "unknown-section", params(trian={"epochs": 2}), stage("train"), "unknown key 'trian'", "did you mean 'train'?"
    ),
    case(
        "misspelled-key",
        params(train={"lerning_rate": 0.1}),
        stage("train"),
        "unknown key 'train.lerning_rate'",
        "did you mean 'train.learning_rate'?",
    ),
    case(
        "section-not-a-mapping",
        params_text("train: 5\n"),
        stage("train"),
        "params.yaml: train:",
        "got 5",
        "fix it in params.yaml",
    ),
    case(
        "epochs-wrong-type",
        params(train={"epochs": "two"}),
        stage("train"),
        "train.epochs: expected a valid integer, got 'two'",
        "fix it in params.yaml",
    ),
    case(
        "epochs-float",
        params(train={"epochs": 2.5}),
        stage("train"),
        "train.epochs: expected a valid integer, got 2.5",
        "fix it in params.yaml",
    ),
    case(
        "epochs-zero-dvc-repro",
        params(train={"epochs": 0}),
        repro("train"),
        "train.epochs: expected greater than or equal to 1, got 0",
        "fix it in params.yaml",
    ),
    case(
        "batch-size-negative",
        params(train={"batch_size": -32}),
        stage("train"),
        "train.batch_size: expected greater than or equal to 1, got -32",
        "fix it in params.yaml",
    ),
    case(
        "repeats-zero",
        params(calibration={"repeats": 0}),
        stage("calibrate"),
        "calibration.repeats: expected greater than or equal to 3, got 0",
        "fix it in params.yaml",
    ),
    case(
        "builder-unset",
        without_builder,
        stage("train"),
        "model.builder: not set, and training builds the model it names (the library has no default model)",
        "name the builder in params.yaml, `model.builder: package.module:function` (docs/configuration.md)",
    ),
    case(
        "builder-not-module-function",
        params(model={"builder": "resnet50"}),
        stage("train"),
        "model.builder: expected 'package.module:function', got 'resnet50'",
        "fix it in params.yaml",
    ),
    case(
        "test-fraction-out-of-range",
        params(data={"test_fraction": 1.5}),
        stage("prepare"),
        "data.test_fraction: expected less than 1, got 1.5",
        "fix it in params.yaml",
    ),
    case(
        "sha256-malformed",
        params(data={"sha256": "abc123"}),
        stage("prepare"),
        "data.sha256: expected 64 lowercase hex digits",
        "fix it in params.yaml",
    ),
    case(
        "baseline-missing",
        remove("baseline.yaml"),
        stage("calibrate"),
        "baseline.yaml: baseline not found",
        "tracking baseline",
    ),
    case(
        "baseline-not-frozen-from-params",
        unfrozen_baseline,
        stage("calibrate"),
        "baseline.yaml: the frozen baseline builds 'pipelines.models:small_cnn', but params.yaml names "
        "'models.net:build'",
        "freeze params.yaml as the baseline with `tracking baseline`",
    ),
    case(
        "baseline-misspelled-key",
        baseline_text("train:\n  lerning_rate: 0.1\n"),
        stage("calibrate"),
        "baseline.yaml: unknown key 'train.lerning_rate'",
        "did you mean 'train.learning_rate'?",
    ),
    # the data source
    case(
        "data-file-missing",
        params(data={"source": "data/missing.npz"}),
        stage("prepare"),
        "data.source: file 'data/missing.npz' not found",
        "dvc pull",
    ),
    case(
        "data-file-missing-dvc-repro",
        params(data={"source": "data/missing.npz"}),
        repro("prepare"),
        "data.source: file 'data/missing.npz' not found",
        "dvc pull",
    ),
    case(
        "data-source-a-link-loop",
        source_at("data/loop.npz", looping_link),
        stage("prepare"),
        "data.source: 'data/loop.npz' is a symbolic link that loops",
    ),
    case("data-source-a-directory", source_at("data/raw"), stage("prepare"), "'data/raw' is a directory, not a file"),
    case("data-source-dev-zero", source_at("/dev/zero"), stage("prepare"), "'/dev/zero' is a character device, not a"),
    case("data-file-x-twice", x_saved_twice, stage("prepare"), "holds 1 name(s) more than once (x.npy)", "np.savez"),
    case(
        "data-file-truncated",
        truncated_npz,
        stage("prepare"),
        "'data/mine.npz' is not a readable .npz file",
        "re-create or re-fetch it",
    ),
    case(
        "data-file-header-claims-terabytes",
        header_claims_terabytes,
        stage("prepare"),
        "'data/mine.npz' array x's header claims shape (1000000000000, 8) of float32 (29.1 TiB)",
        "it is damaged or was not written by np.savez",
        "re-create it",
    ),
    case(
        "data-file-npy-not-npz",
        npy_instead_of_npz,
        stage("prepare"),
        "'data/mine.npy' is not a readable .npz file",
        "np.savez",
    ),
    case(
        "data-unknown-builtin",
        params(data={"source": "sklearn:mnist"}),
        stage("prepare"),
        "unknown built-in 'sklearn:mnist'",
        "use 'sklearn:digits'",
    ),
    case("data-lacks-y", npz(x=good_arrays()["x"]), stage("prepare"), "lacks array(s) y", "np.savez"),
    case(
        "data-length-mismatch",
        npz(x=good_arrays()["x"], y=np.arange(59) % 4),
        stage("prepare"),
        "arrays differ in length ({'x': 60, 'y': 59})",
        "one entry per sample",
    ),
    case(
        "data-groups-length-mismatch",
        npz(**good_arrays(), groups=np.zeros(61)),
        stage("prepare"),
        "'groups': 61",
        "one entry per sample",
    ),
    case(
        "labels-negative",
        with_y(np.array([0, 1, 2, -1] * 15)),
        stage("prepare"),
        "array y has negative label -1",
        "labels must be 0..n_classes-1",
    ),
    case(
        "labels-float",
        with_y((np.arange(60) % 4).astype("float64")),
        stage("prepare"),
        "array y must be integer class labels (one per sample, shape (n_samples,), or one per pixel or step), got float64",
        "y.astype(int)",
    ),
    case(
        "labels-with-gaps",
        with_y(np.arange(60) % 4 * 3),
        stage("prepare"),
        "classes 1, 2, 4, 5, 7, 8 never appear",
        "np.unique(y, return_inverse=True)",
    ),
    case(
        "labels-2d",
        with_y((np.arange(60) % 4).reshape(60, 1)),
        stage("prepare"),
        "array y must be integer class labels (one per sample, shape (n_samples,), or one per pixel or step), got int64 with shape (60, 1)",
        "y.ravel() for a column of labels",
    ),
    case(
        "x-nan",
        with_x(nan_at_end),
        stage("prepare"),
        "array x has NaN or infinite values (1 NaN, 0 inf, in 1 sample(s), the first at index 59)",
        "drop or impute",
    ),
    case(
        "x-inf",
        with_x(inf_at_start),
        stage("prepare"),
        "(0 NaN, 1 inf, in 1 sample(s), the first at index 0)",
        "drop or impute",
    ),
    case(
        "x-scalar",
        npz(x=np.float32(1.0), y=np.arange(4) % 2),
        stage("prepare"),
        "array x must hold at least one sample, got shape ()",
        "one entry per sample",
    ),
    case(
        "x-complex",
        with_x(lambda x: x.astype("complex64")),
        stage("prepare"),
        "array x has dtype complex64, which Keras cannot take as features",
        "real and imaginary features",
    ),
    case(
        "data-too-few-samples",
        npz(x=good_arrays(20)["x"], y=np.arange(20) % 10),
        stage("prepare"),
        "cannot split 20 samples",
        "use more samples per class or change the fractions",
    ),
    case(
        "pin-mismatch-dvc-repro",
        params(data={"sha256": "0" * 64}),
        repro("prepare"),
        "differs from data.sha256 " + "0" * 64,
        "tracking pin-data",
    ),
    case(
        "prepared-data-truncated",
        truncated_prepared,
        stage("train"),
        "data/prepared/train_x.npy is not a readable .npy file",
        "dvc repro -f prepare",
    ),
    case(
        "prepared-data-missing",
        remove("data/prepared"),
        stage("train"),
        "run the prepare stage first",
        "dvc repro prepare",
    ),
    # repository and store
    case("not-a-git-repo", remove(".git"), stage("train"), "is not inside a git repository", "git init"),
    case("dvc-not-initialised", remove(".dvc"), stage("prepare"), "not inside a DVC project", "dvc init"),
    case(
        "tracking-uri-unreachable",
        environment(MLFLOW_TRACKING_URI="http://127.0.0.1:9"),
        stage("train"),
        "MLflow tracking store http://127.0.0.1:9 cannot be reached",
        "MLFLOW_TRACKING_URI",
    ),
    case(
        "store-truncated-train",
        damaged_store(truncated),
        stage("train"),
        f"MLflow store {{root}}/{DAMAGED_STORE} is damaged (database disk image is malformed)",
        "move it aside",
        "restore a backup, or salvage what it holds with `sqlite3 mlflow.db.damaged .recover",
    ),
    case(
        "store-header-garbled-doctor",
        damaged_store(garbled_header),
        tracking("doctor"),
        "is damaged (file is not a database)",
        "restore a backup",
    ),
    case(
        "store-pages-garbled-doctor",
        damaged_store(garbled_pages),
        tracking("doctor"),
        "is damaged (database disk image is malformed)",
        "restore a backup",
    ),
    case(
        "store-pages-garbled-train",
        damaged_store(garbled_pages),
        stage("train"),
        "is damaged (database disk image is malformed)",
        "restore a backup",
    ),
    case(
        "store-another-applications-database-doctor",
        another_applications_database,
        tracking("doctor"),
        "app/app.db is not an MLflow store: it is an SQLite database holding other tables (customers)",
        "nothing was written to it",
    ),
    case(
        "store-of-a-newer-mlflow-doctor",
        store_of_a_newer_mlflow,
        tracking("doctor"),
        "was written by a newer MLflow than this environment's",
        "(its schema revision f0e1d2c3b4a5 is unknown here)",
        "`mlflow db upgrade` cannot help, it only moves a schema forward",
    ),
    case(
        "store-another-applications-database-train",
        another_applications_database,
        stage("train"),
        "app/app.db is not an MLflow store",
    ),
    case(
        "experiment-deleted",
        deleted_experiment,
        stage("train"),
        "MLflow experiment 'test' (id 2) is deleted in sqlite:///",
        "mlflow experiments restore --experiment-id 2`) or name another in mlflow.experiment",
    ),
    pytest.param(
        unchanged,
        read_only(stage("prepare")),
        ("data/prepared cannot be written (Read-only file system", "make the folder writable"),
        id="project-read-only-prepare",
        marks=needs_namespaces,
    ),
    pytest.param(
        unchanged,
        namespaced("mount -t tmpfs -o size=16k tmpfs data && mkdir data/raw", stage("prepare")),
        ("data/prepared cannot be written", "free space"),
        id="disk-full-under-data-prepare",
        marks=needs_namespaces,
    ),
    pytest.param(
        unchanged,
        read_only(tracking("doctor")),
        ("mlflow.db.lock cannot be opened or written (Read-only file system)", "make it and its folder writable"),
        id="store-read-only-doctor",
        marks=needs_namespaces,
    ),
    pytest.param(
        unchanged,
        read_only(tracking("diff", UNKNOWN_RUN_ID, "lr-up")),
        (
            "mlflow.db.lock cannot be opened or written (Read-only file system)",
            "MLFLOW_TRACKING_URI to a store you can write",
        ),
        id="store-read-only-diff",
        marks=needs_namespaces,
    ),
    case("evaluate-before-train", unchanged, stage("evaluate"), "outputs/run.json not found", "dvc repro train"),
    case(
        "evaluate-model-missing", run_file_only, stage("evaluate"), "outputs/model.keras not found", "dvc repro train"
    ),
    case(
        "evaluate-training-without-a-run",
        unrecorded_training,
        stage("evaluate"),
        f"outputs/run.json records a training (weights {'2' * 12}...) that no run in",
        "dvc repro --force --downstream train",
    ),
    case(
        "compare-before-calibrate",
        unchanged,
        stage("compare"),
        "not found; run the pipeline up to compare first",
        "dvc repro",
    ),
    # the tracking command
    case(
        "bands-empty-experiment",
        unchanged,
        tracking("bands", "--experiment", EMPTY_EXPERIMENT),
        f"no runs in MLflow experiment '{EMPTY_EXPERIMENT}'",
        "dvc repro",
    ),
    case(
        "bands-filter-rejected",
        unchanged,
        tracking("bands", "--experiment", EMPTY_EXPERIMENT, "--filter", "accuracy > 0.9"),
        "filter 'accuracy > 0.9' rejected by MLflow",
        "fix the filter string",
    ),
    case(
        "compare-groups-filter-rejected",
        unchanged,
        tracking("compare-groups", "--experiment", EMPTY_EXPERIMENT, "--a", "metrics.test_accuracy >", "--b", ""),
        "rejected by MLflow",
        "fix the filter string",
    ),
    case(
        "diff-unknown-run-id",
        unchanged,
        tracking("diff", UNKNOWN_RUN_ID, "lr-up"),
        f"run '{UNKNOWN_RUN_ID}' not found",
        "`mlflow ui` lists runs with their names and ids",
    ),
    case(
        "diff-outside-a-project-without-uri",
        remove(".dvc"),
        tracking("diff", UNKNOWN_RUN_ID, "lr-up"),
        "not inside a DVC project and MLFLOW_TRACKING_URI is not set",
        "set MLFLOW_TRACKING_URI to the store",
    ),
    case(
        "bands-outside-a-project-without-uri",
        remove(".dvc"),
        tracking("bands", "--experiment", EMPTY_EXPERIMENT),
        "not inside a DVC project and MLFLOW_TRACKING_URI is not set",
        "set MLFLOW_TRACKING_URI to the store",
    ),
    case(
        "rerun-unknown-run-id",
        unchanged,
        tracking("rerun", UNKNOWN_RUN_ID),
        f"run '{UNKNOWN_RUN_ID}' not found",
        "`mlflow ui` lists runs with their names and ids",
    ),
    case(
        "pin-data-before-prepare",
        remove("data/prepared"),
        tracking("pin-data"),
        "run the prepare stage first",
        "dvc repro prepare",
    ),
    # a team's own model
    case(
        "builder-not-a-stage-dep-dvc-repro",
        user_builder(listed=False),
        repro("train"),
        "model.builder: models/net.py is not a dependency of stages train, calibrate and compare",
        "add `- models/net.py` under deps of stages train, calibrate and compare in dvc.yaml",
    ),
    # a team's own data and task
    case(
        "loader-wrong-keys",
        user_loader("return {'x': np.zeros((n, 3)), 'labels': np.arange(n) % 2}"),
        stage("prepare"),
        "data.loader: 'team_data:load' returned a mapping that lacks y",
        "return exactly the keys x, y and optionally groups",
    ),
    case(
        "loader-not-a-mapping",
        user_loader("return np.zeros((n, 3)), np.arange(n) % 2"),
        stage("prepare"),
        "data.loader: 'team_data:load' returned a tuple, not a mapping",
        "return a dict with arrays x, y",
    ),
    case(
        "loader-list-not-array",
        user_loader("return {'x': np.zeros((n, 3)), 'y': list(range(n))}"),
        stage("prepare"),
        "data.loader: 'team_data:load' returned y as a list",
        "return a dict of NumPy arrays by output name, or NumPy arrays (np.asarray(y)",
    ),
    case(
        "loader-lengths-differ",
        user_loader("return {'x': np.zeros((n, 3)), 'y': np.arange(n + 1) % 2}"),
        stage("prepare"),
        "arrays differ in length",
        "one entry per sample",
    ),
    case(
        "loader-x-of-python-objects",
        user_loader("return {'x': np.array([{}] * n), 'y': np.arange(n) % 2}"),
        stage("prepare"),
        "array x holds Python objects (dtype object)",
        "np.asarray(x, dtype=str)",
    ),
    case(
        "loader-float-labels-for-classification",
        user_loader("return {'x': np.zeros((n, 3)), 'y': np.linspace(0, 1, n)}"),
        stage("prepare"),
        "array y must be integer class labels (one per sample, shape (n_samples,), or one per pixel or step), got float64",
        "set data.task: regression",
    ),
    case(
        "loader-string-targets-for-regression",
        user_loader("return {'x': np.zeros((n, 3)), 'y': np.array(['a'] * n)}", task="regression"),
        stage("prepare"),
        "array y must hold numeric targets for data.task regression",
        "y.astype('float32')",
    ),
    case(
        "loader-2d-groups",
        user_loader("return {'x': np.zeros((n, 3)), 'y': np.arange(n) % 2, 'groups': np.zeros((n, 2))}"),
        stage("prepare"),
        "array groups must be 1-D integers or strings",
        "one group id per sample",
    ),
    case(
        "loader-kwargs-do-not-fit",
        user_loader("return {'x': np.zeros((n, 3)), 'y': np.arange(n) % 2}", kwargs={"size": 3}),
        stage("prepare"),
        "data.loader: 'team_data:load' cannot be called with data.kwargs",
        "make data.kwargs match",
    ),
    case(
        "loader-not-a-stage-dep",
        user_loader("return {'x': np.zeros((n, 3)), 'y': np.arange(n) % 2}", dep=False),
        stage("prepare"),
        "data.loader: team_data.py is not a dependency of stage prepare",
        "add `- team_data.py` under deps of stage prepare",
    ),
    case(
        "loader-raises-value-error",
        user_loader("raise ValueError('column age: could not convert string to float')"),
        stage("prepare"),
        "data.loader: 'team_data:load' raised ValueError: column age: could not convert string to float",
        "fix the loader (team_data.py) or data.kwargs in params.yaml",
    ),
    case(
        "loader-raises-runtime-error-dvc-repro",
        user_loader("raise RuntimeError('the data server said 503')"),
        repro("prepare"),
        "data.loader: 'team_data:load' raised RuntimeError: the data server said 503",
        "fix the loader (team_data.py)",
    ),
    case(
        "loader-calls-sys-exit-0",
        user_loader("import sys; sys.exit(0)"),
        stage("prepare"),
        "data.loader: 'team_data:load' called sys.exit(0) instead of returning its arrays",
        "or to raise an exception saying why",
    ),
    case(
        "loader-calls-os-exit-0",
        user_loader("import os; os._exit(0)"),
        stage("prepare"),
        "data.loader: 'team_data:load' called os._exit(0) to end the process instead of returning its arrays",
        "fix the loader (team_data.py) to return a dict of arrays x, y",
    ),
    case(
        "yaml-bomb-in-data-kwargs",
        params_text(YAML_BOMB),
        stage("prepare"),
        "params.yaml: data.kwargs.l",
        "expands to more than 10000 values once its YAML aliases (*name) are followed",
    ),
    case(
        "param-longer-than-mlflow-takes",
        params(data={"source": None, "loader": "team_data:load", "kwargs": {"blob": "x" * 7000}}),
        stage("prepare"),
        "params.yaml: data.kwargs.blob: holds 7000 characters as an MLflow param, more than MLflow's 6000",
        "pass large values through a file",
    ),
    case(
        "experiment-name-with-newline",
        params(mlflow={"experiment": "digits\nlr-up"}),
        stage("train"),
        "mlflow.experiment: an MLflow experiment name must be printable, got 'digits\\nlr-up'",
        "fix it in params.yaml",
    ),
    case(
        "experiment-name-with-nul",
        params_text('mlflow:\n  experiment: "digits\\0"\n'),
        stage("train"),
        "mlflow.experiment: an MLflow experiment name must be printable, got 'digits\\x00'",
    ),
    case(
        "experiment-name-over-500-characters",
        params(mlflow={"experiment": "e" * 501}),
        stage("train"),
        "mlflow.experiment: string should have at most 500 characters, got 'eeee",
        "(503 characters); fix it in params.yaml",
    ),
    case(
        "regression-source-with-classification",
        params(data={"source": "sklearn:diabetes"}),
        stage("prepare"),
        "data.task: 'sklearn:diabetes' is a regression set",
        "set data.task: regression",
    ),
    case(
        "classification-source-with-regression",
        params(data={"source": "sklearn:breast_cancer", "task": "regression"}),
        stage("prepare"),
        "data.task: 'sklearn:breast_cancer' is a classification set",
        "set data.task: classification",
    ),
    case(
        "store-a-link-loop",
        made("mlflow.db", looping_link),
        stage("train"),
        "mlflow.db is a symbolic link that loops",
        "move it aside",
    ),
    case(
        "artifacts-a-file",
        made("mlartifacts", lambda path: path.write_text("")),
        stage("train"),
        "mlartifacts, where the MLflow store mlflow.db keeps its runs' files, is a regular file, not a folder",
        "move it aside",
    ),
    case(
        "artifacts-a-link-to-dev-null",
        made("mlartifacts", lambda path: path.symlink_to("/dev/null")),
        stage("train"),
        "mlartifacts, where the MLflow store mlflow.db keeps its runs' files, is a character device, not a folder",
    ),
    case(
        "compare-calibration-npz-truncated",
        compare_inputs_with("outputs/calibration.npz", halved),
        stage("compare"),
        "outputs/calibration.npz cannot be read, it is damaged or cut short",
        "`dvc repro --force --single-item calibrate`",
    ),
    case(
        "compare-eval-json-garbage",
        compare_inputs_with("metrics/eval.json", lambda _: b"{'test_loss': 0.3,"),
        stage("compare"),
        "metrics/eval.json cannot be read, it is damaged or cut short",
        "`dvc repro --force --single-item evaluate`",
    ),
    case(
        "compare-predictions-npy-truncated",
        compare_inputs_with("outputs/predictions.npy", halved),
        stage("compare"),
        "outputs/predictions.npy cannot be read, it is damaged or cut short",
        "`dvc repro --force --single-item evaluate`",
    ),
    case(
        "compare-metric-not-logged",
        compare_inputs(metrics={"test_accuracy": "max", "test_auc": "max"}),
        stage("compare"),
        "compare.metrics.test_auc: the evaluate stage does not log it",
        "test_accuracy, test_accuracy_class_0, test_loss",
    ),
    case(
        "loss-not-a-stage-dep",
        user_loss,
        stage("train"),
        "train.loss: models/losses.py is not a dependency of stages train, calibrate and compare",
        "add `- models/losses.py` under deps of stages train, calibrate and compare in dvc.yaml",
    ),
    case(
        "builder-unknown-kwarg",
        params(model={"kwargs": {"filters": [4, 4, 4], "widht": 3}}),
        stage("train"),
        "model.kwargs: builder 'pipelines.models:small_cnn' has no parameter 'widht'",
        "its parameters: input_shape, n_outputs, task, filters, dense_units",
        "fix model.kwargs in params.yaml",
    ),
    case(
        "builder-returns-no-model",
        builder_returning("{'logits': hidden}"),
        stage("train"),
        "model.builder: 'models.net:build' returned dict, not a keras.Model",
        "return keras.Model(inputs, outputs)",
    ),
    case(
        "builder-output-does-not-fit-task",
        builder_returning("keras.Model(inputs, keras.layers.Dense(3)(hidden))"),
        stage("train"),
        "model.builder: 'models.net:build' returned a model whose output shape is (3,)",
        "data.task classification with 10 output(s) needs (10,)",
        "change the last layer",
    ),
    case(
        "builder-calls-os-exit-0",
        user_builder("def build(input_shape, n_outputs):\n    import os\n\n    os._exit(0)\n"),
        stage("train"),
        "model.builder: 'models.net:build' called os._exit(0) to end the process instead of returning a model",
        "raise an exception saying why it cannot",
    ),
    # the last bad inputs of issue 35
    case(
        "params-not-utf8",
        params_text("train:\n  epochs: 2\n# caf\udce9\n"),
        stage("train"),
        "params.yaml: not UTF-8 text: byte 0xe9 at line",
        "save the file as UTF-8",
    ),
    case(
        "params-nested-5000-deep",
        params_text("model:\n  kwargs:\n    deep: " + "[" * 5000 + "]" * 5000 + "\n"),
        stage("train"),
        "params.yaml: a value is nested deeper than 32 levels",
        "flatten it",
    ),
    case("rerun-empty-run", unchanged, tracking("rerun", ""), "run '': not a run id", "name the run"),
    case(
        "data-without-features",
        npz(x=np.zeros((60, 0), "float32"), y=np.arange(60) % 4),
        stage("prepare"),
        "array x must hold at least one sample of features, got shape (60, 0)",
    ),
    case(
        "data-of-one-class",
        with_y(np.zeros(60, "int64")),
        stage("prepare"),
        "array y holds one class only (label 0 in every one of 60 samples)",
        "set data.task: regression",
    ),
    case(
        "five-samples-for-four-classes",
        npz(x=good_arrays(5)["x"], y=np.arange(5) % 4),
        stage("prepare"),
        "data: 5 samples are too few for 4 classes",
        "use more samples per class",
    ),
    case(
        "npz-of-pickled-objects",
        npz(x=np.array([{"a": 1}] * 60, dtype=object), y=np.arange(60) % 4),
        stage("prepare"),
        "array x holds Python objects (object), which np.savez stores pickled",
        "save numeric arrays",
    ),
    case(
        "run-file-not-json",
        trained_outputs('{"run_id": '),
        stage("evaluate"),
        "outputs/run.json is damaged (not JSON",
        "write it again with `dvc repro --force --single-item train`",
    ),
    case(
        "run-file-without-hashes",
        trained_outputs("[1]"),
        stage("evaluate"),
        "outputs/run.json is damaged (not the training's hashes",
    ),
    case(
        "manifest-not-an-object",
        written("data/prepared/manifest.json", "[1, 2]\n"),
        stage("train"),
        "manifest.json is not a data manifest: a JSON list, not an object",
        "dvc repro -f prepare",
    ),
    case(
        "learning-rate-nan",
        params(train={"learning_rate": float("nan")}),
        stage("train"),
        "params.yaml: train.learning_rate: expected a finite number, got nan",
    ),
    case(
        "learning-rate-infinite",
        params(train={"learning_rate": float("inf")}),
        stage("train"),
        "train.learning_rate: expected a finite number, got inf",
    ),
    case(
        "unknown-loss",
        params(train={"loss": "mean_squared_eror"}),
        stage("train"),
        "train.loss: unknown Keras loss 'mean_squared_eror'",
        "did you mean 'mean_squared_error'? list them with",
        "or name your own as 'module:function'",
    ),
]


def model_case(name: str, sections: dict, *expected: str):
    """A params.yaml mistake in the model or its compilation, for the in-process check below."""
    return pytest.param(sections, expected, id=name)


# Mistakes `prepare_model` names, checked in-process: each costs a TensorFlow start as a stage process, and the
# way such an error leaves the stage (exit 2, one line, nothing written, no run) is the table's builder-unknown-kwarg
# and unknown-loss rows, which fail in the same call at build and at compile time.
MODEL_CASES = [
    model_case(
        "filters-wrong-type",
        {"model": {"kwargs": {"filters": 4}}},
        "model.kwargs: builder 'pipelines.models:small_cnn' raised ValueError",
        "filters: expected a list of 3 positive integers, got 4",
        "fix model.kwargs in params.yaml",
    ),
    model_case(
        "filters-wrong-length",
        {"model": {"kwargs": {"filters": [4, 4]}}},
        "filters: expected a list of 3 positive integers, got [4, 4]",
        "fix model.kwargs in params.yaml",
    ),
    model_case(
        "unknown-metric",
        {"train": {"metrics": ["accuracy", "aucc"]}},
        "train.metrics: unknown Keras metric 'aucc'",
        "did you mean 'AUC'? list them with",
    ),
    model_case(
        "threshold-metric-on-softmax",
        {"train": {"metrics": ["accuracy", "auc"]}},
        "train.metrics: 'auc' reads one probability per sample",
        "Dense(1, activation='sigmoid')",
    ),
    model_case(
        "unknown-optimizer",
        {"train": {"optimizer": "adamm"}},
        "train.optimizer: unknown Keras optimizer 'adamm'",
        "did you mean 'adam'? list them with",
    ),
    model_case(
        "optimizer-kwargs-rejected",
        {"train": {"optimizer": "sgd", "optimizer_kwargs": {"momentumm": 0.9}}},
        "train.optimizer_kwargs: optimizer 'sgd' rejects them",
        "{'momentumm': 0.9}",
        "fix train.optimizer_kwargs in params.yaml",
    ),
]


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The project every case copies: prepared data committed through DVC, and a store with an empty experiment.

    Built once for all xdist workers (they share the run's temporary folder), under a file lock.
    """
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    root, ready = shared / "bad-inputs" / "project", shared / "bad-inputs.ready"
    with FileLock(str(shared / "bad-inputs.lock")):
        if not ready.exists():
            shutil.rmtree(root.parent, ignore_errors=True)
            root.parent.mkdir()
            make_project(root)
            run(["dvc", "repro", "prepare"], root)
            run(["git", "add", "-A"], root)
            run(["git", "commit", "-qm", "prepared"], root)
            client_for(root).create_experiment(EMPTY_EXPERIMENT)
            ready.touch()
    return root


@pytest.mark.parametrize(("sections", "expected"), MODEL_CASES)
def test_model_mistake_is_one_line_naming_the_key(sections: dict, expected: tuple[str, ...]):
    import numpy as np

    from tracking.config.params import Params
    from tracking.determinism.seeds import resolve_seeds
    from tracking.errors import TrackingError
    from tracking.training.model import BuildInputs, prepare_model

    values = {**TINY, **{name: {**TINY.get(name, {}), **section} for name, section in sections.items()}}
    params = Params.model_validate(values)
    with pytest.raises(TrackingError) as raised:
        train = {"x": np.zeros((8, 8, 8, 1), "float32"), "y": np.arange(8)}
        prepare_model(params, resolve_seeds(params.seeds), BuildInputs(train, 10, None, Path(".")))
    message = str(raised.value)
    assert "\n" not in message and all(text in message for text in expected), message


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("", "run '': not a run id"),
        ("  ", "run '  ': not a run id"),
        ("HEAD\nx", "run 'HEAD\\nx': not a run id"),
        ("a" * 100_000, f"run '{'a' * 40}'... (100000 characters): not a run id"),
        ("a" * 256, f"run '{'a' * 40}'... (256 characters): not a run id"),
    ],
    ids=["empty", "blank", "newline", "100000-characters", "256-characters"],
)
def test_a_run_reference_nobody_could_mean_is_refused_before_any_lookup(ref: str, expected: str):
    """In-process (`tracking rerun ''` runs the command once, above): refused before the store or git is asked."""
    from tracking.errors import RunNotFound
    from tracking.inspect.diff.runs import load_run

    with pytest.raises(RunNotFound) as raised:
        load_run(None, ref, Path("/nonexistent"))
    assert str(raised.value).startswith(expected) and "name the run" in str(raised.value), str(raised.value)


@pytest.mark.parametrize(
    ("body", "expected", "fix"),
    [
        ("raise RuntimeError('no GPU for this net')", "raised RuntimeError: no GPU for this net", "fix the builder"),
        ("import sys; sys.exit(0)", "called sys.exit(0) instead of returning a model", "raise an exception saying why"),
        ("raise KeyError('width')", "raised KeyError: 'width'", "fix the builder"),
    ],
    ids=["raises", "exits-0", "key-error"],
)
def test_a_builder_that_raises_or_exits_is_one_line_naming_it(body: str, expected: str, fix: str):
    """In-process, as the train stage, every calibration repeat and the audit call it (`call_builder`)."""
    from tracking.errors import UserCodeError
    from tracking.training.building import call_builder

    namespace: dict = {}
    exec(f"def build(input_shape, n_outputs):\n    {body}\n", namespace)
    with pytest.raises(UserCodeError) as raised:
        call_builder(namespace["build"], "models.net:build", (8, 8, 1), 10, {}, {})
    message = str(raised.value)
    assert message.startswith(f"model.builder: 'models.net:build' {expected}") and fix in message, message


TEAM_CALL_CHECKS = """
import multiprocessing, os, threading
from tracking.config.user_code import team_call
from tracking.errors import UserCodeError

real = os._exit
def refused(function):
    try:
        with team_call("data.loader: 'team:load'", "returning its arrays", fix="fix it"):
            function()
    except UserCodeError as err:
        return str(err)
def swallowing():
    try:
        os._exit(3)
    except Exception:
        pass
print(refused(lambda: os._exit(3)))
print(refused(swallowing))
try:
    refused(lambda: 1 / 0)
except ZeroDivisionError:
    print("other errors pass; restored:", os._exit is real)
with team_call("data.loader: 'team:load'", "returning its arrays", fix="fix it"):
    child = multiprocessing.get_context("fork").Process(target=lambda: None)
    child.start()
    child.join()
    print("fork child exited", child.exitcode, "via", os._exit is not real)
    thread = threading.Thread(target=lambda: os._exit(5))
    thread.start()
    thread.join()
print("not reached: another thread's os._exit(5) ends the process")
"""


def test_team_code_cannot_exit_the_process_from_its_own_thread_and_only_from_it():
    """`team_call` (around a loader and a builder): `os._exit` raises while the team's function runs, even past the
    team's `except Exception`, is restored after (an exception included), and leaves a forked multiprocessing
    worker's own exit and another thread's exit alone. In a process of its own: a broken guard would end pytest."""
    done = subprocess.run([sys.executable, "-c", TEAM_CALL_CHECKS], capture_output=True, text=True, timeout=60)
    line = "data.loader: 'team:load' called os._exit(3) to end the process instead of returning its arrays; fix it"
    assert done.stdout.splitlines() == [
        line,
        line,
        "other errors pass; restored: True",
        "fork child exited 0 via True",
    ], done.stdout + done.stderr
    assert done.returncode == 5, done.stderr


def test_a_store_of_0_bytes_is_refused_by_commands_that_read_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from tracking.errors import TrackingServerError
    from tracking.store.location import open_client

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / ".dvc").mkdir()
    (tmp_path / "mlflow.db").write_bytes(b"")
    with pytest.raises(TrackingServerError) as raised:
        open_client(tmp_path)
    assert str(raised.value) == (
        f"the MLflow store {tmp_path / 'mlflow.db'} is empty (0 bytes): it holds no runs (a copy or a full disk cut "
        "it short?); restore it from a backup, or remove it and run the pipeline to start a new store"
    )
    assert (tmp_path / "mlflow.db").stat().st_size == 0, "not made a new store as a side effect"


def test_a_model_file_keras_cannot_load_is_one_line_naming_it(tmp_path: Path):
    from tracking.config.params import Params
    from tracking.errors import RunStateError
    from tracking.training.model import load_trained_model

    params = Params.model_validate(TINY)
    for content in (b"", b"not a zip", b"PK\x03\x04" + bytes(64)):
        (tmp_path / "model.keras").write_bytes(content)
        with pytest.raises(RunStateError, match=r"model\.keras cannot be loaded as a Keras model") as raised:
            load_trained_model(tmp_path / "model.keras", params, tmp_path)
        assert "dvc repro --force --single-item train" in str(raised.value) and "\n" not in str(raised.value)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file a stage could write (not git's, DVC's tmp/ or the MLflow store)."""
    found = {}
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if (
            path.is_file()
            and parts[0] != ".git"
            and parts[:2] != (".dvc", "tmp")
            and "__pycache__" not in parts
            and not path.name.startswith("mlflow.db")
        ):
            found["/".join(parts)] = (path.stat().st_size, path.stat().st_mtime_ns)
    return found


@pytest.mark.parametrize(("setup", "command", "expected"), CASES)
def test_bad_input_is_one_line_and_exit_2(
    template: Path, tmp_path: Path, setup: Setup, command: list[str], expected: tuple[str, ...]
):
    root = tmp_path / "project"
    shutil.copytree(template, root, symlinks=True)
    env = project_env(**(setup(root) or {}))
    before = snapshot(root)
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    if command[0].endswith("dvc"):
        assert done.returncode != 0, output
    else:
        assert done.returncode == 2, output
    assert "Traceback" not in output, output
    assert len(errors) == 1, output
    assert all(text.replace("{root}", str(root)) in errors[0] for text in expected), errors[0]
    after = snapshot(root)
    if command[0].endswith("dvc"):
        # DVC itself removes a stage's previous outputs before running it (`dvc checkout` restores them).
        assert after.items() <= before.items(), set(after.items()) - set(before.items())
    else:
        assert after == before
    if (root / "mlflow.db").is_symlink():  # the case made the store a link that loops: nothing could open it
        return
    client = client_for(root)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.status for r in runs] == [], "each case fails before a run is opened, so none is left RUNNING"


def outside_the_project(root: Path) -> None:
    """A good .npz beside the project, named by its absolute path: DVC tracks nothing outside the project."""
    np.savez(root.parent / "elsewhere.npz", **good_arrays())
    write_params(root, data={"source": str(root.parent / "elsewhere.npz")})


def compressed_thousandfold(root: Path) -> None:
    """A .npz of 16.5 MiB of zeros saved compressed to 18 KiB: a zip bomb's shape, at a size a test can afford."""
    n = 65536
    np.savez_compressed(root / "data/raw/mine.npz", x=np.zeros((n, 8, 8), "float32"), y=np.arange(n) % 4)
    write_params(root, data={"source": "data/raw/mine.npz"})


WARNED = [
    pytest.param(
        outside_the_project,
        "elsewhere.npz' is outside the project, so DVC neither re-runs prepare when it changes nor restores it",
        id="npz-outside-the-project",
    ),
    pytest.param(
        compressed_thousandfold,
        "'data/raw/mine.npz' expands from 17.6 KiB to 16.5 MiB (960 times) when decompressed",
        id="npz-zip-bomb-shaped",
    ),
]


@pytest.mark.parametrize(("setup", "expected"), WARNED)
def test_accepted_with_one_warning_line(template: Path, tmp_path: Path, setup: Setup, expected: str):
    """Inputs that work but deserve a look: prepared, with one `warning:` line saying why (docs/guarantees.md)."""
    root = tmp_path / "project"
    shutil.copytree(template, root, symlinks=True)
    setup(root)
    done = subprocess.run(stage("prepare"), cwd=root, env=project_env(), capture_output=True, text=True, timeout=300)
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert done.returncode == 0, done.stderr
    assert len(warnings) == 1 and expected in warnings[0], done.stderr


@needs_namespaces
@pytest.mark.slow
@pytest.mark.parametrize(
    ("mount", "env"),
    [
        pytest.param("full", {"MLFLOW_TRACKING_URI": "sqlite:///{root}/full/mlflow.db"}, id="store-disk-full"),
        pytest.param("mlartifacts", {}, id="artifacts-disk-full"),
    ],
)
def test_a_full_disk_fails_the_train_stage_in_one_line_and_no_run_reads_finished(
    template: Path, tmp_path: Path, mount: str, env: dict[str, str]
):
    """A small tmpfs under the SQLite store (1.3 MB: the store is created, then fills while the run logs) or
    under mlartifacts/: one `error:` line saying the disk is full, exit 2, the run FAILED (never FINISHED
    with its data missing, never journaled as if the server were lost), no outputs left for DVC."""
    root = tmp_path / "project"
    shutil.copytree(template, root, symlinks=True)
    (root / mount).mkdir()
    script = (
        f"mount -t tmpfs -o size={'1300k' if mount == 'full' else '64k'} tmpfs {mount} && "
        f"{sys.executable} -m pipelines.train; status=$?; cp -r {mount} kept; exit $status"
    )
    extra = {key: value.replace("{root}", str(root)) for key, value in env.items()}
    extra[TRACKING_FREE_SPACE_MB] = "0"  # past the check before training (tests/test_disk_space.py): it fills mid-run
    done = subprocess.run(
        namespaced(script, ["true"]), cwd=root, env=project_env(**extra), capture_output=True, text=True, timeout=300
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(errors) == 1 and "no space left on the disk holding" in errors[0], done.stderr
    assert "so it is not FINISHED; free space there" in errors[0]
    store = f"sqlite:///{root / 'kept/mlflow.db' if mount == 'full' else root / 'mlflow.db'}"
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [run.info.status for run in runs] in (["FAILED"], ["RUNNING"])
    if runs[0].info.status == "RUNNING":  # the full disk took the end of the run as well: the stage said so
        assert "could not be ended FAILED" in done.stderr and "`tracking doctor` marks it FAILED" in done.stderr
        run([sys.executable, "-m", "tracking", "doctor"], root, env=project_env(MLFLOW_TRACKING_URI=store))
        assert client.get_run(runs[0].info.run_id).info.status == "FAILED"
    assert not (root / ".tracking/offline").exists() and not (root / "outputs/run.json").exists()


# The train stage in a bind mount of the project, made read-only (`remount,bind,ro`: EROFS, as a file system
# remounted read-only on an error gives) at its first training step, the stage stopped meanwhile; 97: no remount.
READ_ONLY_MID_RUN = """mount --bind "$PWD" "$PWD" && cd "$PWD" || exit 97
"$@" 2> "$LOG" & stage=$!
until grep -q "^train: started in" "$LOG" || ! kill -0 $stage 2> /dev/null; do sleep 0.01; done
kill -STOP $stage; mount -o remount,bind,ro "$PWD"; mounted=$?; kill -CONT $stage
wait $stage; status=$?; [ $mounted = 0 ] || exit 97; exit $status"""


@needs_namespaces
def test_a_project_made_read_only_while_training_fails_in_one_line_and_leaves_no_run_running(
    template: Path, tmp_path: Path
):
    """Made read-only after its run opened and before it writes its outputs, the train stage names the file it
    could not write and the fix in one `error:` line, exit 2; its run ends FAILED in the store (outside the
    project, as a server or a shared store is); no output is written."""
    from mlflow.tracking import MlflowClient

    root = tmp_path / "project"
    shutil.copytree(template, root, symlinks=True)
    write_params(root, train={"epochs": 3})
    for folder in ("outputs", "metrics", "plots/train", "reports"):  # as a project that trained before keeps them
        (root / folder).mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    before = snapshot(root)
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", READ_ONLY_MID_RUN, "sh", *stage("train")],
        cwd=root,
        env=project_env(MLFLOW_TRACKING_URI=store, LOG=str(tmp_path / "stage.log")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = (tmp_path / "stage.log").read_text()
    assert done.returncode == 2, (done.returncode, output, done.stderr)
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in output and len(errors) == 1, output
    assert errors[0] == (
        f"error: {root}/outputs/model.keras cannot be opened or written (Read-only file system); make it and its "
        "folder writable again (remount a read-only file system read-write; `chmod u+rw` or `chattr -i` them), then "
        "re-run"
    )
    client = MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [run.info.status for run in runs] == ["FAILED"]
    # Only the copies of the artifacts logged before (kept to journal them, were the server lost) stay: the
    # read-only project keeps the run's end from removing them (docs/guarantees.md).
    spooled = f".tracking/spool/{runs[0].info.run_id}/"
    after = snapshot(root)
    assert {path: stat for path, stat in after.items() if not path.startswith(spooled)} == before


@pytest.mark.slow
def test_a_training_gone_from_the_store_is_named_with_the_dvc_repro_that_makes_it_again(
    calibrated: Path, tmp_path: Path
):
    """A deleted run, then a deleted mlflow.db: DVC still takes train as up to date, so `tracking doctor`, the
    compare and evaluate stages and `tracking diff` name the training outputs/run.json records and the `dvc repro`
    that trains it again, which leaves a run with the test scores and the verdict (forcing train alone would not:
    the same weights write the same outputs/run.json, so DVC takes evaluate and compare as up to date)."""
    import json

    from conftest import assert_user_error

    root = tmp_path / "project"
    shutil.copytree(calibrated, root, symlinks=True)
    run(["dvc", "repro", "compare"], root)
    train_run = train_run_id(root)
    weights = json.loads((root / "outputs/run.json").read_text())["weights_sha256"]
    client_for(root).delete_run(train_run)
    gone = f"outputs/run.json records a training (weights {weights[:12]}...) that no run in"
    fix = "re-create it with `dvc repro --force --downstream train`"
    doctor = run([sys.executable, "-m", "tracking", "doctor"], root).stdout
    assert f"the run behind the project's outputs is gone from the store; {fix}:" in doctor, doctor
    assert f"  {gone} sqlite:///" in doctor, doctor
    for store in root.glob("mlflow.db*"):
        store.unlink()
    assert {"train", "evaluate", "calibrate", "compare"}.isdisjoint(
        json.loads(run(["dvc", "status", "--json"], root).stdout)
    )
    doctor = run([sys.executable, "-m", "tracking", "doctor", "--dry-run"], root).stdout
    assert doctor.startswith(f"sqlite:///{root / 'mlflow.db'}: no store yet, so no run left RUNNING to repair\n")
    assert f"  {gone} sqlite:///" in doctor and fix in doctor, doctor
    assert_user_error(run(stage("compare"), root, check=False), gone, fix)
    assert_user_error(run(tracking("diff", train_run, train_run), root, check=False), gone, fix)
    # evaluate, which DVC runs again after an edit of its code, resumes the training's run
    assert_user_error(run(stage("evaluate"), root, check=False), gone, fix)

    again = run(fix.split("`")[1].split(), root).stdout
    assert "gone from the store" not in run([sys.executable, "-m", "tracking", "doctor"], root).stdout
    trained = re.search(r"^trained .*; MLflow run (\w+)$", again, re.M)
    assert trained and f"; MLflow run {trained[1]}" in again.split("Running stage 'evaluate'")[1], again
    assert "Running stage 'compare'" in again and "judged against algo" in again, again


def test_a_request_the_store_refuses_is_not_a_store_that_cannot_be_reached(root: Path):
    """A library caller's experiment name MLflow refuses (params.yaml refuses it first): said as the store's refusal
    with MLflow's reason, where it read "cannot be reached; start the server"."""
    from tracking.errors import TrackingServerError
    from tracking.store.location import connect

    with pytest.raises(TrackingServerError) as raised:
        connect(root, "e" * 501)
    message = str(raised.value)
    assert "refused the request (INVALID_PARAMETER_VALUE:" in message and "cannot be reached" not in message, message


def test_a_model_failing_on_its_first_batch_is_named_without_the_batchs_values_or_colour_codes():
    """Keras's message for an error in a layer's call is bold (ANSI codes) and ends with the arguments it got: the
    batch, whose raw training values must not reach the error line."""
    import keras

    from tracking.training.preflight import _text

    class Refusing(keras.layers.Layer):
        def call(self, x):
            raise ValueError("cannot use these")

    with pytest.raises(ValueError) as raised:
        Refusing()(np.array([[0.123456, 7.654321]] * 2, dtype="float32"))
    assert "\x1b[" in str(raised.value) and "Arguments received by" in str(raised.value), "what Keras says"
    assert _text(raised.value) == "Exception encountered when calling Refusing.call(). cannot use these"


# Each bounded value of params.yaml with its bounds, as docs/configuration.md gives them: (key, type, low, high),
# None where a side is open; ">" and "<" mark a bound the value must not equal.
BOUNDED = [
    ("train.epochs", int, 1, 10_000),
    ("train.batch_size", int, 1, 1_000_000),
    ("train.learning_rate", float, ">0", 10),
    ("data.test_fraction", float, ">0", "<1"),
    ("data.val_fraction", float, 0, "<1"),
    ("determinism.intra_op_threads", int, 0, 1024),
    ("determinism.inter_op_threads", int, 0, 1024),
    ("calibration.repeats", int, 3, 1000),
    ("compare.alpha", float, ">0", "<1"),
    ("compare.candidate_repeats", int, 1, 100),
    ("audit.repeats", int, 2, 100),
    ("audit.steps", int, 1, 100_000),
    ("compute.workers", int, 1, 10_000),
    ("compute.cpus_per_run", float, ">0", 1024),
    ("compute.gpus_per_run", float, 0, 64),
    ("compute.max_retries", int, 0, 100),
]
SWITCHES = ["determinism.op_determinism", "determinism.onednn", "calibration.simulate_impl_noise",
            "compare.fail_on_drift", "compute.system_metrics"]  # fmt: skip


def bad_values() -> list:
    """Each bounded value just past each bound, of the wrong type, NaN and infinite; each switch not a boolean."""
    rows = []
    for key, kind, low, high in BOUNDED:
        number = "a valid integer" if kind is int else "a finite number"
        if isinstance(low, str):
            rows.append((key, 0, "expected greater than 0, got 0"))
        else:
            rows.append((key, low - 1, f"expected greater than or equal to {low}, got {low - 1}"))
        if isinstance(high, str):
            rows.append((key, 1, "expected less than 1, got 1"))
        else:
            rows.append((key, high + 1, f"expected less than or equal to {high}, got {high + 1}"))
        rows.append((key, "two", f"expected {'a valid integer' if kind is int else 'a valid number'}, got 'two'"))
        rows.append((key, [1], f"expected {'a valid integer' if kind is int else 'a valid number'}, got [1]"))
        rows.append((key, float("nan"), f"expected {number}, got nan"))
        rows.append((key, float("inf"), f"expected {number}, got inf"))
        if kind is int:
            rows.append((key, 2.5, "expected a valid integer, got 2.5"))
    rows += [(key, "yes", "expected a valid boolean, got 'yes'") for key in SWITCHES]
    rows += [(key, 1, "expected a valid boolean, got 1") for key in SWITCHES]
    return [pytest.param(key, value, expected, id=f"{key}={value!r}") for key, value, expected in rows]


@pytest.mark.parametrize(("key", "value", "expected"), bad_values())
def test_a_value_out_of_bounds_or_of_the_wrong_type_is_one_line_naming_the_key(
    tmp_path: Path, key: str, value: object, expected: str
):
    """In-process, as every stage loads params.yaml first: nothing else runs before this line."""
    from tracking.config.params_file import load_params
    from tracking.errors import ParamsError

    section, name = key.split(".")
    with open(tmp_path / "params.yaml", "w", encoding="utf-8") as handle:
        yaml_editor().dump({section: {name: value}}, handle)
    with pytest.raises(ParamsError) as raised:
        load_params(tmp_path / "params.yaml")
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / 'params.yaml'}: {key}: {expected}"), message
    assert "\n" not in message and message.endswith(f"fix it in {tmp_path / 'params.yaml'}")


def test_a_team_module_missing_from_one_model_stage_is_named_by_the_first_stage_to_run(tmp_path: Path):
    """train and calibrate list models/net.py, compare does not: the train stage refuses at once, naming compare,
    instead of compare refusing on the team's first experiment (it trains only once a change calls for candidate
    runs); a stage the dvc.yaml does not declare has no rule."""
    from tracking.config.user_code import require_path_dep
    from tracking.errors import UserCodeError

    stages = {stage: {"cmd": "true", "deps": ["models/net.py"] if stage != "compare" else []} for stage in MODEL_STAGES}
    (tmp_path / "dvc.yaml").write_text(json.dumps({"stages": stages}))
    with pytest.raises(UserCodeError) as refused:
        require_path_dep(PurePosixPath("models/net.py"), "model.builder", MODEL_STAGES, tmp_path)
    assert str(refused.value) == (
        "model.builder: models/net.py is not a dependency of stage compare, so DVC would not re-run it when it "
        "changes; add `- models/net.py` under deps of stage compare in dvc.yaml"
    )
    del stages["compare"]
    (tmp_path / "dvc.yaml").write_text(json.dumps({"stages": stages}))
    require_path_dep(PurePosixPath("models/net.py"), "model.builder", MODEL_STAGES, tmp_path)


def test_judge_of_a_pipeline_run_advises_the_pipelines_stages(tmp_path: Path):
    """`tracking judge <pipeline run>` advised `tracking calibrate`, the command for a team's script."""
    from tracking.errors import NoiseError
    from tracking.script.calibration import judge_script

    client = client_for(tmp_path)
    run_id = client.create_run(client.create_experiment("test"), tags={"pipeline.stage": "train"}).info.run_id
    with pytest.raises(NoiseError) as raised:
        judge_script(client, tmp_path, run_id, None, 0.05, None)
    assert "made by the DVC pipeline" in str(raised.value) and "`dvc repro compare`" in str(raised.value)
    assert "`tracking calibrate`" not in str(raised.value)
