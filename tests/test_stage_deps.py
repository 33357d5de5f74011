"""Every DVC stage depends on the project code that decides its outputs, so an edit re-runs what it changes.

The rule (docs/architecture.md, "What each stage depends on"): a stage lists in `deps` every project module it imports,
directly or through other project modules (function-level imports and `python -m` children included), except
the logging plumbing in `PLUMBING`. That plumbing decides what goes to MLflow, not what a stage writes, and
its version is recorded with every run instead (`prov.git.commit`, `prov.git.dirty` and the uncommitted diff;
see test_pipeline.py::test_dvc_repro_logs_a_finished_run_with_full_provenance).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
from importlib.util import resolve_name
from pathlib import Path

import pytest
import yaml
from conftest import REPO, run

STAGE_FILES = ("dvc.yaml", "audit/dvc.yaml")
PACKAGES = ("pipelines", "tracking")
# The exempt list: the one home of which project modules a stage may import without depending on them.
PLUMBING = {
    "pipelines/__init__.py": "empty package marker",
    "tracking/__init__.py": "re-exports only",
    "tracking/stages/__init__.py": "re-exports only",
    "tracking/facade.py": "the facades' names loaded on first use",
    "tracking/errors.py": "exception types and exit status",
    "tracking/log.py": "how library messages are shown",
    "tracking/names.py": "the names of the tags written to MLflow",
    "tracking/entry.py": "entry point: error lines, exit status, argparse types",
    "tracking/startup.py": "the stage-start timing line",
    "tracking/run/lifecycle.py": "signal handling that ends a run KILLED",
    "tracking/run/tracker.py": "the MLflow run",
    "tracking/run/opening.py": "the MLflow run: checks before it opens",
    "tracking/run/log_calls.py": "what the MLflow run records",
    "tracking/training/callback.py": "per-epoch metrics to MLflow, Ctrl-C check",
    "tracking/store/location.py": "where the MLflow store is",
    "tracking/store/sqlite.py": "SQLite store locking",
    "tracking/store/faults.py": "a damaged, read-only or full store said as such",
    "tracking/store/recorded.py": "the runs the outputs name, checked against the store",
    "tracking/store/reads.py": "runs and experiments read from the store",
    "tracking/run/writer.py": "background MLflow writes",
    "tracking/store/operations.py": "MLflow write operations",
    "tracking/store/context.py": "MLflow's context tags, redacted",
    "tracking/whole_file.py": "how a file is written (whole or not at all), not what it holds",
    "tracking/run/system_metrics.py": "MLflow's system metrics of a training run",
    "tracking/store/journal.py": "offline journal",
    "tracking/store/sinks.py": "where a run's records go: the store, else the journal",
    "tracking/store/sync.py": "offline journal upload",
    "tracking/store/stale.py": "runs left RUNNING",
    "tracking/provenance/__init__.py": "provenance record",
    "tracking/provenance/dvc.py": "provenance: DVC lock hashes",
    "tracking/dvc_files.py": "the DVC files read: stage deps and declared outputs, for checks and provenance",
    "tracking/provenance/environment.py": "provenance: environment variables",
    "tracking/provenance/git.py": "provenance: git commit and diff",
    "tracking/provenance/hardware.py": "provenance: CPU, GPU, OS",
    "tracking/provenance/software.py": "provenance: package versions",
    "tracking/redaction/__init__.py": "provenance: secrets taken out of what is logged",
    "tracking/redaction/formats.py": "provenance: secrets taken out of what is logged (token formats)",
    "tracking/redaction/onepass.py": "provenance: secrets taken out of what is logged (one-pass replacement)",
    "tracking/redaction/rules.py": "provenance: secrets taken out of what is logged (text, line by line)",
    "tracking/redaction/values.py": "provenance: secrets taken out of what is logged (params and variables)",
    "tracking/redaction/words.py": "provenance: secrets taken out of what is logged (credential names)",
    "tracking/provenance/reference.py": "provenance: the machine and inputs beside the weights, compared with HEAD's",
    "tracking/compute/__init__.py": "empty package marker",
    "tracking/compute/placement.py": "compute.* tags: where a run ran",
    "tracking/compute/ray_executor.py": "where repeats train, not what (test_cluster: the local executor's weights)",
    "tracking/compute/upload.py": "what a cluster's nodes receive of the project, not what they train",
    "tracking/compute/head.py": "whether the Ray head answers, before joining it and when a worker is lost",
    "tracking/training/space.py": "free space checked before training: refuses or goes on, writes nothing",
    "tracking/noise/run_page.py": "the verdict as the run's description in the MLflow UI",
    "tracking/noise/band_page.py": "the band as the calibration run's description and metrics in the MLflow UI",
    "tracking/noise/judged_view.py": "the experiment's chart view of the judged metrics in the MLflow UI",
    "tracking/noise/run_name.py": "the verdict in the run's name, as MLflow's run list shows it",
}


def is_package_marker(path: str) -> bool:
    """An `__init__.py` holding only its docstring: it names a folder and decides nothing a stage writes."""
    if not path.endswith("__init__.py"):
        return False
    body = ast.parse((REPO / path).read_text()).body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body)


def module_file(name: str) -> Path | None:
    """The repository file of a project module (`pipelines.train`, `tracking.provenance`), None if not ours."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = REPO.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


