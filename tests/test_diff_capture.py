"""The working tree's snapshot a run records re-creates its tree byte for byte, and leaves DVC's outputs out.

Each case changes a real git repository after its commit; the tree is snapshotted as a stage snapshots it (a
commit object of ours under refs/tracking/), and checked out in a fresh worktree at the commit, whose files
(bytes and executable bits) must then equal the changed tree's. A run of an earlier version logged a diff
instead: that path is kept for them (`apply_diff`).
"""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import client_for, project_env, run

from tracking.errors import RerunError
from tracking.inspect.diff import load_run
from tracking.inspect.worktree import apply_diff, restore_code, temporary_worktree
from tracking.names import GIT_SNAPSHOT_TAG, GIT_UNTRACKED_FIELD
from tracking.provenance.git import FETCH_SNAPSHOTS, encode_diff, gather_git

BASE = {
    "crlf.csv": b"epoch,loss\r\n0,1.5\r\n1,0.5\r\n",
    "no_newline.txt": b"first\nlast without newline",
    "gone.py": b"print('deleted')\n",
    "old_name.py": b"".join(b"line %d\n" % n for n in range(20)),
    "run.sh": b"#!/bin/sh\necho hi\n",
    "latin1.txt": b"caf\xe9\n",
    "image.bin": bytes(range(256)),
}


def _write(root: Path, name: str, data: bytes) -> None:
    (root / name).write_bytes(data)


def _rename(root: Path) -> None:
    run(["git", "mv", "old_name.py", "new_name.py"], root)
    _write(root, "new_name.py", BASE["old_name.py"] + b"line 20\n")


CASES: dict[str, Callable[[Path], object]] = {
    "crlf lines": lambda root: _write(root, "crlf.csv", b"epoch,loss\r\n0,1.25\r\n1,0.5\r\n2,0.25\r\n"),
    "no final newline": lambda root: _write(root, "no_newline.txt", b"first\nchanged last, still without newline"),
    "newline added at the end": lambda root: _write(root, "no_newline.txt", BASE["no_newline.txt"] + b"\n"),
    "new file": lambda root: (_write(root, "added.py", b"x = 1\r\ny = 2"), run(["git", "add", "added.py"], root)),
    "deleted file": lambda root: (root / "gone.py").unlink(),
    "renamed file": _rename,
    "executable bit": lambda root: (root / "run.sh").chmod(0o755),
    "not utf-8": lambda root: _write(root, "latin1.txt", b"caf\xe9 cr\xe8me\n"),
    "file added with git add -N": lambda root: (
        _write(root, "team_module.py", b"INTENDED = 1\n"),
        run(["git", "add", "-N", "team_module.py"], root),
    ),
    "file untracked by git rm --cached": lambda root: run(["git", "rm", "-q", "--cached", "run.sh"], root),
    "binary file": lambda root: _write(root, "image.bin", bytes(reversed(range(256)))),
    "everything at once": lambda root: [
        change(root) for name, change in CASES.items() if name not in ("everything at once", "newline added at the end")
    ],
}


