"""Fixtures: a tiny real git + DVC copy of this project, and helpers to run its stages and read MLflow."""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tracking.config.baseline import freeze
from tracking.yaml_text import parse_yaml, yaml_editor

# TensorFlow reads these at import; set them before any test imports it (as `configure_environment` would).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
BIN = Path(sys.executable).parent
# The template's model: the builder its params.yaml names (the library has no default), for tests that train it.
TEMPLATE_BUILDER = parse_yaml((REPO / "params.yaml").read_text())["model"]["builder"]
TINY = {
    "mlflow": {"experiment": "test"},
    "model": {"builder": TEMPLATE_BUILDER, "kwargs": {"filters": [4, 4, 4], "dense_units": 8, "dropout": 0.2}},
    "train": {"epochs": 2, "batch_size": 64},
    "calibration": {"repeats": 3},
    "compare": {"candidate_repeats": 1},  # one candidate run: tests/test_candidate_repeats.py sets more
}


def project_env(**extra: str) -> dict[str, str]:
    """The environment stage processes see: this venv first on PATH, no tracking URI unless given."""
    env = {key: value for key, value in os.environ.items() if key not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "test"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "test@example.invalid"
    env.update(extra)
    return env


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True, timeout: float = 600):
    done = subprocess.run(cmd, cwd=cwd, env=env or project_env(), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{cmd} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done


def clone_files(clone: Path) -> Path:
    """The files of this repository a `git clone` would hold (tracked, and untracked but not ignored, as in the
    working tree under test) copied to `clone`, with a fresh git repository there: what a newcomer's clone sees."""
    tracked = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], REPO).stdout
    for name in filter(None, tracked.split("\0")):
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, clone / name)
    run(["git", "init", "-q"], clone)
    return clone


def assert_user_error(done: subprocess.CompletedProcess, *expected: str) -> None:
    """A user error: exit status 2, no traceback, and a last `error:` line holding every `expected` text."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[-1].startswith("error: ") and all(text in lines[-1] for text in expected), lines


def write_params(root: Path, **sections: dict) -> None:
    """Merge `sections` into the project's params.yaml, written as DVC writes it (YAML 1.2)."""
    path = root / "params.yaml"
    params = parse_yaml(path.read_text())
    for name, values in sections.items():
        params.setdefault(name, {}).update(values)
    with open(path, "w", encoding="utf-8") as handle:
        yaml_editor().dump(params, handle)


def add_deps(root: Path, path: str, *stages: str) -> None:
    """List `path` under the deps of `stages` in dvc.yaml, as a team following the error line would."""
    content = parse_yaml((root / "dvc.yaml").read_text())
    for stage in stages:
        content["stages"][stage]["deps"].append(path)
    with open(root / "dvc.yaml", "w", encoding="utf-8") as handle:
        yaml_editor().dump(content, handle)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the modules holding `slow` tests first, each module's tests kept together (module fixtures built once).

    pytest-xdist hands the queue out in this order: long end-to-end tests started late would run alone at the
    end while the other worker idles; started first, the short tests fill the gaps.
    """
    slow_modules = {item.module for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module not in slow_modules)


@pytest.fixture
def tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def root(tmp_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder (`.dvc/` only) as the working directory, its store the default `mlflow.db`."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    (tmp_dir / ".dvc").mkdir()
    return tmp_dir


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh git + DVC repository holding this project's pipeline with tiny params, committed."""
    return make_project(tmp_path / "project")


def make_project(root: Path) -> Path:
    """Create the `project` fixture's repository at `root` (for module-scoped fixtures that share one).

    A copy of one built per test process: `git init`, `dvc init` and the first commit cost a second each time.
    """
    shutil.copytree(_template(), root, symlinks=True)
    return root


_TEMPLATES: list[Path] = []


def _template() -> Path:
    """The project as `git init`, `dvc init` and a first commit leave it, built once per test process."""
    if not _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="project-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _TEMPLATES.append(_build_project(folder / "project"))
    return _TEMPLATES[0]


