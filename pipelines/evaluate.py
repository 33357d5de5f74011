"""DVC stage `evaluate`: score the trained model on the test split, write the scores, predictions and plots, and
finish the MLflow run that `train` opened (`tracking.stages.evaluate`)."""

from __future__ import annotations

from tracking.stages import evaluate_model, load_params, run_main


def main() -> None:
    evaluate_model(load_params())


if __name__ == "__main__":
    run_main(main)
