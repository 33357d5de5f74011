"""Determinism audit: compare step-by-step traces of repeated trainings, and explain ops that cannot be deterministic.

A `Trace` holds, for each repeat of one mode and each training step, the SHA-256 of the loss, of every
gradient and of every weight after the update (named by variable path), plus the loss and flattened
gradients of the first and last step, the test-set probabilities after training and the wall time of each
step. From two traces (op determinism on, and off) this module says whether the repeats are bit-identical,
where they first diverge, how far apart they end up (R x R sums of absolute differences, as in the tables of
NVIDIA's framework-determinism write-up) and what determinism costs in time. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracking.determinism.settings import determinism_refusal, strip_ansi

MODES = ("det", "nondet")
MODE_LABELS = {"det": "deterministic", "nondet": "non-deterministic"}
# Exit status of an audit trainer that met an op without a deterministic implementation (it wrote UNSUPPORTED_FILE).
UNSUPPORTED_OP_EXIT = 3
UNSUPPORTED_FILE = "unsupported_op.json"
# Lines between the audit stage and its trainer processes: set up / train one repeat / repeat trained.
READY, GO, DONE = "ready", "go", "done"
# The cost of determinism's interval is at 1 - COST_ALPHA (docs/audit.md).
COST_ALPHA = 0.05
_TRACE_ARRAYS = "trace.npz"
_TRACE_META = "trace.json"


@dataclass(frozen=True)
class Trace:
    """Everything recorded for the R repeats of one mode, S steps each, T hashed tensors per step."""

    mode: str
    tensor_names: list[str]  # "loss", then "gradient/<variable path>", then "weight/<variable path>"
    hashes: np.ndarray  # (R, S, T) hex SHA-256 of each tensor
    loss: np.ndarray  # (R, 2) loss of the first and the last step
    gradients: np.ndarray  # (R, 2, P) every gradient of the first and the last step, flattened and concatenated
    predictions: np.ndarray  # (R, N, C) test-set probabilities after the last step
    step_seconds: np.ndarray  # (R, S) wall time of each training step
    meta: dict[str, Any]  # per-repeat seeds and weight hashes, effective determinism, kernel-noise source, ...

    @property
    def repeats(self) -> int:
        return int(self.hashes.shape[0])

    @property
    def steps(self) -> int:
        return int(self.hashes.shape[1])

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        np.savez(
            folder / _TRACE_ARRAYS,
            hashes=self.hashes,
            loss=self.loss,
            gradients=self.gradients,
            predictions=self.predictions,
            step_seconds=self.step_seconds,
        )
        (folder / _TRACE_META).write_text(
            json.dumps({"mode": self.mode, "tensor_names": self.tensor_names, "meta": self.meta}, indent=2) + "\n"
        )

    @classmethod
    def load(cls, folder: Path) -> Trace:
        info = json.loads((folder / _TRACE_META).read_text())
        with np.load(folder / _TRACE_ARRAYS, allow_pickle=False) as arrays:
            return cls(
                info["mode"],
                info["tensor_names"],
                arrays["hashes"],
                arrays["loss"],
                arrays["gradients"],
                arrays["predictions"],
                arrays["step_seconds"],
                info["meta"],
            )


@dataclass(frozen=True)
class Divergence:
    """Where repeats first differ from repeat 0: the step (0-based; None for the predictions after training)."""

    step: int | None
    tensor: str
    repeats: list[int]  # the repeats that differ from repeat 0 there

    def describe(self) -> str:
        where = "the test predictions after training" if self.step is None else f"step {self.step + 1}"
        others = ", ".join(f"#{r}" for r in self.repeats)
        return f"{where}, `{self.tensor}` (repeat {others} vs #0)"


def first_divergence(
    hashes: np.ndarray, tensor_names: list[str], predictions: np.ndarray | None = None
) -> Divergence | None:
    """The first step, and within it the first tensor in `tensor_names` order, at which any repeat differs from repeat 0.

    With identical traces, differing `predictions` are reported as a divergence after training. None when
    every repeat is bit-identical to repeat 0.
    """
    differs = hashes[1:] != hashes[0]  # (R-1, S, T)
    if differs.any():
        step = int(np.argmax(differs.any(axis=(0, 2))))
        tensor = int(np.argmax(differs[:, step, :].any(axis=0)))
        return Divergence(step, tensor_names[tensor], [int(r) + 1 for r in np.flatnonzero(differs[:, step, tensor])])
    if predictions is not None:
        same = [np.array_equal(predictions[0], other) for other in predictions[1:]]
        if not all(same):
            return Divergence(None, "predictions", [index + 1 for index, equal in enumerate(same) if not equal])
    return None


def pairwise_sad(values: np.ndarray) -> np.ndarray:
    """(R, R) sum of absolute differences between every pair of R repeats' arrays (given stacked), in float64."""
    flat = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    return np.abs(flat[:, None, :] - flat[None, :, :]).sum(axis=2)


