"""DVC stage `calibrate`: train the frozen baseline `calibration.repeats` times per noise variant
(`tracking.calibrate`)."""

from __future__ import annotations

from tracking import calibrate, load_params, run_main


def main() -> None:
    calibrate(load_params())


if __name__ == "__main__":
    run_main(main)
