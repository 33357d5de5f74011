"""The determinism audit as it runs: the configuration trained R times with op determinism on and R times off, each
mode in a process of its own (`tracking.inspect.audit_training`), compared step by step, logged and reported.

Both trainer processes start (import TensorFlow) at once, then train in turn, repeat by repeat (deterministic #0,
non-deterministic #0, deterministic #1, ...), so a change of machine load affects both modes alike and their step
times compare fairly; an op without a deterministic implementation stops the audit at the first repeat. This
process imports no TensorFlow: it compares the traces, logs one MLflow parent run (tag `audit=true`) with a child
per repeat and mode, and writes `reports/audit.md`, `reports/audit.png` and `metrics/audit.json`. The `audit`
stage and `tracking audit` both call `run_audit`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from tracking.config.params import CLASSIFICATION, MULTILABEL, Params
from tracking.data.manifest import Manifest
from tracking.determinism.backend import TENSORFLOW
from tracking.determinism.process import reproducible_process
from tracking.env import TRACKING_PROJECT_ROOT
from tracking.errors import AuditError, UnsupportedOpError, UsageError
from tracking.inspect.audit_measures import (
    DONE,
    GO,
    MODE_LABELS,
    MODES,
    READY,
    UNSUPPORTED_FILE,
    UNSUPPORTED_OP_EXIT,
    Trace,
    cost_text,
    median_step_seconds,
    summarise,
    unsupported_line,
)
from tracking.inspect.audit_report import figure, render, render_unsupported
from tracking.layout import AUDIT, AUDIT_DVC_FILE, AUDIT_FIGURE, AUDIT_METRICS, AUDIT_REPORT, PREPARED
from tracking.names import (
    AUDIT_KERNEL_NOISE_TAG,
    AUDIT_MODE_TAG,
    AUDIT_PREFIX,
    AUDIT_REPEAT_TAG,
    AUDIT_TAG,
    AUDIT_UNSUPPORTED_LAYER_TAG,
    AUDIT_UNSUPPORTED_OP_TAG,
    OP_DETERMINISM_TAG,
    WEIGHTS_TAG,
)
from tracking.provenance.git import open_repository
from tracking.provenance.software import installed_packages
from tracking.run.tracker import Tracker
from tracking.store.location import project_root
from tracking.training.model import require_code_deps


def run_audit(params: Params, repeats: int | None = None, steps: int | None = None) -> None:
    """Audit the project's configuration (`params`): `repeats` trainings per mode of `steps` traced steps each
    (default: `audit.repeats`, `audit.steps`). The process is set up first (`reproducible_process`), as the
    trainers' are. The audit traces each step's gradients with TensorFlow's GradientTape, so it audits a
    TensorFlow configuration only."""
    if params.determinism.backend != TENSORFLOW:
        raise UsageError(
            f"tracking audit traces gradients with TensorFlow; determinism.backend is {params.determinism.backend}",
            fix="audit with `dvc exp run -S determinism.backend=tensorflow` (docs/backends.md says what each backend "
            "checks), or measure bit-identity with `tracking calibrate` / the calibration's CONTROL repeats",
        )
    reproducible_process(params)
    root = project_root()
    require_code_deps(params, AUDIT, root, AUDIT_DVC_FILE)
    manifest = Manifest.read(root / PREPARED)
    per_label = manifest.task == CLASSIFICATION and isinstance(manifest.target_shape, list) and manifest.target_shape
    if manifest.task == MULTILABEL or per_label:
        raise UsageError(
            "tracking audit scores one class label per sample, and the data's y holds "
            + (
                "multi-hot rows (data.task multilabel)" if not per_label else f"labels of shape {manifest.target_shape}"
            ),
            fix="measure bit-identity with the calibration's CONTROL repeats (`dvc repro calibrate`)",
        )
    open_repository(root)
    repeats, steps = repeats or params.audit.repeats, steps or params.audit.steps
    with (
        tempfile.TemporaryDirectory(prefix="audit-") as scratch,
        Tracker(
            params.mlflow.experiment,
            root,
            stage=AUDIT,
            run_name="audit",
            tags={AUDIT_TAG: "true"},
            system_metrics=params.compute.system_metrics,  # open while both modes train; the children come after
        ) as parent,
    ):
        parent.log_params({**params.flat(), f"{AUDIT_PREFIX}repeats": repeats, f"{AUDIT_PREFIX}steps": steps})
        traces = train_modes(root, repeats, steps, Path(scratch), parent, params)
        for trace in traces.values():
            log_children(parent, params, trace)
        det = traces["det"].meta
        settings = {
            "model": params.model.builder,
            "repeats": repeats,
            "steps": traces["det"].steps,
            "configured_steps": det["configured_steps"],
            "batch_size": params.train.batch_size,
            "optimizer": params.train.optimizer,
            "gpu": det["gpu"],
            "tensorflow": det["tensorflow"],
            "device": "a GPU" if det["gpu"] else "the CPU",
            "data_sha256": manifest.content_sha256,
        }
        summary = summarise(traces, settings)
        parent.log_provenance(det["provenance"], installed_packages())
        write_outputs(root, summary)
        log_summary(parent, root, summary)
    modes = summary["modes"]
    print(
        f"audit: deterministic bit-identical: {'yes' if modes['det']['bit_identical'] else 'NO'}; "
        f"non-deterministic first divergence: {modes['nondet']['divergence_text'] or 'none (bit-identical)'}; "
        f"cost of determinism {cost_text(summary)}; report {AUDIT_REPORT}; MLflow parent run {parent.run_id}"
    )


def train_modes(
    root: Path, repeats: int, steps: int, scratch: Path, parent: Tracker, params: Params
) -> dict[str, Trace]:
    """Start one trainer process per mode, alternate their repeats, and load their traces."""
    from tqdm import tqdm

    env = {**os.environ, TRACKING_PROJECT_ROOT: str(root)}
    workers = {
        mode: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracking.inspect.audit_training",
                "--mode",
                mode,
                "--repeats",
                str(repeats),
                "--steps",
                str(steps),
                "--out",
                str(scratch / mode),
            ],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for mode in MODES
    }

    def expect(mode: str, line: str) -> None:
        """Wait for `line` from a trainer (skipping anything else it prints); if it exits instead, say why."""
        for text in iter(workers[mode].stdout.readline, ""):
            if text.strip() == line:
                return
        stopped(mode, workers[mode].wait(), scratch / mode, root, parent, params.model.builder)

    try:
        for mode in MODES:
            expect(mode, READY)
        with tqdm(total=repeats * len(MODES), desc="audit", unit="run", file=sys.stderr) as bar:
            for repeat in range(repeats):
                for mode in MODES:
                    bar.set_postfix_str(f"{MODE_LABELS[mode]} #{repeat}")
                    try:
                        workers[mode].stdin.write(GO + "\n")
                        workers[mode].stdin.flush()
                    except BrokenPipeError:
                        pass  # it exited; `expect` reports why
                    expect(mode, DONE)
                    bar.update(1)
        for mode in MODES:
            if workers[mode].wait() != 0:
                stopped(mode, workers[mode].returncode, scratch / mode, root, parent, params.model.builder)
    finally:
        for worker in workers.values():
            if worker.poll() is None:
                worker.kill()
            worker.wait()
    return {mode: Trace.load(scratch / mode) for mode in MODES}


def stopped(mode: str, status: int, folder: Path, root: Path, parent: Tracker, model: str) -> NoReturn:
    """A trainer stopped: an op without a deterministic kernel becomes `UnsupportedOpError` and its report."""
    if status == UNSUPPORTED_OP_EXIT:
        found = json.loads((folder / UNSUPPORTED_FILE).read_text())
        for stale in (AUDIT_FIGURE, AUDIT_METRICS):
            (root / stale).unlink(missing_ok=True)
        (root / AUDIT_REPORT).parent.mkdir(parents=True, exist_ok=True)
        (root / AUDIT_REPORT).write_text(render_unsupported(found, {"model": model}))
        parent.log_artifact(root / AUDIT_REPORT, "audit")
        parent.set_tags({AUDIT_UNSUPPORTED_OP_TAG: found["op"], AUDIT_UNSUPPORTED_LAYER_TAG: found["layer"] or ""})
        raise UnsupportedOpError(unsupported_line(found) + f"; see {AUDIT_REPORT}")
    raise AuditError(
        f"the {MODE_LABELS[mode]} audit trainings stopped (exit status {status}, see the message above); "
        "fix the cause and re-run `tracking audit`"
    )


def log_children(parent: Tracker, params: Params, trace: Trace) -> None:
    """One nested MLflow run per repeat of the mode, with its seeds, weight hash, timings and test accuracy."""
    meta = trace.meta
    flat = {**params.flat(), "determinism.op_determinism": meta["op_determinism"]}
    for repeat in range(trace.repeats):
        tags = {
            AUDIT_MODE_TAG: trace.mode,
            AUDIT_REPEAT_TAG: repeat,
            AUDIT_KERNEL_NOISE_TAG: meta["kernel_noise"],
            WEIGHTS_TAG: meta["weights_sha256"][repeat],
            OP_DETERMINISM_TAG: str(meta["op_determinism"]).lower(),
        }
        with Tracker(
            parent.experiment,
            parent.root,
            stage=AUDIT,
            run_name=f"{MODE_LABELS[trace.mode]} #{repeat}",
            nested=True,
            tags=tags,
        ) as child:
            child.log_params({**flat, f"{AUDIT_PREFIX}within_batch_seed": meta["within_batch_seeds"][repeat]})
            seconds = trace.step_seconds[repeat : repeat + 1]
            child.log_metrics(
                {
                    "run_seconds": float(seconds.sum()),
                    "median_step_seconds": median_step_seconds(seconds),
                    "final_loss": meta["final_loss"][repeat],
                    "test_accuracy": meta["test_accuracy"][repeat],
                }
            )


def headline(summary: dict[str, Any]) -> dict[str, float]:
    """The few numbers worth a metric: bit-identity, first divergence step (1-based), step times, time ratio."""
    metrics = {"time_ratio": summary["time_ratio"]}
    for mode, row in summary["modes"].items():
        metrics[f"{mode}_bit_identical"] = float(row["bit_identical"])
        metrics[f"{mode}_median_step_seconds"] = row["median_step_seconds"]
        if row["divergence"] and row["divergence"]["step"] is not None:
            metrics[f"{mode}_divergence_step"] = float(row["divergence"]["step"] + 1)
    return metrics


def write_outputs(root: Path, summary: dict[str, Any]) -> None:
    """The report, the matrices figure and the headline metrics, written once everything succeeded."""
    for path in (AUDIT_REPORT, AUDIT_FIGURE, AUDIT_METRICS):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / AUDIT_REPORT).write_text(render(summary))
    figure(summary).savefig(root / AUDIT_FIGURE, dpi=110)
    (root / AUDIT_METRICS).write_text(json.dumps(headline(summary), indent=2) + "\n")


def log_summary(parent: Tracker, root: Path, summary: dict[str, Any]) -> None:
    parent.log_metrics(headline(summary))
    modes = summary["modes"]
    parent.set_tags(
        {f"{AUDIT_PREFIX}{mode}.bit_identical": str(row["bit_identical"]).lower() for mode, row in modes.items()}
        | {f"{AUDIT_PREFIX}{mode}.divergence": row["divergence_text"] or "none" for mode, row in modes.items()}
    )
    parent.log_json(summary, "audit/audit.json")
    parent.log_artifact(root / AUDIT_REPORT, "audit")
    parent.log_artifact(root / AUDIT_FIGURE, "audit")