def make_repo(root: Path) -> Path:
    root.mkdir()
    for name, data in BASE.items():
        _write(root, name, data)
    run(["git", "init", "-q", "-b", "main"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "base"], root)
    return root


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file git tracks (its index, not HEAD), but git's own: its bytes and whether it is executable."""
    tracked = set(run(["git", "ls-files", "-z"], root).stdout.split("\0"))
    return {
        path.relative_to(root).as_posix(): (path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and ".git" not in path.relative_to(root).parts
        and path.relative_to(root).as_posix() in tracked
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("store")
    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.create_experiment("diffs", artifact_location=(folder / "artifacts").as_uri())
    return client, experiment


def logged_and_read_back(store, diff: str, tmp_path: Path) -> str:
    """The diff as `tracking rerun` reads it: logged as the tracker logs it, read back through MLflow."""
    client, experiment = store
    run_id = client.create_run(experiment).info.run_id
    folder = tmp_path / "logged"
    folder.mkdir()
    (folder / "uncommitted.diff").write_bytes(encode_diff(diff))
    client.log_artifact(run_id, str(folder / "uncommitted.diff"), "provenance")
    return load_run(client, run_id).diff


@pytest.mark.parametrize("case", CASES)
def test_the_snapshot_recreates_the_tree_byte_for_byte(case: str, tmp_path: Path):
    root = make_repo(tmp_path / "repo")
    commit = run(["git", "rev-parse", "HEAD"], root).stdout.strip()
    CASES[case](root)
    status = run(["git", "status", "--porcelain"], root).stdout
    captured = gather_git(root)
    assert captured["dirty"] and captured["diff_excludes"] == [] and captured["changed_files"]
    assert run(["git", "status", "--porcelain"], root).stdout == status, "the user's index and files untouched"
    assert gather_git(root)["snapshot"] == captured["snapshot"], "the same tree on the same commit: the same sha"
    tags = {GIT_SNAPSHOT_TAG: captured["snapshot"]}
    with temporary_worktree(root, commit) as copy:
        changed = restore_code(copy, tags, "", "run1")
        assert tree(copy) == tree(root)
        assert gather_git(copy)["snapshot_tree"] == captured["snapshot_tree"]  # the re-created run: the same code
    assert changed and set(changed) <= set(tree(root)) | set(BASE)


def test_a_clone_without_the_snapshot_says_how_to_fetch_it(tmp_path: Path):
    root = make_repo(tmp_path / "repo")
    _write(root, "crlf.csv", b"changed\r\n")
    captured = gather_git(root)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", root.as_uri(), str(clone)], tmp_path)  # a clone as over a network: refs/heads only
    tags = {GIT_SNAPSHOT_TAG: captured["snapshot"]}
    with temporary_worktree(clone, captured["commit"]) as copy, pytest.raises(RerunError) as raised:
        restore_code(copy, tags, "", "run1")
    assert "is not in this clone" in str(raised.value) and FETCH_SNAPSHOTS in str(raised.value)
    run(["git", "fetch", "-q", "origin", "refs/tracking/*:refs/tracking/*"], clone)
    with temporary_worktree(clone, captured["commit"]) as copy:
        restore_code(copy, tags, "", "run1")
        assert (copy / "crlf.csv").read_bytes() == b"changed\r\n"


SECRET_FILES = {
    ".netrc": b"machine example.com login bob password netrcPlanted0123\n",
    ".env": b"API_TOKEN=envPlanted0123456789\n",
    "pip.conf": b"[global]\nindex-url = https://bob:pipPlanted0123@pypi.example.com/simple\n",
    ".aws/credentials": b"[default]\naws_secret_access_key = awsPlanted0123456789\n",
    "keys/id_ed25519": b"-----BEGIN OPENSSH PRIVATE KEY-----\nsshPlanted0123\n-----END OPENSSH PRIVATE KEY-----\n",
}


def test_untracked_files_stay_out_of_the_snapshot_and_only_their_count_is_recorded(tmp_path: Path):
    """Secret files beside a tracked change: the snapshot (every object a push of our refs sends) holds none of
    their bytes or names; the record counts them."""
    root = make_repo(tmp_path / "repo")
    _write(root, "crlf.csv", b"changed\r\n")
    for name, data in SECRET_FILES.items():
        (root / name).parent.mkdir(exist_ok=True)
        _write(root, name, data)
    captured = gather_git(root)
    assert captured["untracked_files"] == len(SECRET_FILES)
    assert [changed["path"] for changed in captured["changed_files"]] == ["crlf.csv"]
    bare = tmp_path / "bare.git"
    run(["git", "init", "-q", "--bare", str(bare)], tmp_path)
    run(["git", "push", "-q", "--mirror", str(bare)], root)
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=bare, capture_output=True)
    found = [name for name, data in SECRET_FILES.items() if data in objects.stdout or name.encode() in objects.stdout]
    assert found == []
    for name in SECRET_FILES:
        (root / name).unlink()
    assert gather_git(root)["snapshot"] == captured["snapshot"], "untracked files change nothing of the snapshot"


def test_an_imported_untracked_module_is_named_in_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    """A builder imported from a file git does not track: one line says a rerun cannot restore it."""
    import importlib

    root = make_repo(tmp_path / "repo")
    _write(root, "untracked_builder.py", b"WIDTH = 3\n")
    monkeypatch.syspath_prepend(str(root))
    module = importlib.import_module("untracked_builder")
    del sys.modules["untracked_builder"]
    monkeypatch.setitem(sys.modules, "untracked_builder", module)  # taken out again after the test
    with caplog.at_level(logging.WARNING, logger="tracking.provenance.git"):
        captured = gather_git(root)
    assert captured["snapshot"] is None and captured["untracked_files"] == 1
    (line,) = [record.getMessage() for record in caplog.records]
    assert "1 untracked file(s) imported" in line and "untracked_builder.py" in line and "git add" in line


@pytest.mark.parametrize("case", ["crlf lines", "renamed file", "not utf-8"])
def test_a_diff_logged_by_an_earlier_version_still_recreates_the_tree(case: str, tmp_path: Path, store):
    root = make_repo(tmp_path / "repo")
    commit = run(["git", "rev-parse", "HEAD"], root).stdout.strip()
    CASES[case](root)
    run(["git", "add", "-A"], root)
    raw = subprocess.run(["git", "diff", "HEAD"], cwd=root, capture_output=True, check=True).stdout
    diff = logged_and_read_back(store, raw.decode("utf-8", "surrogateescape"), tmp_path)
    assert encode_diff(diff) == raw
    with temporary_worktree(root, commit) as copy:
        apply_diff(copy, diff, "run1")
        assert tree(copy) == tree(root)


@pytest.mark.parametrize("change", ["modified", "new", "deleted"])
def test_a_binary_file_in_an_earlier_versions_diff_is_refused_naming_it(change: str, tmp_path: Path):
    root = make_repo(tmp_path / "repo")
    commit = run(["git", "rev-parse", "HEAD"], root).stdout.strip()
    if change == "modified":
        _write(root, "image.bin", bytes(reversed(range(256))))
    elif change == "new":
        _write(root, "other.bin", b"\0\1\2")
        run(["git", "add", "other.bin"], root)
    else:
        (root / "image.bin").unlink()
    _write(root, "crlf.csv", b"a,b\r\n")
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=root, capture_output=True, check=True).stdout.decode()
    with temporary_worktree(root, commit) as copy, pytest.raises(RerunError) as raised:
        apply_diff(copy, diff, "run1")
    name = "other.bin" if change == "new" else "image.bin"
    assert f"changes binary file(s) {name}," in str(raised.value) and "commit them" in str(raised.value)


