"""One root of user errors: every kind is a subclass defined in tracking/errors.py, raised as itself (never as
the bare root), and its line is built from its parts: problem, expected and received, fix."""

from __future__ import annotations

import ast
import subprocess

import pytest
from conftest import REPO

from tracking import errors
from tracking.errors import BadValue, ParamsError, TrackingError, UnknownKey, did_you_mean


def project_modules() -> list[str]:
    done = subprocess.run(["git", "ls-files", "tracking", "pipelines"], cwd=REPO, capture_output=True, text=True)
    return [path for path in done.stdout.split() if path.endswith(".py")]


def error_names() -> set[str]:
    return {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, TrackingError) and value.__module__ == errors.__name__
    }


def test_every_error_kind_is_defined_in_the_errors_module():
    known = error_names()
    elsewhere = [
        f"{path}:{node.lineno} {node.name}"
        for path in project_modules()
        if path != "tracking/errors.py"
        for node in ast.walk(ast.parse((REPO / path).read_text()))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(base, ast.Name) and (base.id in known or base.id == "Exception") for base in node.bases)
    ]
    assert elsewhere == []


def test_no_error_is_raised_as_the_bare_root():
    bare = [
        f"{path}:{node.lineno}"
        for path in project_modules()
        for node in ast.walk(ast.parse((REPO / path).read_text()))
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and isinstance(node.exc.func, ast.Name)
        and node.exc.func.id == "TrackingError"
    ]
    assert bare == []


def test_each_kind_says_what_failure_it_stands_for():
    assert [name for name in error_names() if not getattr(errors, name).__doc__] == []


# Kinds with fields of their own (UnknownKey, BadValue) are tested below with them.
@pytest.mark.parametrize(
    "name", sorted(name for name in error_names() if getattr(errors, name).__init__ is TrackingError.__init__)
)
def test_each_kind_builds_one_line_from_its_parts(name: str):
    kind = getattr(errors, name)
    err = kind("train.learning_rate: not a number", expected="a float > 0", received="'fast'", fix="set a number")
    assert str(err) == "train.learning_rate: not a number (expected a float > 0, got 'fast'); set a number"
    assert "\n" not in str(err)


def test_parts_left_out_leave_no_empty_brackets():
    assert str(ParamsError("params.yaml: file not found", fix="create it")) == "params.yaml: file not found; create it"
    assert str(ParamsError("x is wrong", received="3")) == "x is wrong (got 3)"
    assert str(ParamsError("a whole line as before; with its fix")) == "a whole line as before; with its fix"


def test_params_errors_build_their_line_from_the_key():
    unknown = UnknownKey("params.yaml", "train.lerning_rate", ["epochs", "learning_rate"])
    assert str(unknown) == (
        "params.yaml: unknown key 'train.lerning_rate'; did you mean 'train.learning_rate'? "
        "valid keys in 'train': epochs, learning_rate"
    )
    assert str(UnknownKey("params.yaml", "trian", ["train", "seeds"])) == (
        "params.yaml: unknown key 'trian'; did you mean 'train'? valid keys in the top level: train, seeds"
    )
    assert str(UnknownKey("params.yaml", "xyz", ["train"])) == (
        "params.yaml: unknown key 'xyz'; valid keys in the top level: train"
    )


def test_did_you_mean_ignores_case_and_shows_the_first_spelling_of_a_name():
    """Keras takes `adam` and `Adam`: an unknown optimizer is answered with the params file's lower-case form."""
    assert did_you_mean("adamm", ["adam", "Adam", "sgd"]) == "did you mean 'adam'? "
    assert did_you_mean("RMSProp2", ["rmsprop", "RMSprop"]) == "did you mean 'rmsprop'? "
    assert did_you_mean("xyzzy", ["adam"]) == ""
    bad = BadValue("params.yaml", "train.epochs", "expected an integer >= 1", 0, " (and 1 more problem(s))")
    assert (
        str(bad)
        == "params.yaml: train.epochs: expected an integer >= 1, got 0; fix it in params.yaml (and 1 more problem(s))"
    )
    assert isinstance(bad, ParamsError) and bad.fix == "fix it in params.yaml (and 1 more problem(s))"
