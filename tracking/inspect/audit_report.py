"""The determinism audit as people read it: `reports/audit.md` and a heat map of the pairwise error matrices."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracking.inspect.audit_measures import cost_text

PUBLISHED_GPU_COST = "1.0x to 7.5x"


def render(summary: dict[str, Any]) -> str:
    """Markdown: settings, one row per mode, the cost of determinism, then the matrices of each mode."""
    settings, modes = summary["settings"], summary["modes"]
    lines = [
        "# Determinism audit",
        "",
        f"`{settings['model']}` trained {settings['repeats']} times per mode, {settings['steps']} steps each "
        f"(the first {settings['steps']} of the configured {settings['configured_steps']}; batch size "
        f"{settings['batch_size']}, {settings['optimizer']}), on {settings['device']}, TensorFlow "
        f"{settings['tensorflow']}. Same seeds in every repeat; each step records SHA-256 hashes of the loss, "
        "every gradient and every weight.",
        "",
        "| mode | op determinism | kernel noise | bit-identical | first divergence | median step |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode in modes.values():
        lines.append(
            f"| {mode['label']} | {'on' if mode['op_determinism'] else 'off'} | {mode['kernel_noise']} | "
            f"{'yes' if mode['bit_identical'] else 'no'} | {mode['divergence_text'] or '—'} | "
            f"{mode['median_step_seconds'] * 1000:.2f} ms |"
        )
    lines.append("")
    if "time_ratio" in summary:
        lines += [
            f"**Cost of determinism: {cost_text(summary)}** (median step time, deterministic / "
            "non-deterministic; the interval from each pair of repeats' ratio, a t interval on the log scale; measured in this invocation with the modes alternating repeat by repeat; each "
            "repeat's first, tracing step left out).",
            "",
        ]
        if not settings["gpu"]:
            lines += [
                "On a CPU TensorFlow's kernels are deterministic anyway: the non-deterministic mode only "
                "simulates GPU reduction-order noise by permuting examples inside each batch, so this ratio "
                f"is not the cost of determinism on a GPU (published figures: {PUBLISHED_GPU_COST}).",
                "",
            ]
    for mode in modes.values():
        if mode["differing_tensors_at_divergence"]:
            names = mode["differing_tensors_at_divergence"]
            shown = ", ".join(f"`{name}`" for name in names[:12]) + (
                f" and {len(names) - 12} more" if len(names) > 12 else ""
            )
            lines += [f"Tensors differing at the first divergence ({mode['label']}): {shown}.", ""]
    lines += [
        "## Pairwise errors between repeats",
        "",
        "Sum of absolute differences between two repeats' values (test-set probabilities after training; the "
        "loss and all gradients at the first and last step); 0 means bit-identical.",
        "",
    ]
    for mode in modes.values():
        lines += [f"### {mode['label']}", ""]
        for name, matrix in mode["matrices"].items():
            lines += [f"{name}:", "", *_table(np.asarray(matrix)), ""]
    return "\n".join(lines)


def render_unsupported(found: dict[str, Any], settings: dict[str, Any]) -> str:
    """The report when an op has no deterministic implementation: which op, which layer, what to use instead."""
    return "\n".join(
        [
            "# Determinism audit",
            "",
            f"`{settings['model']}` could not be trained with op determinism on: an op has no deterministic implementation, "
            "so TensorFlow refused to run it. Nothing was compared.",
            "",
            f"- op: `{found['op']}`" + (f" (graph node `{found['node']}`)" if found.get("node") else ""),
            f"- layer: {found['layer'] or 'not found in the model (the op is outside a layer)'}",
            f"- TensorFlow said ({found['error_type']}): {found['reason']}",
            f"- known alternatives: {found['alternatives']}",
            "",
        ]
    )


def _table(matrix: np.ndarray) -> list[str]:
    header = "| | " + " | ".join(f"#{j}" for j in range(len(matrix))) + " |"
    rule = "| --- " * (len(matrix) + 1) + "|"
    rows = [f"| #{i} | " + " | ".join(_number(value) for value in row) + " |" for i, row in enumerate(matrix)]
    return [header, rule, *rows]


def _number(value: float) -> str:
    return "0" if value == 0 else f"{value:.3g}"


def figure(summary: dict[str, Any]) -> Any:
    """One heat map per matrix (columns) and mode (rows), annotated with the values; pyplot-free."""
    from matplotlib.figure import Figure

    modes = list(summary["modes"].values())
    names = list(modes[0]["matrices"])
    fig = Figure(figsize=(3.1 * len(names), 2.9 * len(modes)), layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(modes), len(names), squeeze=False))
    for row, mode in zip(axes, modes, strict=False):
        for axis, name in zip(row, names, strict=False):
            matrix = np.asarray(mode["matrices"][name])
            axis.imshow(matrix, cmap="viridis", vmin=0, vmax=max(float(matrix.max()), 1e-12))
            for (i, j), value in np.ndenumerate(matrix):
                axis.text(
                    j,
                    i,
                    _number(value),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if value < 0.5 * max(float(matrix.max()), 1e-12) else "black",
                )
            ticks = range(len(matrix))
            axis.set_xticks(ticks, [f"#{k}" for k in ticks], fontsize=7)
            axis.set_yticks(ticks, [f"#{k}" for k in ticks], fontsize=7)
            axis.set_title(f"{mode['label']}\n{name}", fontsize=8)
    fig.suptitle("Sum of absolute differences between repeats", fontsize=10)
    return fig
