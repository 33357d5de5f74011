"""`tracking diff` output: plain text (default), Markdown, or JSON of the same `RunDiff`."""

from __future__ import annotations

import json
from typing import Any

from tracking.inspect.diff.changes import Change, GroupDiff
from tracking.inspect.diff.conclusion import RunDiff
from tracking.inspect.diff.metrics import around_baseline_mean
from tracking.names import WEIGHTS_TAG
from tracking.noise.notes import NOTES_HEADING, gist
from tracking.noise.power import DETECTED, NO_STD_INTERVAL, ceiling_clause
from tracking.noise.statistics import format_p

FORMATS = ("text", "md", "json")
_SHOWN = 8
_WIDTH = 40


def render(diff: RunDiff, fmt: str = "text", title: str = "tracking diff") -> str:
    """The diff as `fmt` (text, md or json), headed by the command that shows it (`title`)."""
    if fmt == "json":
        return json.dumps(diff.as_dict(), indent=2, default=str, allow_nan=False) + "\n"
    markdown = fmt == "md"
    summary = diff.as_dict()
    lines = [f"# {title}" if markdown else title, ""]
    lines += [_run_line("A", summary["a"], markdown), _run_line("B", summary["b"], markdown)]
    if summary["a"]["experiment_id"] != summary["b"]["experiment_id"]:
        note = (
            f"the runs are in different MLflow experiments ({summary['a']['experiment_id']} and "
            f"{summary['b']['experiment_id']}): check they are the comparison you mean"
        )
        lines.append(f"- {note}" if markdown else f"  {note}")
    lines.append("")
    lines.append(
        "## Differences, most likely to move results first"
        if markdown
        else "Differences, most likely to move results first:"
    )
    changed = [group for group in diff.groups if group.changes]
    for group in changed:
        lines += _group_lines(group, markdown)
    identical = [group for group in diff.groups if group.identical]
    if identical:
        summary = ", ".join(_identical(group) for group in identical)
        lines.append(f"- identical: {summary}" if markdown else f"  identical: {summary}")
    if not changed:
        lines.append(
            "  nothing differs in what the runs logged" if not markdown else "- nothing differs in what the runs logged"
        )
    lines += ["", _weights_line(diff), ""]
    lines += _metric_lines(diff, markdown)
    lines += ["", f"**Conclusion:** {diff.conclusion}" if markdown else f"Conclusion: {diff.conclusion}"]
    return "\n".join(lines) + "\n"


def _run_line(label: str, run: dict[str, Any], markdown: bool) -> str:
    name = f" {run['name']}" if run["name"] else ""
    exp = f", dvc exp {run['dvc_exp_name']}" if run.get("dvc_exp_name") else ""
    text = f"{label}: run {run['run_id']}{name} ({run['status']}{exp})"
    return f"- {text}" if markdown else text


def _group_lines(group: GroupDiff, markdown: bool) -> list[str]:
    head = f"{group.name} ({len(group.changes)} of {group.compared} fields differ): {group.note}"
    if markdown:
        lines = [f"### {head}", "", "| field | A | B |", "|---|---|---|"]
        lines += [
            f"| `{change.key}` | {_value(change.a)} | {_value(change.b)}{_step(group, change)} |"
            for change in group.changes
        ]
        return [*lines, ""]
    lines = [f"  {head}"]
    for change in group.changes[:_SHOWN]:
        lines.append(f"    {change.key:<{_WIDTH}} {_value(change.a)} -> {_value(change.b)}{_step(group, change)}")
    if len(group.changes) > _SHOWN:
        lines.append(f"    ... {len(group.changes) - _SHOWN} more (see --format json)")
    return lines


def _identical(group: GroupDiff) -> str:
    if group.name == "code":
        return f"code ({group.note})"
    return f"{group.name} ({group.compared} fields)"


def _value(value: Any) -> str:
    if value is None:
        return "(absent)"
    text = str(value)
    return text[:16] + "..." if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text[:60]


def _step(group: GroupDiff, change: Change) -> str:
    """The signed change between two data counts, e.g. " (+126)"; empty for anything else."""
    a, b = str(change.a), str(change.b)
    if group.name != "data" or not (a.isdigit() and b.isdigit()):
        return ""
    return f" ({int(b) - int(a):+d})"