def error_matrices(trace: Trace) -> dict[str, np.ndarray]:
    """The pairwise error matrices of one mode: predictions, then loss and gradients at the first and last step."""
    last = trace.steps
    return {
        "predictions": pairwise_sad(trace.predictions),
        "loss, step 1": pairwise_sad(trace.loss[:, 0]),
        f"loss, step {last}": pairwise_sad(trace.loss[:, 1]),
        "gradients, step 1": pairwise_sad(trace.gradients[:, 0]),
        f"gradients, step {last}": pairwise_sad(trace.gradients[:, 1]),
    }


def median_step_seconds(step_seconds: np.ndarray) -> float:
    """Median wall time of a training step over all repeats; each repeat's first step (tracing) is left out when S > 1."""
    timed = step_seconds[:, 1:] if step_seconds.shape[1] > 1 else step_seconds
    return float(np.median(timed))


def cost_interval(det: np.ndarray, nondet: np.ndarray, alpha: float = COST_ALPHA) -> tuple[float, float] | None:
    """The 1-α interval of the cost of determinism from R paired repeats ((R, S) step times per mode, repeat i of
    each mode trained back to back): a t interval, R-1 degrees of freedom, on the mean log ratio of the pairs'
    median step times, exponentiated. The repeat is the unit: the machine's load moves whole repeats (0.583x, then
    1.025x, back to back in issue 34), so steps within one are not independent. None where the pairs' log ratios
    are all equal (no spread to measure) or a time is not a positive number."""
    from scipy import stats

    pairs = np.array(
        [[median_step_seconds(d[None]), median_step_seconds(n[None])] for d, n in zip(det, nondet, strict=True)]
    )
    if len(pairs) < 2 or not (np.isfinite(pairs).all() and (pairs > 0).all()):
        return None
    logs = np.log(pairs[:, 0]) - np.log(pairs[:, 1])
    if (logs == logs[0]).all():
        return None
    half = float(stats.t.ppf(1 - alpha / 2, len(logs) - 1)) * float(logs.std(ddof=1)) / np.sqrt(len(logs))
    return float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


def cost_text(summary: dict[str, Any]) -> str:
    """The cost of determinism as the audit prints it, e.g. `1.017x (95% interval 0.95x to 1.09x, 3 paired repeats)`."""
    found = summary["time_ratio_interval"]
    repeats = summary["modes"]["det"]["repeats"]
    interval = (
        f"{1 - COST_ALPHA:.0%} interval {found[0]:.3f}x to {found[1]:.3f}x"
        if found
        else "no interval: the paired repeats' ratios have no spread"
    )
    return f"{summary['time_ratio']:.3f}x ({interval}, {repeats} paired repeats)"


