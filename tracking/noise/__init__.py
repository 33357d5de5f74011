"""Noise: calibration (variants, repeats on any executor, kept repeats), statistics of repeated runs, the band policy
that judges a value, and group comparisons."""
