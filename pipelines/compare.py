"""DVC stage `compare`: judge the candidate run against the noise band that fits it, log the verdict to its MLflow
run and write metrics/compare.json, the report and its plots (`tracking.stages.compare`). Exits 1 when
`compare.fail_on_drift` is true and the verdict is drift in the worse direction."""

from __future__ import annotations

import sys

from tracking.stages import compare_candidate, load_params, run_main


def main() -> None:
    if compare_candidate(load_params()):
        sys.exit(1)


if __name__ == "__main__":
    run_main(main)
