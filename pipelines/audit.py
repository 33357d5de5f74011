"""Stage `audit` (and `tracking audit`): train the current config R times with op determinism on and R times off
(`tracking.stages.audit`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tracking.stages import at_least, load_params, run_audit, run_main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipelines.audit", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=at_least(2), help="trainings per mode (default: audit.repeats in params.yaml)"
    )
    parser.add_argument("--steps", type=at_least(1), help="training steps traced per repeat (default: audit.steps)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    run_audit(load_params(), args.repeats, args.steps)


if __name__ == "__main__":
    run_main(main)