def summarise(traces: dict[str, Trace], settings: dict[str, Any]) -> dict[str, Any]:
    """The audit as JSON-ready data: per mode, bit-identity, first divergence, matrices and timings; the time ratio."""
    modes = {}
    for mode, trace in traces.items():
        divergence = first_divergence(trace.hashes, trace.tensor_names, trace.predictions)
        modes[mode] = {
            "label": MODE_LABELS[mode],
            "repeats": trace.repeats,
            "steps": trace.steps,
            "bit_identical": divergence is None,
            "divergence": asdict(divergence) if divergence else None,
            "divergence_text": divergence.describe() if divergence else None,
            "differing_tensors_at_divergence": _differing_tensors(trace, divergence),
            "matrices": {name: matrix.tolist() for name, matrix in error_matrices(trace).items()},
            "median_step_seconds": median_step_seconds(trace.step_seconds),
            "run_seconds": trace.step_seconds.sum(axis=1).tolist(),
            **{key: value for key, value in trace.meta.items() if key != "provenance"},
        }
    summary: dict[str, Any] = {"settings": settings, "modes": modes}
    if "det" in modes and "nondet" in modes:
        summary["time_ratio"] = modes["det"]["median_step_seconds"] / modes["nondet"]["median_step_seconds"]
        summary["time_ratio_interval"] = cost_interval(traces["det"].step_seconds, traces["nondet"].step_seconds)
    return summary


def _differing_tensors(trace: Trace, divergence: Divergence | None) -> list[str]:
    """Every tensor that differs from repeat 0 at the divergence step, in order."""
    if divergence is None or divergence.step is None:
        return []
    differs = (trace.hashes[1:, divergence.step, :] != trace.hashes[0, divergence.step, :]).any(axis=0)
    return [name for name, flag in zip(trace.tensor_names, differs, strict=False) if flag]


# Ops that raise under op determinism, and what to use instead. Sources: TensorFlow's `enable_op_determinism`
# documentation, and the status table of NVIDIA's framework-reproducibility (GPU ops without a solution).
_ALTERNATIVES: list[tuple[str, str]] = [
    (
        r"random|multinomial|shuffle|truncatednormal|parameterizedtruncated",
        "give the op a seed (`tf.random.uniform(..., seed=1)`), or use stateless random ops "
        "(`tf.random.stateless_uniform`) or `keras.random.*` with a `keras.random.SeedGenerator(seed)`; "
        "Keras layers such as Dropout take `seed=`",
    ),
    (
        r"timestamp",
        "do not read the clock inside the model: measure time outside `tf.function` "
        "(Python's `time.perf_counter`), or pass it in as an input",
    ),
    (
        r"fractional",
        "pass non-zero `seed` and `seed2` (e.g. `tf.nn.fractional_max_pool(x, ratio, seed=1)`), "
        "or use `keras.layers.MaxPooling2D` / `AveragePooling2D`",
    ),
    (
        r"sample_distorted_bounding_box|sampledistortedboundingbox",
        "pass a seed, or use `tf.image.stateless_sample_distorted_bounding_box`",
    ),
    (r"non_deterministic_state", "create the generator with `tf.random.Generator.from_seed(seed)`"),
    (
        r"unsorted.?segment|segment",
        "use `tf.math.segment_sum` on sorted ids, or a one-hot matmul "
        "(`tf.one_hot(ids, n) @ data`, transposed as needed), or run the op on the CPU",
    ),
    (
        r"sparse.?dense.?mat.?mul|sparsetensordensematmul",
        "`tf.sparse.to_dense` then `tf.matmul`, or run the op on the CPU",
    ),
    (r"bincount", "a one-hot sum (`tf.reduce_sum(tf.one_hot(x, n), 0)`), or run `tf.math.bincount` on the CPU"),
    (
        r"batchnorm|batch_norm",
        "do not back-propagate through BatchNormalization called with `training=False` "
        "(freeze the layer: `layer.trainable = False`), or fine-tune with `training=True`",
    ),
    (
        r"resize|upsampling|crop_and_resize|cropandresize",
        "bilinear instead of nearest-neighbour resizing (its backprop is deterministic), or resize on the CPU / in the input pipeline",
    ),
    (
        r"adjust_?contrast|adjustcontrast",
        "compute the contrast adjustment with plain ops (mean, subtract, scale), or on the CPU",
    ),
]
_GENERIC_ALTERNATIVE = (
    "run the op on the CPU (`with tf.device('/CPU:0')`), or rebuild it from deterministic ops; "
    "see TensorFlow's `tf.config.experimental.enable_op_determinism` documentation and NVIDIA "
    "framework-reproducibility's TensorFlow status page"
)
_NODE = re.compile(r"\{\{node ([^}]+)\}\}|Detected at node '?([^\s']+)")
_OP_IN_TEXT = [
    (re.compile(r"(tf(?:\.\w+)+) requires", re.I), 1),
    (re.compile(r"Deterministic GPU implementation of ([\w ]+?) (?:op )?(?:is )?not available", re.I), 1),
    (re.compile(r"\"?(from_non_deterministic_state)\"? cannot be called", re.I), 1),
    (re.compile(r"^(\w+) cannot be called when determinism is enabled", re.I | re.M), 1),
    (re.compile(r"\[Op:(\w+)\]"), 1),  # an op run eagerly (the model checked before training, tracking/training)
]


