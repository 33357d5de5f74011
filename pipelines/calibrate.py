"""DVC stage `calibrate`: train the frozen baseline `calibration.repeats` times per noise variant
(tracking/noise/calibration.py)."""

from __future__ import annotations

from tracking.config.params import load_params
from tracking.noise.calibration import calibrate
from tracking.stage import run_main


def main() -> None:
    calibrate(load_params())


if __name__ == "__main__":
    run_main(main)
