"""Seeds and determinism: one seed per source of randomness, re-seeding any model, op determinism, process set-up."""