def _build_project(root: Path) -> Path:
    root.mkdir()
    for name in ("tracking", "pipelines"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml", ".gitignore"):
        shutil.copy(REPO / name, root / name)
    (root / "data/raw").mkdir(parents=True)
    (root / "data/raw/.gitkeep").touch()
    write_params(root, **TINY)
    freeze(root / "params.yaml", root / "baseline.yaml")
    run(["git", "init", "-q", "-b", "main"], root)
    run(["dvc", "init", "-q"], root)
    run(
        ["dvc", "config", "core.analytics", "false"], root
    )  # as docs/run-record.md says for projects made with `dvc init`
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "project"], root)
    return root


def blocks(text: str, language: str = "") -> list[str]:
    """The fenced blocks of `text` whose info string is `language` ("" for blocks without one)."""
    return [body for lang, body in FENCE.findall(text) if lang == language]


def client_for(root: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")


def recorded(root: Path, run_id: str) -> dict[str, str]:
    """A run's tags with every field of its provenance record (tags hold only the searchable ones), read from
    `root`'s store the way `tracking diff` and `rerun` read them."""
    from tracking.inspect.diff import load_run

    return load_run(client_for(root), run_id).tags


def train_run_id(root: Path) -> str:
    """The id of the run that trained what `root`'s outputs/run.json records (the file holds the training by content
    only): this checkout's link where it links that training, else the run found in `root`'s store, as the stages
    find it."""
    from tracking.store.recorded import find_training, linked_run, read_run_file

    training = read_run_file(root)
    return linked_run(root, training) or find_training(client_for(root), training).info.run_id


def calibration_link(root: Path) -> dict:
    """The calibrate stage's link in `root`: its parent run, executor and reused repeats, each repeat's run and place
    (calibration/noise.json holds the results only)."""
    from tracking.layout import CALIBRATE
    from tracking.store.recorded import read_link

    return read_link(root, CALIBRATE)


def calibration_record(root: Path) -> dict:
    """calibration/noise.json's results with this checkout's link merged in (the parent run, reuse, each repeat's run
    and place): the whole record, as the calibrate stage logs it to MLflow."""
    from tracking.noise.record import NoiseRecord

    return NoiseRecord.whole(json.loads((root / "calibration/noise.json").read_text()), calibration_link(root))


def runs_of(root: Path, experiment: str = "test") -> list:
    client = client_for(root)
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found else []


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `build` makes, made once per test session by whichever pytest-xdist worker asks first.

    xdist runs a session fixture once in every worker; the others wait on a lock in the temporary folder the
    workers share, then use what the first one built.
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    folder, built = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            built.touch()
    return folder


def tiny_calibration(root: Path, variants: list[str]) -> Path:
    """A `project` at `root` whose baseline is one epoch, calibrated with three repeats of each of `variants`."""
    project = make_project(root)
    write_params(project, train={"epochs": 1}, calibration={"variants": variants, "repeats": 3})
    freeze(project / "params.yaml", project / "baseline.yaml")
    run(["git", "commit", "-qam", "tiny calibration"], project)
    return project


def _calibrate(folder: Path) -> None:
    run(["dvc", "repro", "evaluate", "calibrate"], tiny_calibration(folder / "project", ["algo"]))


@pytest.fixture(scope="session")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny project after a real `dvc repro evaluate calibrate`: one candidate run and three ALGO repeats.

    Shared by the tests that only read it or undo their edits (one training of the pipeline for all workers).
    """
    return built_once(tmp_path_factory, "calibrated", _calibrate) / "project"


# The README's `dvc` block as typed: what it printed, and what `dvc exp run -n reseeded -S seeds.base=7` ran after it.
README_TYPED, RESEEDED_RAN = "readme.out", "reseeded.json"


def _type_the_readme(folder: Path) -> None:
    project = tiny_calibration(folder / "project", ["algo+impl", "algo", "control"])
    (commands,) = [block for block in blocks(README.read_text(), "bash") if block.startswith("dvc repro")]
    (folder / README_TYPED).write_text(run(["bash", "-ec", commands], project).stdout)
    lock = parse_yaml((project / "dvc.lock").read_text())["stages"]
    run(["git", "checkout", "--", "params.yaml"], project)
    done = run(["dvc", "exp", "run", "-n", "reseeded", "-S", "seeds.base=7"], project)
    after = parse_yaml((project / "dvc.lock").read_text())["stages"]
    ran = {stage for stage in after if f"Running stage '{stage}'" in done.stdout}
    ran |= {
        f"{stage} outs changed" for stage in ("prepare", "calibrate") if after[stage]["outs"] != lock[stage]["outs"]
    }
    (folder / RESEEDED_RAN).write_text(json.dumps(sorted(ran)))


def readme_runs(readme_typed: Path) -> tuple[str, str]:
    """The `readme_typed` project's first run (its id) and the experiment the README's `dvc exp run -S
    train.learning_rate=1e-5` made (its DVC name)."""
    runs = [
        found for found in runs_of(readme_typed / "project") if found.data.tags.get("pipeline.stage") != "calibrate"
    ]
    (first,) = [found.info.run_id for found in runs if "dvc.exp_name" not in found.data.tags]
    (experiment,) = [
        found.data.tags["dvc.exp_name"] for found in runs if found.data.params["train.learning_rate"] == "1e-05"
    ]
    return first, experiment


@pytest.fixture(scope="session")
def readme_typed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny project (ALGO+IMPL, ALGO and CONTROL calibrated: where diff and compare used to disagree) after the
    README's `dvc` block typed as it stands (`dvc repro`, then `dvc exp run -S train.learning_rate=1e-5`, ...),
    then `dvc exp run -n reseeded -S seeds.base=7`: one candidate that differs only in seeds, as users vary them.

    Its folder holds the project, what the README's commands printed (README_TYPED) and the stages the reseeded
    experiment ran (RESEEDED_RAN). Shared by the tests that only read it (one pipeline for the README's checks
    and the noise policy's).
    """
    return built_once(tmp_path_factory, "readme_typed", _type_the_readme)


DATASET_WRITER = """
import sys, time
from pathlib import Path
from mlflow.tracking import MlflowClient
from tracking.store.operations import apply, inputs

uri, experiment, folder, writers, shards = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
client = MlflowClient(uri)
run_id = client.create_run(experiment).info.run_id
(folder / run_id).touch()
while len(list(folder.iterdir())) < writers:  # every writer has imported MLflow and made its run
    time.sleep(0.01)
for shard in range(shards):
    data = {"name": "digits", "digest": f"80b56076825e27c{shard:02d}", "source_type": "local", "source": "{}"}
    apply(client, run_id, inputs([{"dataset": data, "tags": {"mlflow.data.context": "train"}}]))
"""


def log_the_same_data_at_once(uri: str, experiment: str, folder: Path, writers: int = 4, shards: int = 6) -> None:
    """`writers` processes, released together once each has made its run in a new `experiment`, log the same
    `shards` data sets one by one through `tracking.store.operations.apply`; every one must exit 0 with them all."""
    from mlflow.tracking import MlflowClient

    folder.mkdir()
    found = MlflowClient(uri).create_experiment(experiment)
    command = [sys.executable, "-c", DATASET_WRITER, uri, found, str(folder), str(writers), str(shards)]
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    started = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for _ in range(writers)
    ]
    outputs = [writer.communicate(timeout=120)[0] for writer in started]
    assert [writer.returncode for writer in started] == [0] * writers, "\n".join(outputs)
    runs = MlflowClient(uri).search_runs([found])
    assert len(runs) == writers and all(len(run.inputs.dataset_inputs) == shards for run in runs)
