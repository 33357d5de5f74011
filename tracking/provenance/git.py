"""Git gatherer: commit, branch, dirty flag, the working tree's snapshot, and remotes without credentials.

The working tree is never recorded as text. When its tracked files differ from its commit (changes staged or not,
files `git add`-ed or `git add -N`-ed), it is snapshotted as a git commit object of ours, as `git stash create`
makes one, through a temporary index (the user's index, branches and files are untouched), and kept under
`refs/tracking/snapshots/<sha>` so git never collects it. Untracked files never enter it (they are where `.env`,
`.netrc` and keys live): the run records their count only, and a module the training imported from one is named
in a warning, since no rerun can restore it. The run records the snapshot's sha, its tree (the content's hash)
and a diffstat whose file names pass through the redactor: `tracking rerun` and `tracking diff` read the code
from git, exact to the byte (a secret in it included), and nothing of its content reaches the store, the
artifacts or a server. `git push origin 'refs/tracking/*'` shares the snapshots with a team; a clone without
them is told how to fetch them; `tracking prune-refs` deletes them. Every output DVC declares and every
dvc.lock is left as the commit has it (results, not code; listed in the record as `diff_excludes`).

Remote URLs lose any user:password@ part and query string; the branch's name passes through the redactor.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracking.dvc_files import declared_outputs
from tracking.errors import RepoError
from tracking.redaction import redact_name, strip_credentials

log = logging.getLogger(__name__)

# Where a run's working tree is kept, and how a team shares and fetches it.
SNAPSHOT_REFS = "refs/tracking/snapshots/"
OUR_REFS = "refs/tracking/"  # every ref of ours: what `tracking prune-refs` deletes
PUSH_SNAPSHOTS = "git push origin 'refs/tracking/*'"
FETCH_SNAPSHOTS = "git fetch origin 'refs/tracking/*:refs/tracking/*'"
SNAPSHOT_MESSAGE = "tracking: the working tree of a run (tracking/provenance/git.py)"
MAX_CHANGED_FILES = 200  # the diffstat's files a run records
_SNAPSHOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "tracking",
    "GIT_AUTHOR_EMAIL": "tracking@localhost",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "tracking",
    "GIT_COMMITTER_EMAIL": "tracking@localhost",
    "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
}
_ENCODING = ("utf-8", "surrogateescape")  # a diff's bytes as text and back, unchanged whatever their encoding


def open_repository(root: Path) -> Any:
    """The git repository holding `root`, with at least one commit; a `RepoError` naming the fix otherwise.

    Stages call it before any training, so a missing repository is found before time is spent.
    """
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as err:
        raise RepoError(
            f"{root} is not inside a git repository; run `git init` and commit, or run from the project"
        ) from err
    if not repo.head.is_valid():
        raise RepoError(f"git repository at {repo.working_tree_dir} has no commit yet; make a first commit")
    return repo


def gather_git(root: Path) -> dict[str, Any]:
    """The repository state at `root`, its working tree snapshotted (`snapshot_worktree`) when it is dirty."""
    repo = open_repository(root)
    top = Path(repo.working_tree_dir)
    commit = repo.head.commit.hexsha
    branch = None if repo.head.is_detached else redact_name(repo.active_branch.name)
    excludes = declared_outputs(root, top)
    snapshot = snapshot_worktree(top, excludes)
    untracked = untracked_files(top, excludes)
    warn_untracked_imports(top, untracked)
    return {
        "commit": commit,
        "branch": branch,
        "dirty": snapshot is not None,
        "snapshot": snapshot.sha if snapshot else None,
        "snapshot_tree": snapshot.tree if snapshot else None,
        "changed_files": snapshot.changed[:MAX_CHANGED_FILES] if snapshot else [],
        "untracked_files": len(untracked),
        "remotes": {remote.name: strip_credentials(url) for remote in repo.remotes for url in remote.urls},
        "diff_excludes": excludes,
    }


@dataclass(frozen=True)
class Snapshot:
    """A dirty working tree as a commit object of ours: its sha, its tree's sha, and what changed (redacted names)."""

    sha: str
    tree: str
    changed: list[dict[str, Any]]


def snapshot_worktree(top: Path, excludes: list[str]) -> Snapshot | None:
    """The tracked files of the repository at `top` as a commit object whose parent is HEAD, kept under
    `refs/tracking/snapshots/<sha>`; None when they hold exactly HEAD's tree.

    Made in a temporary index: HEAD's tree, less the files the user's index no longer tracks (`git rm --cached`),
    plus those it tracks that HEAD lacks (`git add`, `git add -N`), each then read from the working tree (`git add
    -u`), and the `excludes` put back as HEAD has them. The user's index and files are untouched, and no untracked
    file enters it. Its author, committer and dates are fixed: the same tree on the same commit is the same sha.
    """
    # HEAD's entries by path, as `update-index --index-info` takes them back: "<mode> <type> <sha>\t<path>".
    entries = {line.split("\t", 1)[1]: line for line in _paths(top, "ls-tree", "-r", "-z", "--full-tree", "HEAD")}
    head, tracked = set(entries), _paths(top, "ls-files", "-z")
    kept_out = _under(head | tracked, excludes)
    with tempfile.TemporaryDirectory(prefix="tracking-index-") as folder:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(folder) / "index"), **_SNAPSHOT_IDENTITY}
        _git(top, env, "read-tree", "HEAD")
        _git_stdin(top, env, head - tracked - kept_out, "update-index", "-z", "--force-remove", "--stdin")
        _git(top, env, "add", "-u")
        added = {path for path in tracked - head - kept_out if (top / path).exists() or (top / path).is_symlink()}
        _git_stdin(top, env, added, "add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul", literal=True)
        _git_stdin(top, env, kept_out, "update-index", "-z", "--force-remove", "--stdin")
        _git_stdin(top, env, {entries[path] for path in kept_out & head}, "update-index", "-z", "--index-info")
        tree = _git(top, env, "write-tree").strip()
    if tree == _git(top, None, "rev-parse", "HEAD^{tree}").strip():
        return None
    sha = _git(top, env, "commit-tree", tree, "-p", "HEAD", "-m", SNAPSHOT_MESSAGE).strip()
    _git(top, None, "update-ref", f"{SNAPSHOT_REFS}{sha}", sha)
    return Snapshot(sha, tree, _diffstat(top, sha))


