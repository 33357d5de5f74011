"""The `tracking` commands over the project's own files: `provenance` (the record a run here would log, from our
params or a team's own), `pin-data` (the prepared data's hash written to params.yaml) and `baseline` (the training
sections frozen for calibration); and a path or `--seeds` option read as every command reads it. Kept apart from
tracking/cli.py's parser; imports stay inside the commands so that `tracking --help` starts fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)


def provenance_command(args: argparse.Namespace) -> None:
    from tracking.config.params_file import load_params
    from tracking.determinism.process import reproducible_process, seed_frameworks
    from tracking.errors import ParamsError
    from tracking.provenance.git import open_repository
    from tracking.store.location import find_project

    root = find_project() or Path.cwd()
    open_repository(root)  # any git project will do (DVC's too), and nothing heavy loads before this is known
    path = at_root(args.params, root)
    try:
        params = None if args.seeds else load_params(path)
    except ParamsError as err:
        script_provenance(
            root, path, [], f"{err.problem}; recording it as a team's own params (--seeds SOURCE=KEY names its seeds)"
        )
        return
    if params is None:
        script_provenance(root, path, args.seeds)
        return
    seeds = reproducible_process(params)
    from tracking.determinism.settings import as_record
    from tracking.provenance import capture

    effective = seed_frameworks(params, seeds)
    record = capture(root, seeds.as_dict(), as_record(params.determinism, effective))
    json.dump(record, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def script_provenance(root: Path, path: Path, pairs: list[str], note: str | None = None) -> None:
    """`tracking provenance` for a team's own params: the record `tracking.start` would log here; `note` says why
    (after the process restarted, so it is said once)."""
    from tracking.config.params import DeterminismParams
    from tracking.determinism.process import apply_determinism
    from tracking.script.interpreter_setup import reproducible_script
    from tracking.script.provenance_record import script_record
    from tracking.script.team_params import read_params

    read = read_params(path, seed_mapping(pairs))
    determinism = DeterminismParams()
    reproducible_script(read.seeds, determinism)
    if note:
        log.info(note)
    effective = apply_determinism(determinism, read.seeds)
    seeds = {"base": read.seeds.base, "hash": read.seeds.hash}
    record = script_record(root, read, determinism, effective, seeds, None)
    json.dump(record, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def seed_mapping(pairs: Sequence[str]) -> dict[str, str | int]:
    """`--seeds SOURCE=KEY` options as tracking.start(seeds=...) takes them (a number is the seed itself)."""
    from tracking.errors import UsageError

    mapping: dict[str, str | int] = {}
    for pair in pairs:
        name, sep, key = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--seeds {pair!r}: expected SOURCE=KEY", fix="e.g. --seeds base=train.seed")
        mapping[name] = int(key) if key.isdigit() else key
    return mapping


def pin_data_command(args: argparse.Namespace) -> None:
    from tracking.data.pinning import pin_prepared_data
    from tracking.store.location import project_root

    root = project_root()
    digest, pin_file = pin_prepared_data(root, at_root(args.params, root))
    print(f"pinned data.sha256 = {digest} in {args.params}; commit it with {pin_file}")


def baseline_command(args: argparse.Namespace) -> None:
    from tracking.config.baseline import freeze
    from tracking.config.params_file import load_params
    from tracking.errors import RepoError
    from tracking.store.location import project_root

    root = project_root()
    params = at_root(args.params, root)
    folder = params.resolve().parent
    if folder != root.resolve() and (folder / "dvc.yaml").is_file():
        # Its baseline would land in the project above, which calibrates from its own params.
        raise RepoError(
            f"{params} belongs to the pipeline in {folder} (its dvc.yaml is there), which is not a DVC project: "
            f"the baseline would be written to {root}",
            fix=f"make {folder} a project of its own (`git init && dvc init` there, as its README says), or run "
            f"from {root} for that project's params.yaml",
        )
    target = load_params(params).calibration.baseline
    freeze(params, root / target)
    print(f"froze the training sections of {args.params} into {target}; commit it")


def at_root(path: Path, root: Path) -> Path:
    """`path` as given where it exists or is absolute, else the same path from the project root: a command run
    from a subfolder reads the project's params.yaml."""
    return path if path.is_absolute() or path.exists() else root / path
