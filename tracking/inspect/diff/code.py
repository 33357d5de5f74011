"""The code group: files that differ between the runs' working trees as git holds them (snapshot or commit; the
uncommitted diffs of runs of earlier versions), and the DVC code dependencies each run logged."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from tracking.inspect.diff.changes import Change, GroupDiff, compare_fields
from tracking.inspect.diff.runs import RunSnapshot
from tracking.layout import OUTPUT_FOLDERS
from tracking.names import DVC_DEPS_SECTION, GIT_COMMIT_TAG, GIT_SNAPSHOT_TAG, GIT_UNTRACKED_FIELD
from tracking.provenance.git import missing_snapshot

# Files whose changes other groups already report (params, data pins), that DVC writes (dvc.lock, the .gitignore
# files listing its outputs), that are outputs, or prose (Markdown, reStructuredText: a README edit trains nothing,
# and called code it chose the ALGO band and was named as the cause). Outputs the repository's dvc.yaml declares
# elsewhere (a team's metrics.json) are left out too (`declared_outputs`).
_NOT_CODE = re.compile(
    rf"(^|/)(params\.yaml|baseline\.yaml|dvc\.lock|\.gitignore|[^/]*\.dvc|[^/]*\.(md|rst))$"
    rf"|^({'|'.join(OUTPUT_FOLDERS)})/"
)


def shared_stages(a: RunSnapshot, b: RunSnapshot) -> set[str]:
    """The DVC stages whose dependency hashes both runs logged.

    A stage only one run logged says how that run was made (a calibration repeat is made by `calibrate`, not
    by `train`), not that its inputs changed; the data content and the code are compared in full anyway.
    """
    return {key.split(".", 1)[0] for key in a.provenance(DVC_DEPS_SECTION)} & {
        key.split(".", 1)[0] for key in b.provenance(DVC_DEPS_SECTION)
    }


def dvc_deps(run: RunSnapshot, data: bool, stages: set[str]) -> dict[str, str]:
    """The DVC dependencies of `stages` logged with the run: data ones (folders, paths under the project's
    data/) or code ones. Keys are "stage.path"; a code folder named data (tracking/data/) is still code."""
    return {
        key: value
        for key, value in run.provenance(DVC_DEPS_SECTION).items()
        if key.split(".", 1)[0] in stages
        and (value.endswith(".dir") or key.split(".", 1)[1].startswith("data/")) == data
    }


def without_moves(a: dict[str, str], b: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The dependencies of two runs without those that only moved: a path only A has and a path only B has, in
    the same stage with the same content hash, are one file renamed, which changes nothing a stage computes."""
    moved_a = {key: value for key, value in a.items() if key not in b}
    moved_b = {key: value for key, value in b.items() if key not in a}
    pairs = {(key.split(".", 1)[0], value) for key, value in moved_a.items()} & {
        (key.split(".", 1)[0], value) for key, value in moved_b.items()
    }

    def keep(deps: dict[str, str], only: dict[str, str]) -> dict[str, str]:
        return {
            key: value for key, value in deps.items() if key not in only or (key.split(".", 1)[0], value) not in pairs
        }

    return keep(a, moved_a), keep(b, moved_b)


def code_group(a: RunSnapshot, b: RunSnapshot, repo: Path | None, stages: set[str]) -> GroupDiff:
    """Code files that differ: between the runs' working trees as git holds them (each run's snapshot, or its
    commit when it ran on a clean tree) when the repo has both, and in the uncommitted diffs runs of earlier
    versions logged. A snapshot this clone lacks is named, with how to fetch it.

    Changes to params.yaml, *.dvc pins, dvc.lock and outputs are left to the data and params groups.
    """
    commit_a, commit_b = a.tags.get(GIT_COMMIT_TAG, ""), b.tags.get(GIT_COMMIT_TAG, "")
    tree_a, tree_b = a.tags.get(GIT_SNAPSHOT_TAG) or commit_a, b.tags.get(GIT_SNAPSHOT_TAG) or commit_b
    per_file_a, per_file_b = split_diff(a.diff), split_diff(b.diff)
    dirty = {path for path in set(per_file_a) | set(per_file_b) if per_file_a.get(path) != per_file_b.get(path)}
    between: set[str] = set()
    changes = []
    missing = ""
    if tree_a != tree_b:
        found = _files_between(repo, tree_a, tree_b)
        if found is None:
            snapshots = GIT_SNAPSHOT_TAG in a.tags or GIT_SNAPSHOT_TAG in b.tags
            changes.append(Change("git.snapshot" if snapshots else "git.commit", tree_a, tree_b))
            lacking = [run for run in (a, b) if _lacks_snapshot(repo, run)]
            missing = "".join(f"; {missing_snapshot(run.tags[GIT_SNAPSHOT_TAG], run.run_id)}" for run in lacking)
        between = found or set()
    outputs = _declared_outputs(repo)
    for path in sorted((dirty | between) - {p for p in dirty | between if _NOT_CODE.search(p) or p in outputs}):
        if path in dirty:
            changes.append(Change(f"file {path}", _digest(per_file_a.get(path)), _digest(per_file_b.get(path))))
        else:
            changes.append(Change(f"file {path}", f"as in {_shown(a, tree_a)}", f"as in {_shown(b, tree_b)}"))
    compared, deps = compare_fields(
        *without_moves(dvc_deps(a, data=False, stages=stages), dvc_deps(b, data=False, stages=stages))
    )
    changes += [Change(f"dvc dep {change.key}", change.a, change.b) for change in deps]
    note = f"commit {commit_a[:10] or 'not logged'}" + (
        "" if commit_a == commit_b else f" -> {commit_b[:10] or 'not logged'}"
    )
    if not changes and (dirty or between):
        note += "; only params, data pins, outputs or prose changed there"
    return GroupDiff(
        "code", compared + len(dirty | between | set(per_file_a)) + 1, changes, note + missing + _untracked(a, b)
    )


