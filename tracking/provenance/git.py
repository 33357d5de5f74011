"""Git gatherer: commit, branch, dirty flag, the uncommitted diff, and remotes without credentials.

Remote URLs lose any user:password@ part and query string; diff lines that assign a secret-looking
name (password, token, api_key, ...) keep the name and lose the value.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tracking.errors import RepoError

REDACTED = "<redacted>"
_SECRET_ASSIGNMENT = re.compile(
    r"(?P<key>[\w.\-]*(?:password|passwd|secret|token|api[_-]?key|private[_-]?key|credential)s?[\w.\-]*"
    r"[\"']?\s*[:=]\s*)(?P<value>.+)$",
    re.IGNORECASE,
)


def open_repository(root: Path) -> Any:
    """The git repository holding `root`, with at least one commit; a `RepoError` naming the fix otherwise.

    Stages call it before any training, so a missing repository is found before time is spent.
    """
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as err:
        raise RepoError(f"{root} is not inside a git repository; run `git init` and commit, or run from the project") from err
    if not repo.head.is_valid():
        raise RepoError(f"git repository at {repo.working_tree_dir} has no commit yet; make a first commit")
    return repo


def gather_git(root: Path) -> dict[str, Any]:
    """The repository state at `root`."""
    repo = open_repository(root)
    commit = repo.head.commit.hexsha
    branch = None if repo.head.is_detached else repo.active_branch.name
    diff = redact_diff(repo.git.diff("HEAD", "--no-color"))
    untracked = repo.untracked_files
    return {
        "commit": commit,
        "branch": branch,
        "dirty": bool(diff) or bool(untracked),
        "untracked_files": untracked[:200],
        "remotes": {remote.name: strip_credentials(url) for remote in repo.remotes for url in remote.urls},
        "diff": diff,
    }


def strip_credentials(url: str) -> str:
    """The URL without user, password or query: `https://user:tok@host/r.git?t=x` -> `https://host/r.git`."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact_diff(diff: str) -> str:
    """Replace the value in added or removed lines that assign a secret-looking name."""
    lines = []
    for line in diff.splitlines():
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            line = _SECRET_ASSIGNMENT.sub(lambda m: f"{m['key']}{REDACTED}", line)
        lines.append(line)
    return "\n".join(lines) + ("\n" if diff.endswith("\n") else "")


def was_redacted(line: str) -> bool:
    """Whether `redact_diff` replaced this line's value: a secret-looking assignment whose value is the placeholder."""
    match = _SECRET_ASSIGNMENT.search(line)
    return bool(match) and match["value"] == REDACTED
