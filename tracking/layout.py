"""The project's layout: the stage names and the files each stage writes and the next one reads.

This is the contract between the pipeline and the library. The stages in `pipelines/` write and read these
paths (relative to the project root) and open their MLflow runs under these stage names; `dvc.yaml` and
`audit/dvc.yaml` declare the same paths as deps and outs; the library reads them back (`tracking rerun`
re-runs the train and evaluate stages and reads the run id the train stage wrote, `tracking diff` reads the
calibration's noise file from MLflow). A team's own pipeline that follows this layout works with the library.
"""

from __future__ import annotations

from pathlib import Path

# Stage names: the keys under `stages:` in dvc.yaml, and what each stage's MLflow run records as `pipeline.stage`.
PREPARE = "prepare"
TRAIN = "train"
EVALUATE = "evaluate"
CALIBRATE = "calibrate"
COMPARE = "compare"
AUDIT = "audit"
# The stages of dvc.yaml that build the team's model: its training, the calibration repeats and the candidate's
# extra runs. The team's code is a dep of each, and whichever of them runs first says so for all of them (compare
# trains only once a change calls for candidate runs, which would be a team's first experiment).
MODEL_STAGES = (TRAIN, CALIBRATE, COMPARE)

# The pipeline's DVC files: the default pipeline, and the audit's, kept out of it.
DVC_FILE = "dvc.yaml"
AUDIT_DVC_FILE = "audit/dvc.yaml"
PARAMS_FILE = "params.yaml"

# prepare: the split data set (with its manifest), and the manifests pinned by `tracking pin`.
PREPARED = Path("data/prepared")
PINS_DIR = Path("data/pins")

# train: the model, the training it recorded by content (its inputs' and weights' hashes, so that a clone training
# the same weights writes the same file), metrics and curves.
OUTPUTS = Path("outputs")
MODEL = OUTPUTS / "model.keras"
RUN_FILE = OUTPUTS / "run.json"
# This checkout's links from the stages' outputs to the MLflow runs that made them (run ids, the store, where each
# repeat ran): git-ignored and not DVC outs, since ids and places differ in every clone while the results do not
# (tracking/store/recorded.py).
RUN_LINKS = Path(".tracking/runs")
TRAIN_METRICS = Path("metrics/train.json")
HISTORY = Path("plots/train/history.csv")
# the machine and inputs the committed weights came from (tracking/provenance/reference.py)
TRAINED_ON = Path("reports/trained_on.json")

# evaluate: test predictions (classes or values), class probabilities, scores and the confusion matrix.
PREDICTIONS = OUTPUTS / "predictions.npy"
PROBABILITIES = OUTPUTS / "probabilities.npy"
EVAL_METRICS = Path("metrics/eval.json")
CONFUSION = Path("plots/confusion.json")

# calibrate: the noise bands (also logged to the calibration's MLflow run under the same path), and every
# repeat's predictions and weights.
NOISE_FILE = Path("calibration/noise.json")
CALIBRATION_RUNS = OUTPUTS / "calibration.npz"
# calibrate: every finished repeat, kept under the key of what determined it (tracking/repeats/kept.py), so a
# killed calibration resumes and more repeats train only the new ones. Not a DVC out: DVC would delete it.
REPEATS_DIR = Path("calibration/repeats")

# compare: the verdict's metrics, report and plots; and its whole record by content, a DVC-cached out, so that a clone
# (which lacks it) re-runs compare and its own candidate run gets the verdict.
COMPARE_METRICS = Path("metrics/compare.json")
VERDICT_FILE = OUTPUTS / "verdict.json"
COMPARE_REPORT = Path("reports/compare.md")
COMPARE_PLOTS = {
    "accuracy": Path("reports/accuracy_spread.png"),
    "churn": Path("reports/churn_heatmap.png"),
    "classes": Path("reports/per_class_spread.png"),
}

# audit: its report, figure and metrics.
AUDIT_REPORT = Path("reports/audit.md")
AUDIT_FIGURE = Path("reports/audit.png")
AUDIT_METRICS = Path("metrics/audit.json")

# `tracking sweep` (not a DVC stage: the command that judges a sweep's experiments, `pipeline.stage` of its parent
# run): the sweep's report and its expected-best plot.
SWEEP = "sweep"
SWEEP_REPORT = Path("reports/sweep.md")
SWEEP_PLOT = Path("reports/sweep_expected_best.png")

# The folders above hold only what stages write: a change under them is never a change of code.
OUTPUT_FOLDERS = ("metrics", "plots", "reports", "outputs", "calibration")
