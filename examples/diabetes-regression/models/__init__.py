"""The team's own Keras code: `models.net:build` is named in params.yaml as `model.builder`."""