def diagnose(error: BaseException, layers: list[Any]) -> dict[str, Any]:
    """Which op refused to run deterministically, in which Keras layer, and the known alternatives.

    The layer comes from the traceback (an error raised while tracing a layer's `call`) or else from the
    graph node's name scopes (an error raised by a kernel at run time); `layers` are the model's layers.
    """
    text = str(error)
    node = next((match.group(1) or match.group(2) for match in _NODE.finditer(text)), None)
    op = next((match.group(group) for pattern, group in _OP_IN_TEXT if (match := pattern.search(text))), None)
    if op is None and node:
        op = re.sub(r"_\d+$", "", node.rsplit("/", 1)[-1])
    layer = _layer_from_traceback(error) or _layer_from_node(node, layers)
    reason = determinism_refusal(error) or (strip_ansi(text).strip().splitlines() or [type(error).__name__])[-1][:300]
    key = (op or reason).lower()
    alternatives = next((advice for pattern, advice in _ALTERNATIVES if re.search(pattern, key)), _GENERIC_ALTERNATIVE)
    return {
        "op": op or "unknown",
        "node": node,
        "layer": layer,
        "error_type": type(error).__name__,
        "reason": reason,
        "alternatives": alternatives,
    }


def unsupported_line(found: dict[str, Any]) -> str:
    """The one line a user sees for an op without a deterministic implementation."""
    layer = f" in layer {found['layer']}" if found.get("layer") else ""
    return (
        f"op {found['op']}{layer} has no deterministic implementation ({found['reason']}); "
        f"alternatives: {found['alternatives']}"
    )


def _layer_from_traceback(error: BaseException) -> str | None:
    """The innermost frame running a Keras layer's method (its `self` has `call` and `trainable_weights`)."""
    found = None
    traceback = error.__traceback__
    while traceback is not None:
        owner = traceback.tb_frame.f_locals.get("self")
        if hasattr(owner, "call") and hasattr(owner, "trainable_weights") and hasattr(owner, "name"):
            found = owner
        traceback = traceback.tb_next
    return _layer_name(found) if found is not None else None


def _layer_from_node(node: str | None, layers: list[Any]) -> str | None:
    """The deepest name scope of `node` that names a layer (scopes may carry a `_<n>` suffix the layer lacks)."""
    if not node:
        return None
    by_name = {layer.name: layer for layer in layers}
    found = None
    for scope in node.split("/")[:-1]:
        layer = by_name.get(scope) or by_name.get(re.sub(r"_\d+$", "", scope))
        found = layer or found
    return _layer_name(found) if found is not None else None


def _layer_name(layer: Any) -> str:
    return f"'{layer.name}' ({type(layer).__name__})"
