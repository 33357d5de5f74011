"""Explaining runs: `tracking diff`, `tracking rerun` and `tracking audit`, and their reports."""
