"""The compare stage's work: judge the candidate run against the noise band that fits it (`tracking.noise.verdict`),
log the verdict to the candidate's MLflow run, and write metrics/compare.json, the report and its plots.
`compare.fail_on_drift` fails the stage only on drift in the worse direction of a metric's mode, or a CONTROL
candidate that is not bit-identical. The candidate is `compare.candidate_repeats` runs: the train stage's and the
extra runs trained through the calibration's machinery (tracking/repeats/candidate_runs.py), kept and resumed as
calibration repeats are; with several, each metric's verdict is the two-sample comparison. Under
`compare.candidate_repeats: auto` the runs train one at a time until the sequential design
(tracking/noise/sequential.py) decides, and the verdict is judged at its last look's nominal level.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tracking import startup
from tracking.config.baseline import load_baseline
from tracking.config.params import AUTO, Params
from tracking.data.dataset import load_splits
from tracking.data.hashing import file_sha256
from tracking.data.manifest import Manifest
from tracking.determinism.process import reproducible_process
from tracking.env import DVC_EXP_BASELINE_REV
from tracking.errors import RunStateError
from tracking.layout import (
    CALIBRATE,
    CALIBRATION_RUNS,
    COMPARE,
    COMPARE_METRICS,
    COMPARE_PLOTS,
    COMPARE_REPORT,
    EVAL_METRICS,
    EVALUATE,
    NOISE_FILE,
    PREDICTIONS,
    PREPARED,
    RUN_FILE,
    VERDICT_FILE,
)
from tracking.names import (
    BAND_VARIANT_TAG,
    CANDIDATE_RUNS_TAG,
    MLFLOW_NOTE_TAG,
    REASON_TAG,
    SECONDARY_EXCEEDING_TAG,
    SWEEP_TAG,
    VERDICT_TAG,
    sweep_name,
)
from tracking.noise.judged_view import VIEW_TAG, view_state
from tracking.noise.notes import NOTES_HEADING, said_note
from tracking.noise.policy import CONFIG_SECTIONS, CONTROL, DETERMINISM
from tracking.noise.record import NoiseRecord
from tracking.noise.run_name import SEEDS, changes, judged_name
from tracking.noise.run_page import describe_verdict, judged_metrics
from tracking.noise.sequential import Look, look
from tracking.noise.statistics import strict
from tracking.noise.verdict import (
    check_compare_metrics,
    choose_variant,
    fails,
    headline,
    judge_calibrated,
    primary_inputs,
    verdict_metrics,
)
from tracking.repeats.candidate_runs import extra_runs, train_candidate_repeats
from tracking.repeats.kept import KeptRepeat
from tracking.run.tracker import Tracker
from tracking.store.location import open_client, project_root, tracking_uri
from tracking.store.recorded import read_run_file, train_run_id
from tracking.training.task_scores import flat_metrics

T = TypeVar("T")


def whole_output(root: Path, path: Path, stage: str, read: Callable[[Path], T]) -> T:
    """`read` of an earlier stage's output at `path`, every byte of it; one `RunStateError` line naming the file and
    the stage that writes it when it is damaged or cut short (a full disk, a killed copy, a hand edit)."""
    try:
        return read(root / path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise RunStateError(
            f"{path} cannot be read, it is damaged or cut short ({type(err).__name__}: {str(err)[:200]})",
            fix=f"write it again with `dvc repro --force --single-item {stage}`, then re-run compare",
        ) from err


def _arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an `.npz`, read now: NumPy reads its members lazily, so a cut-off file failed mid-judgement."""
    with np.load(path) as found:
        return {name: found[name] for name in found.files}


def _mapping(path: Path) -> dict[str, Any]:
    found = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(found, dict):
        raise ValueError(f"expected a JSON object of metrics, got {type(found).__name__}")
    return found


