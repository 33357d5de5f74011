"""The `tracking` command: `provenance` prints what a run would record, `pin-data` pins the prepared data.

Imports stay inside the commands so that `tracking --help` starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tracking.stage import run_main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracking", description="Provenance and reproducibility for DVC + Keras + MLflow.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    prov = commands.add_parser("provenance", help="print, as JSON, the provenance record a run here would log")
    prov.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    prov.set_defaults(handler=_provenance)
    pin = commands.add_parser("pin-data", help="pin the prepared data: write its content hash to data.sha256 in params.yaml")
    pin.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    pin.set_defaults(handler=_pin_data)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    run_main(lambda: args.handler(args))


def _provenance(args: argparse.Namespace) -> None:
    from tracking.params import load_params
    from tracking.process import reproducible_process, seed_frameworks

    params = load_params(args.params)
    seeds = reproducible_process(params)
    from tracking.determinism import as_record
    from tracking.provenance import capture
    from tracking.store import project_root

    effective = seed_frameworks(params, seeds)
    record = capture(project_root(), seeds.as_dict(), as_record(params.determinism, effective))
    json.dump(record, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def _pin_data(args: argparse.Namespace) -> None:
    from tracking.pinning import pin_prepared_data
    from tracking.store import project_root

    digest, pin_file = pin_prepared_data(project_root(), args.params)
    print(f"pinned data.sha256 = {digest} in {args.params}; commit it with {pin_file}")
