"""One home for the names the product writes to MLflow: no tag name is spelled outside tracking/names.py."""

from __future__ import annotations

import ast
import re
import subprocess

from conftest import REPO

from tracking import names

# A string that looks like one of our tag names: a known prefix and a dotted name after it.
TAG_LIKE = re.compile(r"^(prov|pipeline|noise|audit|tracking|mlflow|dvc)\.[a-z_]+(\.[a-z_]+)*\.?$|^(rerun_of|error)$")
# Strings of that shape that are not tag names: files, and MLflow's own module path.
NOT_TAGS = {
    "dvc.lock",
    "dvc.yaml",
    "mlflow.db",
    "mlflow.utils.uv_utils",
    "mlflow.system_metrics",
    "mlflow.store.db.utils",
    "mlflow.store.db_migrations",
}


def literals(path: str) -> list[tuple[int, str]]:
    """The string constants of a module, docstrings left out, with their line numbers."""
    tree = ast.parse((REPO / path).read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def is_project_module(value: str) -> bool:
    """A dotted name of one of our modules (what `python -m` starts, `tracking.inspect.audit_training`): no tag."""
    return (REPO / value.replace(".", "/")).with_suffix(".py").is_file()


def test_no_tag_name_is_spelled_outside_the_names_module():
    files = subprocess.run(
        ["git", "ls-files", "tracking", "pipelines", "bench"], cwd=REPO, capture_output=True, text=True
    )
    spelled = [
        f"{path}:{line}: {value!r}"
        for path in files.stdout.split()
        if path.endswith(".py") and path != "tracking/names.py"
        for line, value in literals(path)
        if TAG_LIKE.match(value) and value not in NOT_TAGS and not is_project_module(value)
    ]
    assert spelled == [], "import these from tracking.names instead:\n" + "\n".join(spelled)


def test_the_names_are_the_run_format_earlier_runs_were_logged_with():
    """Changing a value breaks `tracking diff` and `tracking rerun` of every run already logged."""
    assert (names.WEIGHTS_TAG, names.STAGE_TAG, names.PID_TAG, names.SOURCE_TAG, names.MAX_TAG_CHARS) == (
        "prov.weights_sha256",
        "pipeline.stage",
        "tracking.pid",
        "tracking.offline.source_run_id",
        5000,
    )
