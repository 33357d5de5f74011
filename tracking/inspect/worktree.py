"""A temporary git worktree at a logged commit, with the run's working tree checked out of its snapshot (or, for a
run of an earlier version, its logged diff applied), removed whatever happens.

`tracking rerun` re-creates a run's code here, so the user's own working tree, index and branches are
never touched: the worktree is detached (no branch is created) and pruned afterwards.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracking.errors import RerunError
from tracking.names import GIT_SNAPSHOT_TAG
from tracking.provenance.git import encode_diff, has_snapshot, missing_snapshot, open_repository
from tracking.redaction import was_redacted
from tracking.run.lifecycle import deferred_interrupts

_FILE_HEADER = re.compile(r"^\+\+\+ (?:b/)?(?P<path>.+)$")
_BINARY = re.compile(r"^Binary files (?:a/)?(?P<old>.+) and (?:b/)?(?P<new>.+) differ$")


@contextmanager
def temporary_worktree(root: Path, commit: str) -> Iterator[Path]:
    """Yield the DVC project folder inside a detached worktree of `root`'s repository at `commit`.

    The worktree lives in a fresh temporary folder; on exit it is removed (`git worktree remove --force`,
    then `git worktree prune`) and the folder deleted, on success, on error, on Ctrl-C and on SIGTERM alike (with
    `interrupts_raise` in force, as `tracking rerun` has it).
    """
    import git

    repo = open_repository(root)
    top = Path(repo.working_tree_dir).resolve()
    try:
        repo.commit(commit)
    except (ValueError, git.BadName) as err:
        raise RerunError(
            f"commit {commit} is not in the git repository at {top}; fetch it (`git fetch --all`) and re-run"
        ) from err
    folder = Path(tempfile.mkdtemp(prefix="tracking-rerun-"))
    tree = folder / top.name
    try:
        # git, stopped mid-checkout, would go on writing into the folder being removed: a Ctrl-C or SIGTERM
        # waits until the worktree is made, then leaves through the clean-up below.
        with deferred_interrupts():
            repo.git.worktree("add", "--detach", str(tree), commit)
        yield tree / root.resolve().relative_to(top)
    finally:
        # Not created, or half-created: deleting the folder and pruning below clean up either way.
        with deferred_interrupts():
            with contextlib.suppress(git.GitCommandError):
                repo.git.worktree("remove", "--force", str(tree))
            shutil.rmtree(folder, ignore_errors=True)
            repo.git.worktree("prune")


def restore_code(tree: Path, tags: dict[str, str], diff: str, run_id: str) -> list[str]:
    """Make the worktree `tree` hold the run's code: its snapshot (`prov.git.snapshot`) checked out, files and
    index, exactly; or the uncommitted diff a run of an earlier version logged, applied. Return the files changed."""
    snapshot = tags.get(GIT_SNAPSHOT_TAG)
    if not snapshot:
        return apply_diff(tree, diff, run_id)
    top = _toplevel(tree)
    if not has_snapshot(top, snapshot):
        raise RerunError(missing_snapshot(snapshot, run_id))
    # The snapshot's tree into the index and the files; HEAD stays at the run's commit, so the re-created run's
    # own snapshot is this one's tree again.
    subprocess.run(["git", "read-tree", "-u", "--reset", snapshot], cwd=top, capture_output=True, check=True)
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "-z", "HEAD"], cwd=top, capture_output=True, text=True, check=True
    )
    return [name for name in staged.stdout.split("\0") if name]


def apply_diff(tree: Path, diff: str, run_id: str) -> list[str]:
    """Apply the logged uncommitted diff at the top of the worktree, to the files and the index; return the
    files it changes.

    git applies it byte for byte (line endings, modes, renames, new and deleted files). Applied to the index
    too, new files are part of the diff the re-created run logs, as they were of the original's. A diff whose
    secret-looking values were redacted, or that names binary files (whose content a logged diff does not
    carry), cannot re-create the code faithfully, so it is refused, naming the files.
    """
    redacted = redacted_files(diff)
    if redacted:
        raise RerunError(
            f"the uncommitted diff logged with run {run_id} has secret values redacted in {', '.join(redacted)}, so its code "
            "cannot be re-created faithfully; commit that change with the secret read from the environment instead, and train again"
        )
    binary = binary_files(diff)
    if binary:
        raise RerunError(
            f"the uncommitted diff logged with run {run_id} changes binary file(s) {', '.join(binary)}, whose content "
            "it does not hold, so its code cannot be re-created; commit them (or track them with DVC) and train again"
        )
    if not diff:
        return []
    top = _toplevel(tree)
    patch = top.parent / "uncommitted.diff"
    # git ends a diff with a newline; the runs logged before diffs were taken as git's own bytes lack it.
    patch.write_bytes(encode_diff(diff if diff.endswith("\n") else diff + "\n"))
    done = subprocess.run(
        ["git", "apply", "--index", "--whitespace=nowarn", str(patch)], cwd=top, capture_output=True, text=True
    )
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise RerunError(
            f"the uncommitted diff logged with run {run_id} does not apply to its commit ({reason}); "
            "the run cannot be re-created from what was logged"
        )
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "-z", "HEAD"], cwd=top, capture_output=True, text=True, check=True
    )
    return [name for name in staged.stdout.split("\0") if name]


def binary_files(diff: str) -> list[str]:
    """Files the diff names only as git's "Binary files a/... and b/... differ" line (the new name, or the old one if deleted)."""
    found = []
    for line in diff.split("\n"):
        match = _BINARY.match(line)
        if match:
            found.append(match["old"] if match["new"] == "/dev/null" else match["new"])
    return found


def redacted_files(diff: str) -> list[str]:
    """Files whose name, or whose diff's added, removed or context lines, carry the redaction placeholder."""
    found: list[str] = []
    current = "?"
    for line in diff.split("\n"):
        match = _FILE_HEADER.match(line)
        if match:
            current = match["path"]
            if was_redacted(line) and current not in found:  # a token in the file's name
                found.append(current)
        elif line[:1] in "+- " and not line.startswith("---") and was_redacted(line[1:]) and current not in found:
            found.append(current)
    return found


def _toplevel(path: Path) -> Path:
    done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())