def compare_candidate(params: Params) -> bool:
    """Judge the pipeline's candidate run against the calibration, log and write the verdict; True when it fails the
    stage (`compare.fail_on_drift`, said in an `error:` line). Call it before TensorFlow is imported."""
    root = project_root()
    baseline = load_baseline(params.calibration.baseline)
    for path in (NOISE_FILE, CALIBRATION_RUNS, EVAL_METRICS, PREDICTIONS, RUN_FILE):
        if not (root / path).is_file():
            raise RunStateError(f"{path} not found; run the pipeline up to compare first (`dvc repro`)")
    noise = NoiseRecord.read(root / NOISE_FILE)
    calibration = whole_output(root, CALIBRATION_RUNS, CALIBRATE, _arrays)
    evaluation = whole_output(root, EVAL_METRICS, EVALUATE, _mapping)
    predictions = whole_output(root, PREDICTIONS, EVALUATE, np.load)
    check_compare_metrics(params, flat_metrics(evaluation), noise)
    training = read_run_file(root)
    # found in the store, or one line where it is gone (DVC does not see a deleted store)
    candidate_run_id = train_run_id(open_client(root), root, training, tracking_uri(root))
    manifest = Manifest.read(root / PREPARED)
    variant, _ = choose_variant(params, baseline, manifest.content_sha256 != noise.data_sha256, list(noise.variants))
    band_values = noise.band_values(variant)
    first = flat_metrics(evaluation)
    until_decided = params.compare.candidate_repeats == AUTO and variant != CONTROL

    def decided(extras: list[KeptRepeat]) -> bool:
        found = sequential_look(params, band_values, [first, *(kept.run["metrics"] for kept in extras)])
        print(found.line(), file=sys.stderr)
        return found.stop is not None

    extras, reused = replicate(params, variant, root, manifest, candidate_run_id, decided if until_decided else None)
    measured = [first, *(kept.run["metrics"] for kept in extras)]
    last = sequential_look(params, band_values, measured) if until_decided else None
    result = judge_calibrated(
        params if last is None else at_level(params, last.level),
        baseline,
        noise,
        manifest.content_sha256,
        measured,
        np.stack([predictions, *(kept.predicted for kept in extras)]),
        [training.weights_sha256, *(kept.run["weights_sha256"] for kept in extras)],
        calibration["predictions"],
    )
    # What this execution decided rather than judged: in the run's compare/compare.json, not in outputs/verdict.json.
    execution = {"candidate_repeat_runs": [kept.run["run_id"] for kept in extras], "reused_candidate_runs": reused}
    if last is not None:
        result["sequential"] = last.as_dict()
    name, reason = result["band_variant"], result["reason"]
    summary = verdict_metrics(result)
    startup.mark(startup.JUDGED)  # compare opens its store after judging: the line tells the two apart
    with Tracker(params.mlflow.experiment, root, run_id=candidate_run_id, stage=COMPARE, keep_end_time=True) as tracker:
        tracker.client.set_experiment_tag(tracker.experiment_id, VIEW_TAG, view_state(judged_metrics(result)))
        write_outputs(root, result, summary, noise.at_alpha(params.compare.alpha), calibration, predictions, evaluation)
        tracker.log_metrics(
            {key: value for key, value in summary.items() if isinstance(value, float) and np.isfinite(value)}
        )
        tracker.set_tags(
            {
                VERDICT_TAG: result["verdict"],
                BAND_VARIANT_TAG: name,
                REASON_TAG: reason,
                SECONDARY_EXCEEDING_TAG: result["secondary_exceeding"],
                MLFLOW_NOTE_TAG: describe_verdict(result, tracker.experiment_id, tracker.run_id),
                **sweep_tags(root),
            }
        )
        named = tracker.client.get_run(tracker.run_id).info.run_name or ""
        changed = changes(baseline.flat(), params.flat(), (*CONFIG_SECTIONS, SEEDS, DETERMINISM))
        tracker.client.update_run(tracker.run_id, name=judged_name(named, result["verdict"], changed))
        if last is not None:
            tracker.set_tags({CANDIDATE_RUNS_TAG: f"{last.runs} of at most {last.cap}: {last.stop}"})
        tracker.log_json({**result, **execution}, "compare/compare.json")
        for path in (COMPARE_REPORT, *COMPARE_PLOTS.values()):
            tracker.log_artifact(root / path, "compare")
    runs = result["candidate_runs"]
    trained = f"{runs} candidate runs ({len(extras) - reused} trained here); " if runs > 1 else ""
    if last is not None:
        trained += f"candidate_repeats auto: {last.runs} of at most {last.cap}, {last.stop}; "
    print(
        f"{result['verdict']}: {headline(result)}{reason}; {trained}judged against {name} "
        f"({result['calibration_runs']} runs). Report: {COMPARE_REPORT}"
    )
    for line in result["inconclusive"]:  # what would decide each undecided metric, a line of its own
        print(f"  inconclusive {said_note(line, f'{COMPARE_REPORT}, {NOTES_HEADING}')}")
    if fails(result, params.compare):
        print("error: drift beyond noise in the worse direction and compare.fail_on_drift is true", file=sys.stderr)
        return True
    return False


