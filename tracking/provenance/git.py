"""Git gatherer: commit, branch, dirty flag, the uncommitted diff, and remotes without credentials.

The diff is git's own bytes (CRLF lines, missing final newlines, modes, renames kept), so `git apply` re-creates
the tree byte for byte; it leaves out every output DVC declares and every dvc.lock (results, not code; listed
in the record as `diff_excludes`). A binary file appears as git's "Binary files ... differ" line only: a diff
of it could be neither checked for secrets nor kept small, so `tracking rerun` refuses such a run.

Remote URLs lose any user:password@ part and query string; a token in a file's name is redacted in the diff's
headers and the untracked files' list. In the diff (added, removed and context lines),
assignments to a secret-looking name (password, token, api_key, ...) keep the name and lose the value,
URLs lose their user:password@ part, known token formats and private key blocks are replaced (the rules:
tracking/redaction.py); a warning says how many lines were changed, since the captured diff is
then no longer exact.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

from tracking.dvc_files import declared_outputs
from tracking.errors import RepoError
from tracking.redaction import redact_lines, redact_name, strip_credentials

log = logging.getLogger(__name__)

_DIFF_HEADERS = ("diff --git ", "index ", "--- ", "+++ ")
# Whatever the user's git configuration says: plain a/ b/ prefixes, no colour, no external or text-converting diff.
_DIFF = (
    "git",
    "diff",
    "HEAD",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)
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
    """The repository state at `root`."""
    repo = open_repository(root)
    top = Path(repo.working_tree_dir)
    commit = repo.head.commit.hexsha
    branch = None if repo.head.is_detached else repo.active_branch.name
    excludes = declared_outputs(root, top)
    raw = uncommitted_diff(top, excludes)
    diff = redact_diff(raw)
    redacted = sum(before != after for before, after in zip(raw.split("\n"), diff.split("\n"), strict=False))
    if redacted:
        log.warning(
            "%d line(s) of the uncommitted diff hold secret-looking values; they are redacted in the captured "
            "provenance/uncommitted.diff, which is therefore not exact; keep secrets out of tracked files (e.g. in "
            "environment variables) to capture the diff as it is",
            redacted,
        )
    untracked = [
        redact_name(path) for path in repo.untracked_files if not any(_within(path, output) for output in excludes)
    ]
    return {
        "commit": commit,
        "branch": branch,
        "dirty": bool(diff) or bool(untracked),
        "untracked_files": untracked[:200],
        "remotes": {remote.name: strip_credentials(url) for remote in repo.remotes for url in remote.urls},
        "diff": diff,
        "diff_redacted_lines": redacted,
        "diff_excludes": excludes,
    }


def uncommitted_diff(top: Path, excludes: list[str]) -> str:
    """`git diff HEAD` of the repository at `top` (staged and unstaged changes), without the `excludes` paths."""
    done = subprocess.run(
        [*_DIFF, "--", ".", *(f":(exclude,literal){path}" for path in excludes)], cwd=top, capture_output=True
    )
    if done.returncode != 0:
        raise RepoError(f"`git diff HEAD` failed in {top}: {decode_diff(done.stderr).strip()}")
    return decode_diff(done.stdout)


def decode_diff(data: bytes) -> str:
    """A diff's bytes as text; `encode_diff` gives back the same bytes, even for files not in UTF-8."""
    return data.decode(*_ENCODING)


def encode_diff(diff: str) -> bytes:
    return diff.encode(*_ENCODING)


def _within(path: str, output: str) -> bool:
    return path == output or path.startswith(output.rstrip("/") + "/")


def redact_diff(diff: str) -> str:
    """The diff with secret-looking values replaced by '<redacted>' in every line, and tokens in file names in the
    file headers (`diff --git`, `---`, `+++`; `rename from`/`to` lines are judged as any other line).

    Context lines are redacted too: a secret committed earlier would otherwise leave with the diff. Lines are
    split at "\n" only and a line's "\r" is kept, so every line left alone stays byte for byte as it was.
    """
    return "\n".join(redact_lines(diff.split("\n"), names=_DIFF_HEADERS))