# The facades whose names load their modules on first use: the team's API and the stages'.
FACADES = ("tracking", "tracking.stages")


def public_modules(facade: str) -> dict[str, str]:
    """A facade's public names (its `_PUBLIC`, read from its source) and the module that defines each."""
    tree = ast.parse((REPO / facade.replace(".", "/") / "__init__.py").read_text())
    table = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "_PUBLIC" for target in node.targets)
    )
    return {name: resolve_name(module, facade) for name, module in ast.literal_eval(table).items()}


PUBLIC = {facade: public_modules(facade) for facade in FACADES}


def imported_names(path: Path) -> set[str]:
    """Modules `path` may load: every import statement at any depth, their parent packages, the defining module of
    each public name taken from a facade (which loads it on first use), and dotted string constants naming a
    project module (what `subprocess` starts with `python -m`)."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
            if module in PUBLIC:
                names.update(PUBLIC[module][alias.name] for alias in node.names if alias.name in PUBLIC[module])
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", node.value)
        ):
            names.add(node.value)
    return {".".join(name.split(".")[:end]) for name in names for end in range(1, name.count(".") + 2)}


def import_closure(module: str) -> dict[str, str]:
    """Every project file that `python -m module` may load, each with the file that first imports it."""
    start = module_file(module)
    assert start is not None, f"{module} is not a module of this project"
    found = {str(start.relative_to(REPO)): "the stage command"}
    todo = [start]
    while todo:
        path = todo.pop()
        for name in sorted(imported_names(path)):
            target = module_file(name)
            if target is not None and str(target.relative_to(REPO)) not in found:
                found[str(target.relative_to(REPO))] = str(path.relative_to(REPO))
                todo.append(target)
    return found


def stages() -> list[tuple[str, str, str, list[str]]]:
    """(stage file, stage name, module its command runs, deps relative to the repository root) of every stage."""
    found = []
    for stage_file in STAGE_FILES:
        folder = (REPO / stage_file).parent
        for name, stage in yaml.safe_load((REPO / stage_file).read_text())["stages"].items():
            command = re.fullmatch(r"python3? -m ([\w.]+)", stage["cmd"])
            assert command, f"{stage_file}: stage {name} does not run `python -m <module>`: {stage['cmd']!r}"
            wdir = (folder / stage.get("wdir", ".")).resolve()
            deps = [str((wdir / dep).resolve().relative_to(REPO)) for dep in stage.get("deps", [])]
            found.append((stage_file, name, command.group(1), deps))
    return found


@pytest.mark.parametrize(("stage_file", "name", "module", "deps"), stages(), ids=[s[1] for s in stages()])
def test_every_stage_depends_on_the_project_code_it_imports(stage_file: str, name: str, module: str, deps: list[str]):
    missing = {
        path: via
        for path, via in import_closure(module).items()
        if path not in PLUMBING
        and not is_package_marker(path)
        and not any(path == dep or path.startswith(f"{dep}/") for dep in deps)
    }
    assert not missing, (
        f"{stage_file}: stage {name} does not depend on "
        + ", ".join(f"{path} (imported by {via})" for path, via in sorted(missing.items()))
        + "; add it to the stage's deps, or to PLUMBING if it only logs to MLflow"
    )
    stale = [dep for dep in deps if dep.endswith(".py") and not (REPO / dep).is_file()]
    assert not stale, f"{stage_file}: stage {name} depends on files that do not exist: {stale}"


def committed_code_in_locks() -> list[tuple[str, str, str, str]]:
    """(lock file, stage, dep, md5 the lock holds) of every dep that is a file git tracks: the project's code."""
    tracked = set(run(["git", "ls-files"], REPO).stdout.split())
    found = []
    for stage_file in STAGE_FILES:
        lock = (REPO / stage_file).with_suffix(".lock")
        for name, stage in yaml.safe_load(lock.read_text())["stages"].items():
            for dep in stage.get("deps", []):
                path = str(((REPO / stage_file).parent / dep["path"]).resolve().relative_to(REPO))
                if path in tracked:
                    found.append((str(lock.relative_to(REPO)), name, path, dep["md5"]))
    return found


