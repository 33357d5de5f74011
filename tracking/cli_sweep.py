"""The `tracking sweep` command: the candidates of many experiments (a `dvc exp run --queue` grid, named runs, a
filter or a parent run) judged as one family against the calibration, the best confirmed on fresh runs
(tracking/sweeps/)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tracking.entry import at_least
from tracking.layout import SWEEP_REPORT


def add_sweep_command(commands: argparse._SubParsersAction, probability: Callable[[str], float]) -> None:
    """Add `tracking sweep` to the `tracking` command's subcommands; `probability` reads --alpha as the others do."""
    sweep = commands.add_parser("sweep", help="judge a sweep's experiments as one family; confirm the best")
    sweep.add_argument(
        "experiments",
        nargs="*",
        metavar="EXP",
        help="the sweep's DVC experiment names (or run ids or names, as `tracking diff` takes them)",
    )
    which = sweep.add_mutually_exclusive_group()
    which.add_argument(
        "--all",
        action="store_true",
        help="every finished experiment queued from this commit and judged against this checkout's calibration "
        "(their compare stage's tag noise.sweep)",
    )
    which.add_argument("--filter", default="", help="MLflow filter string selecting the candidate runs")
    which.add_argument("--parent", metavar="RUN_ID", help="the candidates are this run's children")
    sweep.add_argument("--alpha", type=probability, default=0.05, help="error rate of the whole family (default: 0.05)")
    sweep.add_argument(
        "--fdr",
        action="store_true",
        help="control the false discovery rate (Benjamini-Hochberg) instead of the family-wise error (Holm)",
    )
    sweep.add_argument(
        "--confirm",
        type=at_least(1),
        default=0,
        metavar="N",
        help="re-train the best candidate on N fresh seeds and judge those runs alone (kept like other repeats)",
    )
    sweep.add_argument(
        "--study",
        metavar="PARAM",
        help="also judge the sweep as a study of PARAM (e.g. train.learning_rate): each of its values' best, the "
        "other params re-tuned for each, against the noise the selection adds",
    )
    sweep.set_defaults(handler=sweep_command)


def sweep_command(args: argparse.Namespace) -> None:
    from tracking.errors import UsageError
    from tracking.run.lifecycle import interrupts_raise
    from tracking.store.location import open_client, project_root
    from tracking.sweeps.family import Asked, run_sweep
    from tracking.sweeps.members import Selection

    if bool(args.experiments) == bool(args.all or args.filter or args.parent):
        raise UsageError(
            "name the sweep's experiments, or select them with one of --all, --filter and --parent",
            fix="e.g. `tracking sweep --all` after `dvc queue start`",
        )
    root = project_root()
    selection = Selection(tuple(args.experiments), args.all, args.filter, args.parent)
    with interrupts_raise():  # a stopped confirmation ends its runs KILLED
        asked = Asked(args.alpha, "fdr" if args.fdr else "holm", args.confirm, args.study)
        judged = run_sweep(open_client(root), root, selection, asked)
    print(judged.verdict.table(), end="\n\n")
    if judged.study is not None:
        print(judged.study.table(), end="\n\n")
    print(judged.headline())
    print(f"Report: {SWEEP_REPORT.as_posix()}")