def test_dvc_outputs_and_locks_are_left_out_of_the_diff(tmp_path: Path):
    """Outs, metrics and plots of every stage of every dvc.yaml (wdir and `cache: false` included), and dvc.lock."""
    root = make_repo(tmp_path / "repo")
    (root / "sub").mkdir()
    _write(
        root,
        "dvc.yaml",
        b"stages:\n  train:\n    cmd: python train.py\n    outs:\n      - out/\n    metrics:\n"
        b"      - metrics.json:\n          cache: false\n    plots:\n      - crlf.csv:\n          cache: false\n",
    )
    _write(
        root,
        "sub/dvc.yaml",
        b"stages:\n  audit:\n    wdir: ..\n    cmd: python audit.py\n    outs:\n"
        b"      - report.md:\n          cache: false\n",
    )
    for name in ("dvc.lock", "sub/dvc.lock", "metrics.json", "report.md"):
        _write(root, name, b"committed result\n")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "results"], root)
    for name in ("dvc.lock", "sub/dvc.lock", "metrics.json", "report.md", "crlf.csv"):
        _write(root, name, b"new result\r\n")
    _write(root, ".gitignore", b"/out\n")  # as DVC lists the outputs it caches
    run(["git", "add", ".gitignore"], root)
    run(["git", "commit", "-qm", "ignored"], root)
    (root / "out").mkdir()
    _write(root, "out/new.json", b"{}")
    _write(root, "run.sh", b"#!/bin/sh\necho code change\n")
    captured = gather_git(root)
    assert captured["diff_excludes"] == ["crlf.csv", "dvc.lock", "metrics.json", "out", "report.md", "sub/dvc.lock"]
    assert [changed["path"] for changed in captured["changed_files"]] == ["run.sh"]


