"""The `tracking` command: its parser, and the audit, diff and rerun of runs, a team's script calibrated and judged,
its kernel installed, the plots page.

The commands over the project's files (provenance, pin-data, baseline) are in tracking/cli_project.py, the noise
commands (bands, compare-groups, plan) in tracking/cli_noise.py and the store's (doctor, sync, prune-refs) in
tracking/cli_store.py. Imports stay inside the commands so that `tracking --help` starts fast.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tracking.cli_noise import bands_command, compare_groups_command, plan_command
from tracking.cli_project import baseline_command, pin_data_command, provenance_command, seed_mapping
from tracking.cli_store import doctor_command, prune_snapshots_command, sync_command
from tracking.cli_sweep import add_sweep_command
from tracking.entry import at_least, run_main

# A run as `tracking diff` and `tracking rerun` take it (tracking.inspect.diff.runs.load_run resolves it).
RUN_REF_HELP = (
    "MLflow run id or its first 8 characters, the run's name (train-29bdb4), a DVC experiment name (the run's "
    "dvc.exp_name tag), or inside the project any DVC experiment or git revision (the run of what its outputs/run.json records; "
    "in a team's script project, the latest run logged at that commit)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracking", description="Provenance and reproducibility for DVC + Keras + MLflow."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    prov = commands.add_parser("provenance", help="print, as JSON, the provenance record a run here would log")
    prov.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    prov.add_argument(
        "--seeds",
        action="append",
        metavar="SOURCE=KEY",
        help="a team's own params: the key holding a seed, as tracking.start(seeds=...) takes it (repeatable, e.g. "
        "base=train.seed); without it, a params file our schema does not read is taken as a team's own",
    )
    prov.set_defaults(handler=provenance_command)
    pin = commands.add_parser(
        "pin-data", help="pin the prepared data: write its content hash to data.sha256 in params.yaml"
    )
    pin.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    pin.set_defaults(handler=pin_data_command)
    base = commands.add_parser(
        "baseline", help="freeze the training sections of params.yaml as the baseline that calibration trains"
    )
    base.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    base.set_defaults(handler=baseline_command)
    bands = commands.add_parser("bands", help="print, as JSON, each metric's noise band over existing MLflow runs")
    _selection(bands)
    bands.add_argument("--filter", default="", help="MLflow filter string, e.g. \"tags.noise.variant = 'algo'\"")
    bands.set_defaults(handler=bands_command)
    groups = commands.add_parser(
        "compare-groups", help="compare two groups of MLflow runs: spreads, Welch and Brown-Forsythe tests"
    )
    _selection(groups)
    groups.add_argument("--a", required=True, help="MLflow filter string selecting group A")
    groups.add_argument("--b", required=True, help="MLflow filter string selecting group B")
    groups.add_argument("--json", action="store_true", help="print JSON instead of text")
    groups.set_defaults(handler=compare_groups_command)
    planning = commands.add_parser(
        "plan", help="the calibration and candidate repeats that detect a shift, from the measured band"
    )
    planning.add_argument(
        "shift", type=float, help="the true shift to detect, in the metric's units (0.005 = 0.5 point)"
    )
    planning.add_argument("--metric", default="test_accuracy", help="the metric (default: test_accuracy)")
    planning.add_argument("--variant", default="algo", help="the calibration variant whose band (default: algo)")
    planning.add_argument("--power", type=_probability, default=0.8, help="the detection rate wanted (default: 0.8)")
    planning.set_defaults(handler=plan_command)
    audit = commands.add_parser(
        "audit", help="train the config R times with op determinism on and off; compare them step by step"
    )
    audit.add_argument("--repeats", type=at_least(2), help="trainings per mode (default: audit.repeats in params.yaml)")
    audit.add_argument("--steps", type=at_least(1), help="training steps traced per repeat (default: audit.steps)")
    audit.set_defaults(handler=_audit)
    diff = commands.add_parser(
        "diff", help="what differs between two runs, ranked, and whether their metric gap is noise"
    )
    diff.add_argument("run_a", metavar="RUN_A", help=RUN_REF_HELP)
    diff.add_argument("run_b", metavar="RUN_B", help="the run to compare with RUN_A (same forms)")
    diff.add_argument("--format", choices=("text", "md", "json"), default="text", help="output format (default: text)")
    diff.add_argument(
        "--metric",
        action="append",
        help="metric to compare (repeatable; default: run B's compare.metrics, "
        "else its task's default: test_accuracy, test_loss or test_loss, test_mae)",
    )
    diff.add_argument(
        "--alpha", type=_probability, default=0.05, help="significance level over the metrics (default: 0.05)"
    )
    diff.add_argument(
        "--calibration", metavar="RUN_ID", help="calibration parent run whose bands to use (default: the latest)"
    )
    diff.set_defaults(handler=_diff)
    rerun = commands.add_parser(
        "rerun", help="re-create a logged run in a temporary git worktree, train it again and compare"
    )
    rerun.add_argument("run", metavar="RUN_ID", help=RUN_REF_HELP)
    rerun.add_argument(
        "--metric",
        action="append",
        help="metric to compare (repeatable; default: the run's compare.metrics, else its task's default)",
    )
    rerun.add_argument(
        "--alpha", type=_probability, default=0.05, help="significance level over the metrics (default: 0.05)"
    )
    rerun.set_defaults(handler=_rerun)
    calibrate = commands.add_parser(
        "calibrate",
        help="noise bands of a team's own script: N runs per variant",
    )
    calibrate.add_argument("--stage", help="the dvc.yaml stage that runs the script (default: the only one)")
    calibrate.add_argument("--repeats", type=at_least(3), default=5, help="runs per variant (default: 5)")
    calibrate.add_argument(
        "--variants", default="algo,control", help="comma-separated: algo (seeds varied), control (nothing varied)"
    )
    calibrate.add_argument(
        "--experiment", help="MLflow experiment (default: the project folder's name, as tracking.start)"
    )
    calibrate.set_defaults(handler=_calibrate)
    judge = commands.add_parser("judge", help="verdict on a team's script run, from its calibration")
    judge.add_argument("run", metavar="RUN_ID", help=RUN_REF_HELP)
    judge.add_argument(
        "--metric", action="append", help="metric to judge (repeatable; default: test_accuracy, test_loss)"
    )
    judge.add_argument("--alpha", type=_probability, default=0.05, help="significance level (default: 0.05)")
    judge.add_argument(
        "--min-effect",
        action="append",
        type=_shift,
        metavar="METRIC=SHIFT",
        help="the smallest shift of METRIC that matters (repeatable; default: the larger of 4 band stds and 0.02 for "
        "an accuracy, else 10%% of the band mean)",
    )
    judge.add_argument("--calibration", metavar="RUN_ID", help="calibration parent run (default: the latest)")
    judge.set_defaults(handler=_judge)
    doctor = commands.add_parser(
        "doctor", help="find runs a killed process left RUNNING and mark this host's ones FAILED"
    )
    doctor.add_argument("--dry-run", action="store_true", help="only report what would be marked FAILED")
    doctor.set_defaults(handler=doctor_command)
    sync = commands.add_parser(
        "sync", help="upload runs kept offline while the tracking server was lost (.tracking/offline/)"
    )
    sync.add_argument(
        "--tracking-uri",
        help="server to upload to (default: MLFLOW_TRACKING_URI, else the server each run was kept for)",
    )
    sync.set_defaults(handler=sync_command)
    prune = commands.add_parser("prune-refs", help="delete refs/tracking/* snapshots no run in the store records")
    prune.add_argument("--all", action="store_true", help="delete every one, recorded by a run or not")
    prune.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    prune.set_defaults(handler=prune_snapshots_command)
    kernel = commands.add_parser("kernel", help="a Jupyter kernel starting Python as tracking.start needs it")
    kernel_commands = kernel.add_subparsers(dest="kernel_command", required=True, metavar="ACTION")
    install = kernel_commands.add_parser(
        "install", help="install the kernel: notebooks on it run tracking.start as reproducibly as a script"
    )
    install.add_argument("--params", default="params.yaml", help="params file, as tracking.start(params=...) names it")
    install.add_argument(
        "--seeds", action="append", metavar="SOURCE=KEY", help="as tracking.start(seeds=...) maps them (repeatable)"
    )
    install.add_argument(
        "--determinism", action="append", metavar="KEY=VALUE", help="as tracking.start(determinism=...) (repeatable)"
    )
    install.add_argument("--name", default="tracking", help="the kernel's name in Jupyter (default: tracking)")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user rather than this environment")
    where.add_argument("--prefix", type=Path, help="install under PREFIX/share/jupyter/kernels")
    install.set_defaults(handler=_kernel_install)
    page = commands.add_parser(
        "plots-page", help="write the page `dvc plots show` fills, with Vega inside it, so charts draw offline"
    )
    page.set_defaults(handler=_plots_page)
    add_sweep_command(commands, _probability)
    for listed in commands._choices_actions:  # each command's own --help opens with the line the list shows
        command = commands.choices[listed.dest]
        command.description = command.description or listed.help
    return parser


def _selection(command: argparse.ArgumentParser) -> None:
    command.add_argument("--experiment", required=True, help="MLflow experiment name")
    command.add_argument(
        "--metric", action="append", help="metric to use (repeatable; default: test_accuracy, test_loss)"
    )
    command.add_argument("--alpha", type=_probability, default=0.05, help="significance level (default: 0.05)")


def _shift(text: str) -> tuple[str, float]:
    """`METRIC=SHIFT`, the shift a number above 0."""
    metric, _, value = text.partition("=")
    try:
        shift = float(value)
    except ValueError:
        shift = math.nan
    if not metric or not math.isfinite(shift) or shift <= 0:
        raise argparse.ArgumentTypeError(
            f"expected METRIC=SHIFT with a number above 0, e.g. test_loss=0.01, got {text!r}"
        )
    return metric, shift


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from err
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        run_main(lambda: args.handler(args), startup_line=False)
        sys.stdout.flush()
    except BrokenPipeError:
        # A reader that stopped early (`tracking bands | head -2`) ends every command quietly, without a traceback.
        # Python flushes stdout again at exit: point it at devnull so that flush does not raise too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _kernel_install(args: argparse.Namespace) -> None:
    from tracking.errors import UsageError
    from tracking.script.kernel import install_kernel
    from tracking.yaml_text import parse_yaml

    determinism = {}
    for pair in args.determinism or []:
        name, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--determinism {pair!r}: expected KEY=VALUE", fix="e.g. --determinism onednn=false")
        determinism[name] = parse_yaml(value)
    where = install_kernel(args.params, seed_mapping(args.seeds or []), determinism, args.name, args.prefix, args.user)
    print(
        f"installed kernel '{args.name}' in {where}; pick it for the notebook in Jupyter (restart it after a change of the seeds)"
    )


def _audit(args: argparse.Namespace) -> None:
    """Audit the project's configuration in this process, as its `audit` stage does (tracking/stages/audit.py)."""
    from tracking.config.params_file import load_params
    from tracking.stages.audit import run_audit
    from tracking.store.location import project_root

    run_audit(load_params(project_root() / "params.yaml"), args.repeats, args.steps)


