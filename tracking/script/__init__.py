"""A team's own training script: `tracking.start` opens a run with our provenance, seeds and determinism, read from the team's params."""
