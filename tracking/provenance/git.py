"""Git gatherer: commit, branch, dirty flag, the uncommitted diff, and remotes without credentials.

Remote URLs lose any user:password@ part and query string. In the diff (added, removed and context lines),
assignments to a secret-looking name (password, token, api_key, ...) keep the name and lose the value,
URLs lose their user:password@ part, and known token formats (ghp_..., AKIA..., sk-..., JWTs) are replaced;
a warning on stderr says how many lines were changed, since the captured diff is then no longer exact.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tracking.errors import RepoError

REDACTED = "<redacted>"
_SECRET_ASSIGNMENT = re.compile(
    r"(?P<key>[\w.\-]*(?:password|passwd|secret|token|api[_-]?key|private[_-]?key|credential)s?[\w.\-]*"
    r"[\"'\]]*\s*[:=]\s*)(?P<value>.+)$",
    re.IGNORECASE,
)
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)[^\s/@'\"]+@", re.IGNORECASE)
_KNOWN_TOKEN = re.compile(
    r"\b(?:(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_\-]{16,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}|sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+)"
)
_DIFF_HEADERS = ("diff --git ", "index ", "--- ", "+++ ")


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
    raw = repo.git.diff("HEAD", "--no-color")
    diff = redact_diff(raw)
    redacted = sum(before != after for before, after in zip(raw.splitlines(), diff.splitlines()))
    if redacted:
        print(f"warning: {redacted} line(s) of the uncommitted diff hold secret-looking values; they are redacted in "
              "the captured provenance/uncommitted.diff, which is therefore not exact; keep secrets out of tracked files "
              "(e.g. in environment variables) to capture the diff as it is", file=sys.stderr)
    untracked = repo.untracked_files
    return {
        "commit": commit,
        "branch": branch,
        "dirty": bool(diff) or bool(untracked),
        "untracked_files": untracked[:200],
        "remotes": {remote.name: strip_credentials(url) for remote in repo.remotes for url in remote.urls},
        "diff": diff,
        "diff_redacted_lines": redacted,
    }


def strip_credentials(url: str) -> str:
    """The URL without user, password or query: `https://user:tok@host/r.git?t=x` -> `https://host/r.git`."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.username is None and not parts.query:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact_diff(diff: str) -> str:
    """The diff with secret-looking values replaced by '<redacted>' in every line but the file headers.

    Context lines are redacted too: a secret committed earlier would otherwise leave with the diff.
    """
    lines = []
    for line in diff.splitlines():
        if not line.startswith(_DIFF_HEADERS):
            line = _SECRET_ASSIGNMENT.sub(lambda m: f"{m['key']}{REDACTED}", line)
            line = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", line)
            line = _KNOWN_TOKEN.sub(REDACTED, line)
        lines.append(line)
    return "\n".join(lines) + ("\n" if diff.endswith("\n") else "")


def was_redacted(line: str) -> bool:
    """Whether `redact_diff` may have changed this line: it holds the placeholder (an assignment's value, a URL's
    user:password or a token); a line that holds '<redacted>' literally is counted too, erring on the safe side."""
    return REDACTED in line
