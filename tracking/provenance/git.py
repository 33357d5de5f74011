"""Git gatherer: commit, branch, dirty flag, the uncommitted diff, and remotes without credentials.

The diff is git's own bytes (CRLF lines, missing final newlines, modes, renames kept), so `git apply` re-creates
the tree byte for byte; it leaves out every output DVC declares and every dvc.lock (results, not code; listed
in the record as `diff_excludes`). A binary file appears as git's "Binary files ... differ" line only: a diff
of it could be neither checked for secrets nor kept small, so `tracking rerun` refuses such a run.

Remote URLs lose any user:password@ part and query string. In the diff (added, removed and context lines),
assignments to a secret-looking name (password, token, api_key, ...) keep the name and lose the value,
URLs lose their user:password@ part, and known token formats (ghp_..., AKIA..., sk-..., JWTs) are replaced;
a warning on stderr says how many lines were changed, since the captured diff is then no longer exact.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tracking.errors import RepoError
from tracking.provenance.dvc import declared_outputs

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
        print(
            f"warning: {redacted} line(s) of the uncommitted diff hold secret-looking values; they are redacted in "
            "the captured provenance/uncommitted.diff, which is therefore not exact; keep secrets out of tracked files "
            "(e.g. in environment variables) to capture the diff as it is",
            file=sys.stderr,
        )
    untracked = [path for path in repo.untracked_files if not any(_within(path, output) for output in excludes)]
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

    Context lines are redacted too: a secret committed earlier would otherwise leave with the diff. Lines are
    split at "\n" only and a line's "\r" is kept, so every line left alone stays byte for byte as it was.
    """
    return "\n".join(_redact_line(line) for line in diff.split("\n"))


def _redact_line(line: str) -> str:
    if line.startswith(_DIFF_HEADERS):
        return line
    body, end = (line[:-1], "\r") if line.endswith("\r") else (line, "")
    body = _SECRET_ASSIGNMENT.sub(lambda m: f"{m['key']}{REDACTED}", body)
    body = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", body)
    return _KNOWN_TOKEN.sub(REDACTED, body) + end


def was_redacted(line: str) -> bool:
    """Whether `redact_diff` may have changed this line: it holds the placeholder (an assignment's value, a URL's
    user:password or a token); a line that holds '<redacted>' literally is counted too, erring on the safe side."""
    return REDACTED in line
