"""DVC stage `train`: open the pipeline's MLflow run, log params and provenance, train, save the model
(`tracking.stages.train`)."""

from __future__ import annotations

from tracking.stages import load_params, run_main, train_model


def main() -> None:
    train_model(load_params())


if __name__ == "__main__":
    run_main(main)