def test_the_committed_locks_hold_the_committed_code_so_a_fresh_clone_reruns_nothing_for_it():
    """A code edit committed without `dvc repro` leaves dvc.lock naming the old file: every clone's `make run`
    would then train again and leave dvc.lock modified."""
    committed = committed_code_in_locks()
    stale = [
        f"{lock}: stage {stage}: {path}"
        for lock, stage, path, md5 in committed
        if hashlib.md5((REPO / path).read_bytes()).hexdigest() != md5
    ]
    assert committed, "the locks' code deps were read"
    assert stale == [], "run `dvc repro` (and `dvc repro audit/dvc.yaml`), then commit the locks:\n" + "\n".join(stale)


def test_the_exempt_list_names_real_modules_and_no_stage_code():
    assert all((REPO / path).is_file() for path in PLUMBING)
    assert [path for path in PLUMBING if path.startswith("pipelines/")] == ["pipelines/__init__.py"]


def test_closure_follows_public_names_to_the_modules_that_define_them():
    closure = import_closure("pipelines.train")
    assert "tracking/stages/train.py" in closure and "tracking/training/fitting.py" in closure
    assert closure["tracking/stages/train.py"] == "pipelines/train.py"


@pytest.mark.parametrize("stage", sorted(path.stem for path in (REPO / "pipelines").glob("[!_]*.py")))
def test_stages_import_only_the_library_public_names(stage: str):
    """A stage imports the stages' names (`tracking.stages`) and a builder module the team's (`tracking`), never
    an internal module, so the pipeline's entry points are declared in one place."""
    tree = ast.parse((REPO / "pipelines" / f"{stage}.py").read_text())
    internal = [
        f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
        if (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0] == "tracking"
        and not (isinstance(node, ast.ImportFrom) and alias.name in PUBLIC.get(node.module, {}))
    ]
    assert not internal, f"pipelines/{stage}.py imports library internals: {internal}; declare them in tracking.stages"


def test_every_public_name_loads_from_its_module_without_tensorflow_or_mlflow():
    code = (
        "import importlib, sys\n"
        "from importlib.util import resolve_name\n"
        "for facade in sys.argv[1:]:\n"
        "    module = importlib.import_module(facade)\n"
        "    for name in module.__all__:\n"
        "        found = {}\n"
        "        exec(f'from {facade} import {name} as found', found)\n"  # as a stage imports it: a name that is
        "        found = found['found']\n"  # also a submodule's would come back as the module
        "        assert not isinstance(found, type(sys)), (facade, name)\n"
        "        assert getattr(found, '__module__', None) in (None, resolve_name(module._PUBLIC[name], facade)), name\n"
        "    assert sorted(module.__all__) == sorted(module._PUBLIC), facade\n"
        "print('tensorflow' in sys.modules, 'mlflow' in sys.modules)"
    )
    assert run([sys.executable, "-c", code, *FACADES], REPO).stdout.split() == ["False", "False"]


def test_closure_follows_function_level_imports_and_python_m_children():
    assert "tracking/training/callback.py" in import_closure("pipelines.train")  # imported inside a function
    assert "tracking/repeats/variants.py" in import_closure(
        "pipelines.audit"
    )  # via `python -m tracking.inspect.audit_training`


@pytest.mark.slow
def test_editing_the_scoring_code_marks_calibrate_and_evaluate_changed(calibrated: Path):
    assert json.loads(run(["dvc", "status", "--json"], calibrated).stdout).keys() == {"compare"}  # never run
    scoring = calibrated / "tracking/training/scoring.py"
    try:
        with open(scoring, "a") as handle:
            handle.write("# an edit to the scoring code\n")
        status = json.loads(run(["dvc", "status", "--json"], calibrated).stdout)
    finally:
        run(["git", "checkout", "--", "tracking/training/scoring.py"], calibrated)
    assert {"evaluate", "calibrate"} <= set(status), status
    assert {"changed deps": {"tracking/training/scoring.py": "modified"}} in status["calibrate"], status["calibrate"]
