"""Keras: the one way every path builds, checks, fits, scores and saves a model, and the callback that logs each epoch."""