def sweep_tags(root: Path) -> dict[str, str]:
    """A DVC experiment's sweep tag: the commit its queue started from and the calibration that judged it
    (`tracking.names.sweep_name`), so that `tracking sweep --all` and a search filter find the experiments queued
    together; none outside an experiment (`dvc repro` judges one candidate)."""
    base = os.environ.get(DVC_EXP_BASELINE_REV)
    return {SWEEP_TAG: sweep_name(base, file_sha256(root / NOISE_FILE))} if base else {}


def sequential_look(params: Params, band_values: dict[str, list[float]], runs: list[dict[str, float]]) -> Look:
    """The sequential design's look after the candidate `runs` (each run's flat metrics) against the band's values,
    under `compare.candidate_repeats: auto`."""
    band, candidates = primary_inputs(params, band_values, runs)
    return look(
        band,
        candidates,
        cap=params.compare.candidate_repeats_max,
        alpha=params.compare.alpha,
        modes=params.compare_metrics(),
        min_effect=params.compare.min_effect,
        source="calibration",
    )


def at_level(params: Params, level: float) -> Params:
    """`params` with the compare stage's alpha at the sequential design's nominal `level` for its last look: the
    level its verdict was decided at."""
    return params.model_copy(update={"compare": params.compare.model_copy(update={"alpha": level})})


def replicate(
    params: Params,
    variant: str,
    root: Path,
    manifest: Manifest,
    candidate_run_id: str,
    decided: Callable[[list[KeptRepeat]], bool] | None,
) -> tuple[list[KeptRepeat], int]:
    """The candidate's extra runs against `variant` (none with one candidate run or under CONTROL), trained or kept
    (tracking/repeats/candidate_runs.py) as children of its MLflow run, until `decided` says so where it is given; and
    how many were kept from an earlier stage."""
    if not extra_runs(params.compare, variant):
        return [], 0
    seeds = reproducible_process(params)  # before TensorFlow loads; may restart this process with the hash seed
    data = manifest, load_splits(root / PREPARED, manifest)
    with Tracker(
        params.mlflow.experiment, root, run_id=candidate_run_id, stage=COMPARE, keep_end_time=True
    ) as candidate:
        return train_candidate_repeats(params, variant, seeds, root, data, candidate, decided)


def write_outputs(
    root: Path,
    result: dict,
    summary: dict,
    noise: NoiseRecord,
    calibration: Any,
    predictions: np.ndarray,
    evaluation: dict,
) -> None:
    """metrics/compare.json, the verdict's record (`result`), the report and its plots."""
    from tracking.noise.report import render_plots, render_report

    for path in (COMPARE_METRICS, COMPARE_REPORT, VERDICT_FILE):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / COMPARE_METRICS).write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    (root / VERDICT_FILE).write_text(json.dumps(strict(result), indent=2, allow_nan=False) + "\n")
    (root / COMPARE_REPORT).write_text(render_report(result))
    render_plots(
        {name: root / path for name, path in COMPARE_PLOTS.items()},
        noise,
        calibration,
        predictions,
        flat_metrics(evaluation),
        result,
    )
