"""The names the product writes into MLflow, in one place: tag names, their prefixes, MLflow's limits, and the
clauses of filter strings that select runs by them (a value quoted once, `quoted`).

A name here is part of the run format: `tracking diff`, `tracking rerun` and the MLflow UI read runs logged
by earlier versions through the same names (tracking/inspect/diff/legacy.py maps the few params that changed), so
change a value only together with a migration. The pipeline's file paths live in tracking/layout.py,
environment variables in tracking/env.py.
"""

from __future__ import annotations

import math
import sys

from tracking.errors import RunSelectionError

# MLflow's limits (mlflow/utils/validation.py): the longest tag value we write (longer ones are cut to it), and
# what a param may hold: params.yaml is refused before anything opens when a param would break them.
MAX_TAG_CHARS = 5000
MAX_PARAM_VALUE_CHARS = 6000  # MAX_PARAM_VAL_LENGTH
MAX_KEY_CHARS = 250  # MAX_ENTITY_KEY_LENGTH: a param's, metric's or tag's name
MAX_EXPERIMENT_NAME_CHARS = 500  # MAX_EXPERIMENT_NAME_LENGTH
# MLflow's SQL stores keep an infinite metric as the largest float and hand that back (`as_logged` reads it).
STORED_INFINITY = sys.float_info.max
# How runs are ordered when the newest is wanted.
NEWEST_FIRST = "attributes.start_time DESC"


def as_logged(value: float) -> float:
    """A metric value as it was logged: the SQL store's stand-in for an infinity (±`STORED_INFINITY`) read as that
    infinity, anything else as it is."""
    return math.copysign(math.inf, value) if abs(value) >= STORED_INFINITY else value


def quoted(value: object) -> str:
    """`value` as a string of an MLflow filter string: in single quotes, or in double quotes when it holds a single
    quote. MLflow strips the quotes and reads nothing inside them as an escape, so a value holding both cannot be
    written: a RunSelectionError."""
    text = str(value)
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    raise RunSelectionError(
        f"{text!r} holds both quote characters, which no MLflow filter string can match",
        fix="select the run by its id",
    )


def tag_is(name: str, value: object, op: str = "=") -> str:
    """A clause of an MLflow filter string on the tag `name`, backquoted: our names hold dots."""
    return f"tags.`{name}` {op} {quoted(value)}"


def tag_absent(name: str) -> str:
    """A clause of an MLflow filter string selecting runs without the tag `name`."""
    return f"tags.`{name}` IS NULL"


def attribute_is(name: str, value: object, op: str = "=") -> str:
    """A clause of an MLflow filter string on a run's attribute (`run_name`, `run_id`, `status`)."""
    return f"attributes.{name} {op} {quoted(value)}"


def status_is(status: str) -> str:
    """A clause of an MLflow filter string on a run's status (RUNNING, FINISHED, FAILED, KILLED)."""
    return attribute_is("status", status)


# The provenance record (`prov.<section>.<field>`, tracking/provenance/__init__.py::to_tags).
PROV_PREFIX = "prov."
WEIGHTS_TAG = f"{PROV_PREFIX}weights_sha256"  # the trained weights' SHA-256
INITIAL_WEIGHTS_TAG = f"{PROV_PREFIX}initial_weights_sha256"  # equal across runs that change no init seed
OP_DETERMINISM_TAG = f"{PROV_PREFIX}determinism.effective.op_determinism"  # as TensorFlow reports it
BACKEND_TAG = f"{PROV_PREFIX}determinism.effective.backend"  # the backend Keras trained on
GIT_COMMIT_TAG = f"{PROV_PREFIX}git.commit"
GIT_SNAPSHOT_TAG = f"{PROV_PREFIX}git.snapshot"  # the run's working tree, a commit object of ours in git
GIT_UNTRACKED_FIELD = f"{PROV_PREFIX}git.untracked_files"  # how many untracked files were beside it (in no snapshot)
SCRIPT_COMMAND_TAG = f"{PROV_PREFIX}script.command"  # a team's script run by tracking.start: its arguments
# ... or, for a run made in a Jupyter notebook, this: a kernel's arguments name its connection file, not its code.
NOTEBOOK_COMMAND = "(a Jupyter notebook's kernel: the cells it ran are not recorded)"
SCRIPT_STAGE_TAG = f"{PROV_PREFIX}script.stage"  # ... and the DVC stage that ran it (empty when DVC did not)
SCRIPT_PARAMS_TAG = f"{PROV_PREFIX}script.params"  # ... and its params file, relative to the project root
DVC_DEPS_SECTION = "dvc.deps"
DVC_DEPS_PREFIX = f"{PROV_PREFIX}{DVC_DEPS_SECTION}."  # + "<stage>.<path>": DVC's hash of each dependency

# What made the run and how it ended.
STAGE_TAG = "pipeline.stage"  # the stage that last wrote to the run
TRAINED_INPUTS_TAG = (
    "pipeline.inputs_sha256"  # what the train stage read; with the weights, what outputs/run.json holds
)
ERROR_TAG = "error"  # "<ExceptionType>: <message>" of a run that did not finish, or of a FINISHED run's later stage
REDACTED_PARAMS_TAG = "tracking.redacted_params"  # "<param>: <why>; ..." for params logged as <redacted>
RERUN_OF_TAG = "rerun_of"  # the run `tracking rerun` re-created
DVC_EXP_NAME_TAG = "dvc.exp_name"
DVC_BASELINE_REV_TAG = "dvc.baseline_rev"

