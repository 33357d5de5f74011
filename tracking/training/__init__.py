"""Keras: a model from any builder (checked, compiled) and the callback that logs each epoch."""