def test_templated_dvc_yaml_outputs_are_resolved_through_dvc(tmp_path: Path):
    root = make_repo(tmp_path / "repo")
    run(["dvc", "init", "-q"], root, env=project_env())
    _write(
        root,
        "dvc.yaml",
        b"vars:\n  - folder: results\nstages:\n  score:\n    foreach: [a, b]\n    do:\n"
        b"      cmd: python score.py ${item}\n      metrics:\n        - ${folder}/${item}.json:\n"
        b"            cache: false\n",
    )
    assert gather_git(root)["diff_excludes"] == ["dvc.lock", "results/a.json", "results/b.json"]


def test_an_invalid_dvc_yaml_is_one_error_naming_it(tmp_path: Path):
    from tracking.errors import RepoError

    root = make_repo(tmp_path / "repo")
    (root / "sub").mkdir()
    _write(root, "sub/dvc.yaml", b"stages:\n  - not a mapping\n")
    with pytest.raises(RepoError, match=r"sub/dvc.yaml is not a valid dvc.yaml .*; fix it"):
        gather_git(root)


def test_tracking_diff_compares_the_runs_snapshots_in_git(tmp_path: Path):
    """`tracking diff`'s code group reads each run's working tree from git; a snapshot this clone lacks is named
    with the fetch that brings it."""
    from tracking.inspect.diff import RunSnapshot
    from tracking.inspect.diff.code import code_group
    from tracking.names import GIT_COMMIT_TAG

    root = make_repo(tmp_path / "repo")
    _write(root, "run.sh", b"#!/bin/sh\necho a\n")
    first = gather_git(root)
    _write(root, "run.sh", b"#!/bin/sh\necho b\n")
    _write(root, "new.py", b"x = 1\n")
    run(["git", "add", "-N", "new.py"], root)
    _write(root, "notes.txt", b"untracked\n")
    second = gather_git(root)

    def logged(run_id: str, commit: str, snapshot: str, untracked: int = 0) -> RunSnapshot:
        tags = {GIT_COMMIT_TAG: commit, GIT_SNAPSHOT_TAG: snapshot, GIT_UNTRACKED_FIELD: str(untracked)}
        return RunSnapshot(run_id, "", "0", "FINISHED", {}, {}, tags, None, "")

    a = logged("a", first["commit"], first["snapshot"])
    b = logged("b", second["commit"], second["snapshot"], second["untracked_files"])
    group = code_group(a, b, root, set())
    assert [change.key for change in group.changes] == ["file new.py", "file run.sh"]
    assert "untracked file(s) were present (1 beside run B), in no snapshot" in group.note
    elsewhere = logged("c", second["commit"], "0123456789abcdef0123456789abcdef01234567")
    group = code_group(a, elsewhere, root, set())
    assert [change.key for change in group.changes] == ["git.snapshot"] and FETCH_SNAPSHOTS in group.note


def test_prune_snapshots_keeps_what_runs_record_and_deletes_the_rest(project: Path):
    """`tracking prune-refs`: --dry-run deletes nothing; the default keeps the snapshot a run of the store
    records; --all deletes it too. Each through the command a user types."""
    params, shas = (project / "params.yaml").read_text(), []
    for text in ("a", "b", "c"):
        (project / "params.yaml").write_text(f"{params}# {text}\n")
        shas.append(gather_git(project)["snapshot"])
    assert None not in shas
    client = client_for(project)
    experiment = client.create_experiment("test")
    client.set_tag(client.create_run(experiment).info.run_id, GIT_SNAPSHOT_TAG, shas[0])

    def prune(*flags: str) -> tuple[str, list[str]]:
        done = run([sys.executable, "-m", "tracking", "prune-refs", *flags], project)
        refs = run(["git", "for-each-ref", "--format=%(objectname)", "refs/tracking/"], project).stdout.split()
        return done.stdout, refs

    said, refs = prune("--dry-run")
    assert "would delete 2 snapshot ref(s)" in said and sorted(refs) == sorted(shas)
    said, refs = prune()
    assert "deleted 2 snapshot ref(s) under refs/tracking/; kept 1" in said and refs == [shas[0]]
    said, refs = prune("--all")
    assert "deleted 1 snapshot ref(s)" in said and refs == []
    assert run(["git", "cat-file", "-t", shas[1]], project).stdout.strip() == "commit", "git collects them itself"
