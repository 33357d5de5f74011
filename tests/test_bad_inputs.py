"""Every input a user can get wrong, in one table: one `error:` line with the fix, exit 2, nothing written.

Each case copies one prepared project (git + DVC, tiny params, `data/prepared` and an MLflow store with an
empty experiment), breaks it, runs one real command, and checks: exit status 2 (DVC's own non-zero status
for `dvc repro`), exactly one `error: ` line holding the expected text, no traceback, no file written or
changed, and no MLflow run left RUNNING. Most cases fail before TensorFlow is imported, which keeps them fast.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from conftest import BIN, client_for, make_project, project_env, run, write_params

Setup = Callable[[Path], dict[str, str] | None]
UNKNOWN_RUN_ID = "0123456789abcdef0123456789abcdef"
EMPTY_EXPERIMENT = "empty"
_NOT_OUTPUTS = {".git", "__pycache__", "tmp"}


def stage(name: str) -> list[str]:
    return [sys.executable, "-m", f"pipelines.{name}"]


def repro(name: str) -> list[str]:
    return [str(BIN / "dvc"), "repro", name]


def tracking(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracking", *args]


def params_text(text: str) -> Setup:
    def setup(root: Path) -> None:
        (root / "params.yaml").write_text(text)
    return setup


def params(**sections: dict) -> Setup:
    def setup(root: Path) -> None:
        write_params(root, **sections)
    return setup


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


def trained_by(run_id: str) -> Setup:
    """Outputs of a train stage whose MLflow run is `run_id`."""
    def setup(root: Path) -> None:
        (root / "outputs").mkdir(exist_ok=True)
        (root / "outputs/run.json").write_text(f'{{"run_id": "{run_id}", "weights_sha256": ""}}\n')
        (root / "outputs/model.keras").write_bytes(b"not reached: the run id is checked first")
    return setup


def run_file_only(root: Path) -> None:
    (root / "outputs").mkdir(exist_ok=True)
    (root / "outputs/run.json").write_text(f'{{"run_id": "{UNKNOWN_RUN_ID}", "weights_sha256": ""}}\n')


def baseline_text(text: str) -> Setup:
    def setup(root: Path) -> None:
        (root / "baseline.yaml").write_text(text)
    return setup


CASES = [
    # params.yaml
    pytest.param(params_text("train:\n  epochs: [2\n"), stage("train"), ("params.yaml: YAML syntax error at line 3", "fix the YAML"), id="yaml-syntax-error"),
    pytest.param(params_text("- train\n- model\n"), stage("train"), ("params.yaml: expected a mapping of sections", "got list"), id="params-not-a-mapping"),
    pytest.param(remove("params.yaml"), stage("data"), ("params.yaml: file not found", "create it"), id="params-missing"),
    pytest.param(params(trian={"epochs": 2}), stage("train"), ("unknown key 'trian'", "did you mean 'train'?"), id="unknown-section"),
    pytest.param(params(train={"lerning_rate": 0.1}), stage("train"), ("unknown key 'train.lerning_rate'", "did you mean 'train.learning_rate'?"), id="misspelled-key"),
    pytest.param(params_text("train: 5\n"), stage("train"), ("params.yaml: train:", "got 5", "fix it in params.yaml"), id="section-not-a-mapping"),
    pytest.param(params(train={"epochs": "two"}), stage("train"), ("train.epochs: expected a valid integer, got 'two'",), id="epochs-wrong-type"),
    pytest.param(params(train={"epochs": 2.5}), stage("train"), ("train.epochs: expected a valid integer, got 2.5",), id="epochs-float"),
    pytest.param(params(model={"filters": 4}), stage("train"), ("model.filters: expected a valid list, got 4",), id="filters-wrong-type"),
    pytest.param(params(model={"filters": [4, 4]}), stage("train"), ("model.filters: expected a list with at least 3 items",), id="filters-wrong-length"),
    pytest.param(params(train={"epochs": 0}), repro("train"), ("train.epochs: expected greater than or equal to 1, got 0",), id="epochs-zero-dvc-repro"),
    pytest.param(params(train={"batch_size": -32}), stage("train"), ("train.batch_size: expected greater than or equal to 1, got -32",), id="batch-size-negative"),
    pytest.param(params(calibration={"repeats": 0}), stage("calibrate"), ("calibration.repeats: expected greater than or equal to 3, got 0",), id="repeats-zero"),
    pytest.param(params(model={"name": "resnet50"}), stage("train"), ("model.name: expected 'small_cnn' or 'mlp', got 'resnet50'",), id="unknown-model"),
    pytest.param(params(train={"optimizer": "adamw"}), stage("train"), ("train.optimizer: expected 'adam', 'sgd' or 'rmsprop', got 'adamw'",), id="unknown-optimizer"),
    pytest.param(params(data={"test_fraction": 1.5}), stage("data"), ("data.test_fraction: expected less than 1, got 1.5",), id="test-fraction-out-of-range"),
    pytest.param(params(data={"sha256": "abc123"}), stage("data"), ("data.sha256: expected 64 lowercase hex digits",), id="sha256-malformed"),
    pytest.param(remove("baseline.yaml"), stage("calibrate"), ("baseline.yaml: baseline not found", "tracking baseline"), id="baseline-missing"),
    pytest.param(baseline_text("train:\n  lerning_rate: 0.1\n"), stage("calibrate"), ("baseline.yaml: unknown key 'train.lerning_rate'",), id="baseline-misspelled-key"),
    # the data source
    pytest.param(params(data={"source": "data/missing.npz"}), stage("data"), ("data.source: file 'data/missing.npz' not found", "dvc pull"), id="data-file-missing"),
    pytest.param(params(data={"source": "data/missing.npz"}), repro("prepare"), ("data.source: file 'data/missing.npz' not found",), id="data-file-missing-dvc-repro"),
    pytest.param(truncated_npz, stage("data"), ("'data/mine.npz' is not a readable .npz file", "re-create or re-fetch it"), id="data-file-truncated"),
    pytest.param(npy_instead_of_npz, stage("data"), ("'data/mine.npy' is not a readable .npz file", "np.savez"), id="data-file-npy-not-npz"),
    pytest.param(params(data={"source": "sklearn:mnist"}), stage("data"), ("unknown built-in 'sklearn:mnist'",), id="data-unknown-builtin"),
    pytest.param(npz(x=good_arrays()["x"]), stage("data"), ("lacks array(s) y", "np.savez"), id="data-lacks-y"),
    pytest.param(npz(x=good_arrays()["x"], y=np.arange(59) % 4), stage("data"), ("arrays differ in length ({'x': 60, 'y': 59})",), id="data-length-mismatch"),
    pytest.param(npz(**good_arrays(), groups=np.zeros(61)), stage("data"), ("'groups': 61",), id="data-groups-length-mismatch"),
    pytest.param(with_y(np.array([0, 1, 2, -1] * 15)), stage("data"), ("array y has negative label -1",), id="labels-negative"),
    pytest.param(with_y((np.arange(60) % 4).astype("float64")), stage("data"), ("array y must be 1-D integer class labels, got float64",), id="labels-float"),
    pytest.param(with_y(np.arange(60) % 4 * 3), stage("data"), ("classes 1, 2, 4, 5, 7, 8 never appear", "np.unique(y, return_inverse=True)"), id="labels-with-gaps"),
    pytest.param(with_y((np.arange(60) % 4).reshape(60, 1)), stage("data"), ("array y must be 1-D integer class labels, got int64 with shape (60, 1)",), id="labels-2d"),
    pytest.param(with_x(nan_at_end), stage("data"), ("array x has NaN or infinite values",), id="x-nan"),
    pytest.param(with_x(inf_at_start), stage("data"), ("array x has NaN or infinite values",), id="x-inf"),
    pytest.param(with_x(lambda x: x.reshape(-1)[:60]), stage("data"), ("array x must hold at least one sample of features, got shape (60,)",), id="x-1d"),
    pytest.param(with_x(lambda x: np.full(x.shape, "a")), stage("data"), ("array x must be numeric, got <U1",), id="x-strings"),
    pytest.param(npz(x=good_arrays(20)["x"], y=np.arange(20) % 10), stage("data"), ("cannot split 20 samples",), id="data-too-few-samples"),
    pytest.param(params(data={"sha256": "0" * 64}), repro("prepare"), ("differs from data.sha256 " + "0" * 64, "tracking pin-data"), id="pin-mismatch-dvc-repro"),
    pytest.param(truncated_prepared, stage("train"), ("data/prepared/train_x.npy", "dvc repro -f prepare"), id="prepared-data-truncated"),
    pytest.param(remove("data/prepared"), stage("train"), ("run the prepare stage first",), id="prepared-data-missing"),
    # repository and store
    pytest.param(remove(".git"), stage("train"), ("is not inside a git repository", "git init"), id="not-a-git-repo"),
    pytest.param(remove(".dvc"), stage("data"), ("not inside a DVC project", "dvc init"), id="dvc-not-initialised"),
    pytest.param(environment(MLFLOW_TRACKING_URI="http://127.0.0.1:9"), stage("train"), ("MLflow tracking store http://127.0.0.1:9 cannot be reached", "MLFLOW_TRACKING_URI"), id="tracking-uri-unreachable"),
    pytest.param(lambda root: None, stage("evaluate"), ("outputs/run.json not found", "dvc repro train"), id="evaluate-before-train"),
    pytest.param(run_file_only, stage("evaluate"), ("outputs/model.keras not found", "dvc repro train"), id="evaluate-model-missing"),
    pytest.param(trained_by(UNKNOWN_RUN_ID), stage("evaluate"), (f"MLflow run {UNKNOWN_RUN_ID}", "dvc repro -f train"), id="evaluate-unknown-run-id"),
    pytest.param(lambda root: None, stage("compare"), ("not found; run the pipeline up to compare first",), id="compare-before-calibrate"),
    # the tracking command
    pytest.param(lambda root: None, tracking("bands", "--experiment", EMPTY_EXPERIMENT), (f"no runs in MLflow experiment '{EMPTY_EXPERIMENT}'",), id="bands-empty-experiment"),
    pytest.param(lambda root: None, tracking("bands", "--experiment", EMPTY_EXPERIMENT, "--filter", "accuracy > 0.9"), ("filter 'accuracy > 0.9' rejected by MLflow", "fix the filter string"), id="bands-filter-rejected"),
    pytest.param(lambda root: None, tracking("compare-groups", "--experiment", EMPTY_EXPERIMENT, "--a", "metrics.test_accuracy >", "--b", ""), ("rejected by MLflow", "fix the filter string"), id="compare-groups-filter-rejected"),
    pytest.param(lambda root: None, tracking("diff", UNKNOWN_RUN_ID, "lr-up"), (f"run '{UNKNOWN_RUN_ID}' not found", "list runs with"), id="diff-unknown-run-id"),
    pytest.param(remove("data/prepared"), tracking("pin-data"), ("run the prepare stage first",), id="pin-data-before-prepare"),
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


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file a stage could write (not git's, DVC's tmp/ or the MLflow store)."""
    return {str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in root.rglob("*")
            if path.is_file() and not _NOT_OUTPUTS & set(path.relative_to(root).parts) and not path.name.startswith("mlflow.db")}


@pytest.mark.parametrize(("setup", "command", "expected"), CASES)
def test_bad_input_is_one_line_and_exit_2(template: Path, tmp_path: Path, setup: Setup, command: list[str],
                                          expected: tuple[str, ...]):
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
    assert all(text in errors[0] for text in expected), errors[0]
    after = snapshot(root)
    if command[0].endswith("dvc"):
        # DVC itself removes a stage's previous outputs before running it (`dvc checkout` restores them).
        assert after.items() <= before.items(), set(after.items()) - set(before.items())
    else:
        assert after == before
    if (root / "mlflow.db").exists():
        client = client_for(root)
        experiments = [e.experiment_id for e in client.search_experiments()]
        assert client.search_runs(experiments, "attributes.status = 'RUNNING'") == []