def _diff(args: argparse.Namespace) -> None:
    from tracking.inspect.diff import diff_runs, load_run
    from tracking.inspect.diff.output import render
    from tracking.store.location import find_project, open_client

    root = find_project()
    client = open_client(root)
    run_a, run_b = load_run(client, args.run_a, root), load_run(client, args.run_b, root)
    # The code group reads commits from the git repository here, if there is one.
    result = diff_runs(client, run_a, run_b, args.metric, args.alpha, args.calibration, repo=root or Path.cwd())
    sys.stdout.write(render(result, args.format))


def _rerun(args: argparse.Namespace) -> None:
    from tracking.inspect.rerun import report, rerun
    from tracking.run.lifecycle import interrupts_raise
    from tracking.store.location import project_root

    with interrupts_raise():  # SIGTERM too leaves through the worktree's clean-up, and stops the stage it runs
        result = rerun(args.run, project_root(), args.metric, args.alpha)
    sys.stdout.write(report(result))


def _calibrate(args: argparse.Namespace) -> None:
    from tracking.script.calibration import calibrate_script
    from tracking.store.location import project_root

    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    noise = calibrate_script(project_root(), args.stage, args.repeats, variants, args.experiment)
    for variant, found in noise.variants.items():
        bands = ", ".join(f"{name} {band['mean']:.4g} ± {band['std']:.2g}" for name, band in found.bands.items())
        identical = "bit-identical" if found.bit_identical else f"{len(found.weights_sha256)} distinct weights"
        print(f"{variant}: {len(found.runs)} runs, {identical}; {bands}")
    print(f"calibration run {noise.parent_run_id}: judge a run with `tracking judge RUN`")


def _judge(args: argparse.Namespace) -> None:
    from tracking.inspect.diff.output import render
    from tracking.script.calibration import judge_script
    from tracking.store.location import open_client, project_root

    root = project_root()
    shifts = dict(args.min_effect or [])
    result = judge_script(open_client(root), root, args.run, args.metric, args.alpha, args.calibration, shifts)
    sys.stdout.write(render(result, title="tracking judge"))
    unjudged = "neither run logged the metrics judged: name yours with --metric" if not result.deltas else ""
    print(f"verdict: {result.verdict or 'none (' + (unjudged or 'no band covers what differs') + ')'}")


def _plots_page(args: argparse.Namespace) -> None:
    """Write .dvc/plots/offline.html, the page `dvc plots show` fills, and name it in this clone's .dvc/config.local."""
    from tracking.inspect.plots_page import write_plots_page
    from tracking.store.location import project_root

    path = write_plots_page(project_root() / ".dvc")
    print(f"wrote {path}: `dvc plots show` draws its charts offline")
