"""A team's project is not dirty because of the store's own files: `tracking.start` keeps them out of git (issue 36)."""

from pathlib import Path

import git
from conftest import run

from tracking.store.excluded import exclude_store_files


def _repo(root: Path) -> git.Repo:
    run(["git", "init", "-q"], root)
    (root / "train.py").write_text("print('the team')\n")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "the team's script"], root)
    return git.Repo(root)


def _store_files(root: Path) -> None:
    for name in ("mlflow.db", "mlflow.db-wal", "mlartifacts/1/abc/artifacts/model.keras", ".tracking/offline/j.jsonl"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")


def test_the_store_files_go_to_the_local_exclude_once_and_leave_the_tree_clean(tmp_path: Path, caplog):
    repo = _repo(tmp_path)
    _store_files(tmp_path)
    assert repo.is_dirty(untracked_files=True)
    with caplog.at_level("INFO", logger="tracking"):
        assert exclude_store_files(repo, tmp_path) == ["/mlflow.db*", "/mlartifacts/", "/.tracking/"]
    assert not repo.is_dirty(untracked_files=True)
    assert (
        (tmp_path / ".git/info/exclude")
        .read_text()
        .endswith("# tracking: the MLflow store\n/mlflow.db*\n/mlartifacts/\n/.tracking/\n")
    )
    (said,) = caplog.messages
    assert said.startswith("tracking: added /mlflow.db*, /mlartifacts/, /.tracking/ to ") and "dirty" in said
    assert exclude_store_files(repo, tmp_path) == []  # once


def test_files_the_project_ignores_already_are_left_alone_and_a_subfolder_project_is_prefixed(tmp_path: Path):
    repo = _repo(tmp_path)
    (tmp_path / ".gitignore").write_text("mlflow.db*\nmlartifacts/\n")
    before = (tmp_path / ".git/info/exclude").read_text()
    project = tmp_path / "team" / "project"
    project.mkdir(parents=True)
    assert exclude_store_files(repo, tmp_path) == ["/.tracking/"]
    assert exclude_store_files(repo, project) == ["/team/project/.tracking/"]
    assert (tmp_path / ".git/info/exclude").read_text().startswith(before)
    _store_files(project)
    _store_files(tmp_path)
    run(["git", "add", ".gitignore"], tmp_path)
    run(["git", "commit", "-qm", "ignore"], tmp_path)
    assert not repo.is_dirty(untracked_files=True)
