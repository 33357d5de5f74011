"""Noise: statistics of repeated runs, the band policy that judges a value, and group comparisons."""
