"""Stage `audit` (and `tracking audit`): train the current config R times with op determinism on and R times off
(tracking/inspect/audit_run.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tracking.config.params import load_params
from tracking.determinism.process import reproducible_process
from tracking.inspect.audit_run import run_audit
from tracking.stage import at_least, run_main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipelines.audit", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=at_least(2), help="trainings per mode (default: audit.repeats in params.yaml)"
    )
    parser.add_argument("--steps", type=at_least(1), help="training steps traced per repeat (default: audit.steps)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    params = load_params()
    reproducible_process(params)
    run_audit(params, args.repeats, args.steps)


if __name__ == "__main__":
    run_main(main)
