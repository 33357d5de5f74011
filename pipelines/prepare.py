"""DVC stage `prepare`: load the source or loader, split it with `data.split_seed`, check the pin, write the arrays
(`tracking.stages.prepare`)."""

from __future__ import annotations

from tracking.stages import load_params, prepare_data, run_main


def main() -> None:
    prepare_data(load_params())


if __name__ == "__main__":
    run_main(main)