def _untracked(a: RunSnapshot, b: RunSnapshot) -> str:
    """What the code group says of the untracked files beside each run's working tree: no snapshot holds them, so
    a difference there cannot be shown, only that they were present."""
    counts = {label: run.tags.get(GIT_UNTRACKED_FIELD, "0") for label, run in (("A", a), ("B", b))}
    present = [f"{count} beside run {label}" for label, count in counts.items() if count != "0"]
    return f"; untracked file(s) were present ({', '.join(present)}), in no snapshot" if present else ""


def _shown(run: RunSnapshot, tree: str) -> str:
    """A run's working tree as `tracking diff` names it: its commit, or the snapshot of its uncommitted changes."""
    return f"snapshot {tree[:10]}" if GIT_SNAPSHOT_TAG in run.tags else tree[:10]


def _lacks_snapshot(repo: Path | None, run: RunSnapshot) -> bool:
    """Whether `run` recorded a snapshot that the repository at `repo` does not hold (made in another clone)."""
    from tracking.provenance.git import has_snapshot

    snapshot = run.tags.get(GIT_SNAPSHOT_TAG)
    return bool(snapshot) and repo is not None and not has_snapshot(repo, snapshot)


def _declared_outputs(repo: Path | None) -> set[str]:
    """The outputs the dvc.yaml files of the repository at `repo` declare, relative to its git top folder (none
    outside a git repository, or where a dvc.yaml cannot be read: the files then count as code, as before)."""
    if repo is None:
        return set()
    from git import InvalidGitRepositoryError, NoSuchPathError, Repo

    from tracking.dvc_files import declared_outputs
    from tracking.errors import RepoError

    try:
        top = Path(Repo(repo, search_parent_directories=True).working_tree_dir or repo)
        return set(declared_outputs(repo, top))
    except (InvalidGitRepositoryError, NoSuchPathError, RepoError, subprocess.CalledProcessError, OSError):
        return set()


def split_diff(text: str) -> dict[str, str]:
    """A unified `git diff` split into {path: that file's part}."""
    parts: dict[str, str] = {}
    path, lines = None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            if path is not None:
                parts[path] = "".join(lines)
            path, lines = line.rstrip("\n").split(" b/", 1)[-1], []
        lines.append(line)
    if path is not None:
        parts[path] = "".join(lines)
    return parts


def _files_between(repo: Path | None, commit_a: str, commit_b: str) -> set[str] | None:
    """Paths whose content changed between two commits, or None when the local repository lacks either.

    A file moved without a change to its content (git's rename at 100% similarity) is not among them: the
    code is the same, only its path is new. A file moved and edited is listed by its new path.
    """
    if repo is None or not commit_a or not commit_b:
        return None
    from git import GitCommandError, InvalidGitRepositoryError, NoSuchPathError, Repo

    try:
        status = Repo(repo, search_parent_directories=True).git.diff(
            "--name-status", "--find-renames", "-z", commit_a, commit_b
        )
    except (GitCommandError, InvalidGitRepositoryError, NoSuchPathError):
        return None
    return changed_paths(status)


def changed_paths(name_status: str) -> set[str]:
    """The paths of `git diff --name-status --find-renames -z` whose content changed (pure renames left out)."""
    fields, paths = name_status.split("\0"), set()
    index = 0
    while index < len(fields) and fields[index]:
        status = fields[index]
        if status[0] in "RC":
            if status != "R100":
                paths.add(fields[index + 2])
            index += 3
        else:
            paths.add(fields[index + 1])
            index += 2
    return paths


def _digest(text: str | None) -> str | None:
    return None if text is None else "diff sha256 " + hashlib.sha256(text.encode()).hexdigest()[:12]