def untracked_files(top: Path, excludes: list[str]) -> set[str]:
    """The files at `top` that git neither tracks nor ignores, but DVC's declared outputs: what a snapshot leaves
    out, counted in the record (their names are not recorded)."""
    untracked = _paths(top, "ls-files", "-z", "--others", "--exclude-standard")
    return untracked - _under(untracked, excludes)


def warn_untracked_imports(top: Path, untracked: set[str]) -> None:
    """One warning naming the modules this process imported from untracked files (a builder, a loader's helper):
    no snapshot holds them, so `tracking rerun` cannot restore them."""
    imported = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and (resolved := Path(path).resolve()).is_relative_to(top.resolve()):
            imported.add(resolved.relative_to(top.resolve()).as_posix())
    found = sorted(imported & untracked)
    if found:
        log.warning(
            "%d untracked file(s) imported by the training code cannot be reproduced by `tracking rerun`: %s; "
            "`git add` them (or `git add -N`, to track them uncommitted) before training",
            len(found),
            ", ".join(redact_name(path) for path in found),
        )


def _under(paths: set[str], folders: list[str]) -> set[str]:
    """The `paths` equal to one of `folders` or inside one."""
    return {path for path in paths if any(path == folder or path.startswith(f"{folder}/") for folder in folders)}


def _paths(top: Path, *args: str) -> set[str]:
    """The NUL-separated lines a git command prints (with `-z`) at `top`, reading the user's own index."""
    return set(filter(None, _git(top, None, *args).split("\0")))


def _git_stdin(top: Path, env: dict[str, str], paths: set[str], *args: str, literal: bool = False) -> None:
    """A git command fed `paths`, NUL-separated, on its standard input; nothing run for none. With `literal`, a
    path is never read as a pattern (a file named `*.py` is itself only)."""
    if not paths:
        return
    env = {**env, "GIT_LITERAL_PATHSPECS": "1"} if literal else env
    done = subprocess.run(
        ["git", *args], cwd=top, env=env, input=encode_diff("\0".join(sorted(paths))), capture_output=True
    )
    if done.returncode != 0:
        said = decode_diff(done.stderr).strip().splitlines()
        raise RepoError(f"`git {args[0]}` failed in {top}: {redact_name(said[-1] if said else str(done.returncode))}")


def _diffstat(top: Path, sha: str) -> list[dict[str, Any]]:
    """Each file the snapshot changes against its parent: its name (redacted), lines added and deleted (None for
    a binary file), as `git diff --numstat` counts them."""
    fields = _git(top, None, "diff", "--numstat", "-z", "--no-renames", f"{sha}^", sha).split("\0")
    changed = []
    for field in fields:
        if field:
            added, deleted, path = field.split("\t", 2)
            changed.append(
                {
                    "path": redact_name(path),
                    "added": None if added == "-" else int(added),
                    "deleted": None if deleted == "-" else int(deleted),
                }
            )
    return changed


def has_snapshot(top: Path, sha: str) -> bool:
    """Whether the commit object `sha` (a run's snapshot) is in the repository at `top`."""
    return subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=top, capture_output=True).returncode == 0


def our_refs(top: Path) -> dict[str, str]:
    """Each ref of ours (`refs/tracking/...`) in the repository at `top`, with the commit it names."""
    listed = _git(top, None, "for-each-ref", "--format=%(refname) %(objectname)", OUR_REFS).splitlines()
    return dict(line.split(" ", 1) for line in listed)


def delete_refs(top: Path, refs: list[str]) -> None:
    """Delete the `refs` in the repository at `top`, all or none (one `git update-ref --stdin` transaction)."""
    if refs:
        done = subprocess.run(
            ["git", "update-ref", "--stdin"], cwd=top, input="".join(f"delete {ref}\n" for ref in refs).encode(),
            capture_output=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise RepoError(f"`git update-ref` failed in {top}: {redact_name(decode_diff(done.stderr).strip())}")


def missing_snapshot(sha: str, run_id: str) -> str:
    """What to say of a run whose snapshot this clone lacks: made in another clone, shared by a push of our refs."""
    return (
        f"the working tree of run {run_id} (snapshot {sha[:12]}) is not in this clone: the run was made in another "
        f"one; fetch the snapshots with `{FETCH_SNAPSHOTS}` (the clone that made it shares them with "
        f"`{PUSH_SNAPSHOTS}`)"
    )


def _git(top: Path, env: dict[str, str] | None, *args: str) -> str:
    """A git command's output at `top`; a `RepoError` with git's own words when it fails."""
    done = subprocess.run(["git", *args], cwd=top, env=env, capture_output=True)
    if done.returncode != 0:
        said = decode_diff(done.stderr).strip().splitlines()
        raise RepoError(f"`git {args[0]}` failed in {top}: {redact_name(said[-1] if said else str(done.returncode))}")
    return decode_diff(done.stdout)


def decode_diff(data: bytes) -> str:
    """A diff's bytes as text; `encode_diff` gives back the same bytes, even for files not in UTF-8."""
    return data.decode(*_ENCODING)


def encode_diff(diff: str) -> bytes:
    return diff.encode(*_ENCODING)