def _weights_line(diff: RunDiff) -> str:
    if diff.weights_identical is None:
        return "Weights: not comparable (a run lacks prov.weights_sha256)"
    a, b = diff.a.tags[WEIGHTS_TAG], diff.b.tags[WEIGHTS_TAG]
    return (
        f"Weights: bit-identical (sha256 {a[:16]}...)"
        if diff.weights_identical
        else f"Weights: differ (sha256 {a[:16]}... vs {b[:16]}...)"
    )


def _metric_lines(diff: RunDiff, markdown: bool) -> list[str]:
    band = diff.band
    if band.get("variant"):
        head = (
            f"Metrics, B - A; B judged against the {band['variant'].upper()} band of calibration run {band['calibration_run']} "
            f"(n={band['repeats']}; chosen because {band['reason']}) around {band['reference']}; "
            f"t = gap / (std * sqrt(1 + 1/m)), m runs in that reference, p on n-1 degrees of freedom or, where "
            "larger, from heavier-tailed noise; "
            f"alpha {diff.alpha}, Holm over the metrics"
        )
    else:
        head = f"Metrics, B - A (no band: {band['reason']})"
    lines = [f"## {head}" if markdown else f"{head}:"]
    if markdown:
        lines += [
            "",
            "| metric | A | B | B - A | better/worse (of the gap t is from) | t | p | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
    for delta in diff.deltas:
        found = delta.judgement
        verdict = (
            "n/a"
            if found is None
            else found.verdict.replace("_", " ") + (f" ({gist(found.note)})" if found.note else "")
        )
        t = "" if delta.z is None else f"{delta.z:+.2f}"
        # better/worse stands beside the gap it is read from (`judged_gap`): the baseline mean's when t is from it
        shown = f" {delta.direction}" if delta.direction else ""
        gap, after_delta = (
            (f"  (B - baseline mean {found.reference:.6g}: {found.delta:+.4g}{shown})", "")
            if around_baseline_mean(found)
            else ("", shown)
        )
        p = "" if found is None or found.p_value is None else format_p(found.p_value)
        if markdown:
            lines.append(
                f"| {delta.metric} | {delta.a:.6g} | {delta.b:.6g} | {delta.delta:+.4g}{gap} | {delta.direction} | {t} | {p} | {verdict} |"
            )
        else:
            lines.append(
                f"  {delta.metric:<16} {delta.a:.6g} -> {delta.b:.6g}  {delta.delta:+.4g}{gap}{after_delta}  "
                f"{'t=' + t if t else ''}{'  p' + (' ' if p.startswith('<') else '=') + p if p else ''}  {verdict}"
            )
    if not diff.deltas:
        lines.append("  (neither run has the metrics asked for)")
    lines += [("- " if markdown else "  ") + sees for sees in _sees(diff)]
    return lines + _notes_in_full(diff, markdown)


def _notes_in_full(diff: RunDiff, markdown: bool) -> list[str]:
    """The notes the table shows short (`gist`), each whole, after everything else the metrics say."""
    long = [
        delta
        for delta in diff.deltas
        if delta.judgement is not None and gist(delta.judgement.note) != delta.judgement.note
    ]
    if not long:
        return []
    head = f"### {NOTES_HEADING}" if markdown else f"{NOTES_HEADING}:"
    return ["", head, *(f"{'- ' if markdown else '  '}{delta.metric}: {delta.judgement.note}" for delta in long)]


def _sees(diff: RunDiff) -> list[str]:
    """What the band can see, per judged metric: its std and the shift detected at least 80% of the time."""
    lines = []
    for delta in diff.deltas:
        found = delta.judgement
        if found is None or not found.band.std > 0 or found.detectable is None:
            continue
        lines.append(
            f"{delta.metric}: band std {found.band.std:.4g} (n={found.band.n}; {NO_STD_INTERVAL}); a true shift of "
            f"{found.detectable:.4g} "
            f"({found.detectable / found.band.std:.2f} band stds) is detected {DETECTED}"
            f"{ceiling_clause(found.band.std, found.ceiling_std)}"
        )
    return lines
