"""`tracking diff` across a reorganisation of the code: a file moved without an edit is not a code change,
neither between commits nor among DVC's dependency hashes, and a code folder named `data/` is still code."""

from __future__ import annotations

from pathlib import Path

from conftest import run

from tracking.inspect.diff.code import _files_between, dvc_deps, without_moves
from tracking.inspect.diff.runs import RunSnapshot


def commit_all(repo: Path, message: str) -> str:
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", message], repo)
    return run(["git", "rev-parse", "HEAD"], repo).stdout.strip()


def test_a_file_moved_unchanged_is_not_a_code_change_and_one_moved_and_edited_is(tmp_path: Path):
    run(["git", "init", "-q", "-b", "main"], tmp_path)
    run(["git", "config", "user.email", "t@example.com"], tmp_path)
    run(["git", "config", "user.name", "t"], tmp_path)
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(20))
    (tmp_path / "dataset.py").write_text(body)
    (tmp_path / "hashing.py").write_text(body.replace("x +", "x *"))
    before = commit_all(tmp_path, "flat")
    (tmp_path / "pkg/data").mkdir(parents=True)
    (tmp_path / "dataset.py").rename(tmp_path / "pkg/data/dataset.py")
    (tmp_path / "hashing.py").rename(tmp_path / "pkg/data/hashing.py")
    (tmp_path / "pkg/data/hashing.py").write_text(body.replace("x +", "x *") + "def g(x):\n    return x\n")
    after = commit_all(tmp_path, "in folders")
    assert _files_between(tmp_path, before, after) == {"pkg/data/hashing.py"}


def snapshot(deps: dict[str, str]) -> RunSnapshot:
    tags = {f"prov.dvc.deps.{key}": value for key, value in deps.items()}
    return RunSnapshot("0" * 32, "r", "1", "FINISHED", params={}, metrics={}, tags=tags, manifest=None, diff="")


def test_dependencies_that_only_moved_are_paired_and_dropped():
    a = {"prepare.tracking/dataset.py": "c0b5", "train.tracking/params.py": "aaaa", "train.pipelines/train.py": "1"}
    b = {
        "prepare.tracking/data/dataset.py": "c0b5",
        "train.tracking/config/params.py": "bbbb",
        "train.pipelines/train.py": "2",
    }
    kept_a, kept_b = without_moves(a, b)
    assert kept_a == {"train.tracking/params.py": "aaaa", "train.pipelines/train.py": "1"}
    assert kept_b == {"train.tracking/config/params.py": "bbbb", "train.pipelines/train.py": "2"}


def test_a_code_folder_named_data_is_code_and_the_projects_data_folder_is_data():
    run_ = snapshot(
        {"prepare.tracking/data/dataset.py": "c0b5", "prepare.data/raw": "49d4.dir", "train.data/prepared": "8308.dir"}
    )
    assert dvc_deps(run_, data=False, stages={"prepare", "train"}) == {"prepare.tracking/data/dataset.py": "c0b5"}
    assert set(dvc_deps(run_, data=True, stages={"prepare", "train"})) == {"prepare.data/raw", "train.data/prepared"}


def test_where_runs_train_and_how_they_are_judged_are_not_hyperparameters():
    from tracking.inspect.diff.ranked_groups import group_diffs

    def run(**params: str) -> RunSnapshot:
        return RunSnapshot("0" * 32, "r", "1", "FINISHED", params, metrics={}, tags={}, manifest=None, diff="")

    a = run(**{"train.epochs": "20", "compute.executor": "local", "compute.system_metrics": "true"})
    b = run(**{"train.epochs": "20", "compute.executor": "ray", "compute.system_metrics": "false"})
    params = next(group for group in group_diffs(a, b) if group.name == "params")
    assert not params.changes and "compute.executor" not in str(params)
    changed = run(**{"train.epochs": "30", "compute.executor": "ray", "compute.system_metrics": "false"})
    assert [change.key for change in next(g for g in group_diffs(a, changed) if g.name == "params").changes] == [
        "train.epochs"
    ]