# MLflow's own tags, set so its UI shows the commit, the data's role and the experiment's kind.
MLFLOW_GIT_COMMIT_TAG = "mlflow.source.git.commit"
MLFLOW_GIT_BRANCH_TAG = "mlflow.source.git.branch"
DATASET_CONTEXT_TAG = "mlflow.data.context"
DATASET_CONTENT_TAG = "content_sha256"  # on a run's dataset input: the data's full-content hash
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MLFLOW_PARENT_RUN_TAG = "mlflow.parentRunId"  # MLflow's link from a nested run to its parent
MLFLOW_NOTE_TAG = "mlflow.note.content"  # the run's description: markdown the UI shows first on the run page
SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # + a key: an experiment's page state, opened by its link

# Noise: the calibration's runs and the compare stage's verdict.
NOISE_ROLE_TAG = "noise.role"
CALIBRATION_ROLE = (
    "calibration"  # NOISE_ROLE_TAG's value on a calibration's parent run: `tracking diff` finds bands by it
)
NOISE_VARIANT_TAG = "noise.variant"
NOISE_REPEAT_TAG = "noise.repeat"
IMPL_NOISE_TAG = "noise.impl_noise"  # where a repeat's kernel noise came from
CONTROL_BIT_IDENTICAL_TAG = "noise.control_bit_identical"
VERDICT_TAG = "noise.verdict"
BAND_VARIANT_TAG = "noise.band_variant"
REASON_TAG = "noise.reason"
SECONDARY_EXCEEDING_TAG = "noise.secondary_exceeding"
REPEAT_KEY_TAG = "noise.repeat_key"  # what determines a repeat's result (tracking/repeats/kept.py)
REUSED_REPEATS_TAG = "noise.reused_repeats"  # on the parent: how many repeats an earlier calibration trained
# A candidate's extra runs (`compare.candidate_repeats`), children of its run: their index (1 to N-1), and under
# BAND_VARIANT_TAG the variant whose seeds and kernel noise they vary (never NOISE_VARIANT_TAG: no band holds them).
CANDIDATE_REPEAT_TAG = "noise.candidate_repeat"
# Under `compare.candidate_repeats: auto`, on the candidate's run: how many runs the verdict took and why it stopped
# ("3 of at most 10: decided"; "cap reached" or "undecidable" otherwise).
CANDIDATE_RUNS_TAG = "noise.candidate_runs"
# The verdict's metrics on the candidate's run, + a judged metric's name: the candidate runs' mean minus the band's
# mean, and the test's t statistic. They describe the candidates the verdict judged, not this run alone (before,
# `delta_` and `z_`, which read as this run's own).
CANDIDATES_GAP_PREFIX = "candidates_mean_gap_"
CANDIDATES_T_PREFIX = "candidates_t_"

# A sweep (`tracking sweep`, docs/sweeps.md): the experiments queued from one commit and judged against one
# calibration. The compare stage of a DVC experiment tags its candidate run with the sweep's name (`sweep_name`), so
# `tags.noise.sweep = '...'` finds the sweep; `tracking sweep` tags the runs it judged, and its parent run, the same.
SWEEP_TAG = "noise.sweep"
SWEEP_ROLE = "sweep"  # NOISE_ROLE_TAG's value on a sweep's parent run (its confirmation runs are its children)
SWEEP_RANK_TAG = "noise.sweep_rank"  # on a judged candidate's run: its rank in the sweep (1 is the best)
SWEEP_VERDICT_TAG = "noise.sweep_verdict"  # ... and its verdict in the family, beside its own (`noise.verdict`)


def sweep_name(baseline_rev: str, calibration_sha256: str) -> str:
    """The name of the sweep of experiments queued from commit `baseline_rev` and judged against the calibration
    whose calibration/noise.json has SHA-256 `calibration_sha256`: the commit's and the file's first 10 digits."""
    return f"{baseline_rev[:10]}-{calibration_sha256[:10]}"


# Where a training run ran (tracking/compute): the executor, the node, the process and the GPUs it could use.
COMPUTE_EXECUTOR_TAG = "compute.executor"
COMPUTE_NODE_TAG = "compute.node"
COMPUTE_PROCESS_TAG = "compute.process"
COMPUTE_GPU_TAG = "compute.gpu"
COMPUTE_ATTEMPT_TAG = "compute.attempt"  # 1, or more where a repeat's worker died and it was tried again

# The determinism audit: its parent run, each repeat, and what could not be made deterministic.
AUDIT_TAG = "audit"
AUDIT_PREFIX = "audit."
AUDIT_MODE_TAG = f"{AUDIT_PREFIX}mode"
AUDIT_REPEAT_TAG = f"{AUDIT_PREFIX}repeat"
AUDIT_KERNEL_NOISE_TAG = f"{AUDIT_PREFIX}kernel_noise"
AUDIT_UNSUPPORTED_OP_TAG = f"{AUDIT_PREFIX}unsupported_op"
AUDIT_UNSUPPORTED_LAYER_TAG = f"{AUDIT_PREFIX}unsupported_layer"

# Which process on which host owns a RUNNING run, its last sign of life (Unix seconds, from its background
# writer), and the note left when a dead one's run was repaired.
HOST_TAG = "tracking.host"
PID_TAG = "tracking.pid"
START_TAG = "tracking.pid_start"
HEARTBEAT_TAG = "tracking.heartbeat"
REPAIRED_TAG = "tracking.repaired"
# The end time (ms since the epoch) a FINISHED run had when a later stage resumed it: if that stage's process dies,
# the run is ended FINISHED again at that time, never FAILED (tracking/store/stale.py).
FINISHED_END_TAG = "tracking.finished_end"

# A run uploaded from the offline journal: the id and store it was first opened in, and what was kept.
SOURCE_TAG = "tracking.offline.source_run_id"
SOURCE_URI_TAG = "tracking.offline.source_uri"
SYNCED_TAG = "tracking.offline.synced"
