"""Where training runs: the executors of calibration repeats, and what a run records of where it ran."""
