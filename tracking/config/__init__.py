"""Configuration: params.yaml's schema, the frozen baseline, names from earlier versions, a team's own code."""
