"""DVC stage `calibrate`: train the frozen baseline `calibration.repeats` times per noise variant
(`tracking.stages.calibrate`)."""

from __future__ import annotations

from tracking.stages import calibrate_baseline, load_params, run_main


def main() -> None:
    calibrate_baseline(load_params())


if __name__ == "__main__":
    run_main(main)
