"""`make bench`: run every benchmark here, one process each, and write what they printed to docs/performance.md.

The page is written only from this run's output, with the machine it ran on, so the figures in the docs are
always ones a script printed. Each script's output streams to the terminal as it runs (progress on stderr).
Run from the project root: `.venv/bin/python bench/report.py [--only tracking_overhead ... [--update]]`;
`--update` replaces only those benches' sections, each dated, and keeps the rest of the page.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tracking.provenance.hardware import gather_cpu

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs/performance.md"
# The GPU check's last output, committed from the machine it ran on (bench/gpu_check.py).
GPU_PAGE = REPO / "docs/gpu-check.md"


@dataclass(frozen=True)
class Bench:
    """One script, how it is run and what its section of the page says it measures."""

    script: str
    args: tuple[str, ...]
    title: str
    measures: str


BENCHES = (
    Bench(
        "pipeline_speed.py",
        (),
        "The pipeline as a user runs it",
        "In a fresh clone: `tracking --help` (target under 0.3 s), a cold `dvc repro` of the default pipeline "
        "with each stage's time and its start-up line (`train: started in ...`: what it paid before its work, "
        "each part timed from the one before: `imports` is Python, the stage's imports and params, twice "
        "where the stage re-executes itself to pin PYTHONHASHSEED; `judging` reads the calibration and judges "
        "the candidate; `MLflow store` opens the store; `TensorFlow` imports TensorFlow and Keras; `first "
        "step` builds the model, logs its provenance and takes the first training step; target under 150 s in "
        "all), and a `dvc repro` with nothing to do (target under 3 s).",
    ),
    Bench(
        "calibration_repeat.py",
        (),
        "A calibration repeat next to bare training",
        "What the `calibrate` stage does per repeat (child run, model reset and re-seeded, training, scoring, "
        "logging) next to a team's own untracked build-and-fit of the same configuration, alternating in one "
        "process. Target: a repeat at most 1.15 times the bare training.",
    ),
    Bench(
        "tracking_overhead.py",
        (),
        "Cost of tracking",
        "The `train` stage's training untracked, tracked by us (MLflow's system metrics as `compute.system_metrics` "
        "says, and without them for their own cost) and tracked by MLflow's own `mlflow.keras.autolog()`, "
        "alternating in one process; the cost split into per epoch (on the training thread) and per run; what a run "
        "costs over the untracked training in CPU seconds, ours against autolog's (goal: ours/autolog at most 1), "
        "with what each records; each run's phases outside `fit`, and for each arm's slowest run the phase it lost "
        "time in and what its main thread waited on there; our per-run fixed cost part by part. Target: ratio at "
        "most 1.02.",
    ),
    Bench(
        "tracking_overhead.py",
        ("--epochs", "320", "--repeats", "3"),
        "Cost of tracking on a training of about a minute",
        "The same, with the default model trained 320 epochs (about a minute on 2 cores), where a run's fixed cost is "
        "a realistic share of its training: ours and autolog's tracked/untracked ratios side by side. Target: ratio "
        "at most 1.02.",
    ),
    Bench(
        "data_scale.py",
        (),
        "A team's data at its real size",
        "Per size (0.5, 1, 2 and 4 GB of memory-mapped shards read by a team's `PyDataset` loader, a tiny model, one "
        "epoch), each stage through `dvc repro` in a fresh project with DVC's cache hardlinked: wall and CPU time, "
        "time per GB, the peak anonymous memory of the stage's processes (RssAnon, DVC's own left out) and the "
        "project's peak disk (data, DVC's cache and scratch, each inode once) against the data set; the full-content "
        "hash's throughput beside `sha256sum` and `dvc add`; the trained weights in memory and memory-mapped. "
        "Targets: train's and calibrate's peak anonymous memory flat (within 0.2 GB from 0.5 to 4 GB) and under "
        "1.5 GB, prepare's disk peak at most 2.1x the data set, time per GB about constant, weights bit-identical.",
    ),
    Bench(
        "cluster_speedup.py",
        (),
        "Calibration on Ray next to the local executor",
        "In a fresh clone: the default calibration (20 repeats) from nothing kept, with `compute.executor: local` "
        "(one process), with `ray` (a private Ray, one worker per core) and with `ray` on a cluster already running "
        "(`compute.address`, as teams use one), then the machine's own ceiling: the same bare training, untracked, in "
        "one process alone (before and after) and in one per core at once. Three rounds of all of that, every other "
        "one in reverse order, and the fastest of each measurement counts: wall times, the speed-up (target: at least "
        "1.6 on 2 cores), whether all trained the same weights, repeat for repeat, and each Ray calibration's share of "
        "the ceiling (target with the running cluster: 95%), round by round and from the fastest of each.",
    ),
    Bench(
        "noise_metrics_speed.py",
        (),
        "Speed of the noise statistics",
        "Pairwise churn and weight-distance matrices, their summaries and a band on 1,000 runs x 10,000 test "
        "predictions x 100,000 weights (synthetic). Limits: 10 s and 2 GiB.",
    ),
    Bench(
        "redaction_speed.py",
        (),
        "Speed of the redactor",
        "`tracking.redaction` on one line of `x<i> ghp_<36 characters>` pairs, its distinct tokens growing with its "
        "length (25 kB with 500 to 10 MB with 100,000), then 10 MB with 1,000, 10,000 and 100,000 tokens: a file "
        "name's redaction (`redact_name`: tokens found by RE2, then taken out), the one-pass replacement alone "
        "(`replace_all`) and the replacement it took the place of (one `str.replace` a token, up to 400,000 "
        "characters), each beside its seconds per million characters. Target (issue 64): 10 MB with 100,000 "
        "distinct tokens in seconds, seconds per million characters flat in length and tokens (linear time).",
    ),
    Bench(
        "sweep_family.py",
        (),
        "A sweep judged as one family",
        "`tracking.noise.sweep.judge_sweep` by Monte Carlo (issue 66), the default design (5 band runs, 3 runs a "
        "candidate, test_accuracy and test_loss) under normal, t(3), 10% bad seeds and capped-accuracy noise, each "
        "rate with its 95% Wilson interval and Monte Carlo error: how often K = 1, 5, 10, 20 candidates that change "
        "nothing raise a false alarm judged as one family (Holm; Benjamini-Hochberg) against K separate verdicts "
        "(goal: the family at most 5% plus its MC error); the power to find one real winner 3 stds off among K; the "
        "best of 8 confirmed on fresh runs (selected gap, confirmed gap and the truth); the playbook's study (each "
        "value's best as the largest of its nuisance settings); how often candidates without effect are within noise "
        "at the family's levels; the trainings a sweep of 8 costs; the expected best's bootstrap band's coverage.",
    ),
    Bench(
        "verdict_quality.py",
        (),
        "Quality of the compare verdict",
        "The public `tracking.judge` on simulated statistics, 2,000 independent calibrations a cell with 95% Wilson "
        "intervals: false alarms, within_noise and inconclusive under six noise models (normal, t(3), bad seeds, "
        "discrete accuracies, a class near its ceiling); how often a shift at min_effect is still called within "
        "noise; whether 'a true shift of X is detected at least 80% of the time' comes true; and each `tracking plan` "
        "option followed.",
    ),
    Bench(
        "tolerance_quality.py",
        ("--only", "defaults", "--trials", "1000"),
        "Defaults that can say same",
        "The public `tracking.judge` at the default design (5 calibration runs, 3 candidate runs, test_accuracy and "
        "test_loss, each metric's default `compare.min_effect`: the larger of 4 band stds and its anchor), 1,000 "
        "independent calibrations a cell with 95% Wilson intervals, under normal, t(3), 10% bad seeds and "
        "capped-accuracy noise: a candidate without effect called `within_noise` (goal: at least 80%) and "
        "`exceeds_noise` (false alarms, at most alpha); a true drop of the default min_effect detected (at least "
        "80%); what each design sees of the default's 4 band stds; and under the cap, a true drop of a named "
        "min_effect the design does not see called `within_noise` (equivalence's error: at most alpha/2), beside the "
        "rate the band's tied std gave before.",
    ),
)


def machine() -> list[str]:
    """The machine the figures come from: CPU model, cores and the instruction sets that change numerics (weights
    hashes hold per machine: an AVX-512 CPU trains other bits than an AVX2 one), memory, OS, Python, GPU if any."""
    cpu = gather_cpu()
    numerics = ", ".join(flag for flag, present in cpu["numeric_flags"].items() if present) or "none listed"
    memory = next((line.split()[1] for line in _read("/proc/meminfo").splitlines() if line.startswith("MemTotal")), "")
    gpus = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=False
        ).stdout.split("\n")
        if _has("nvidia-smi")
        else []
    )
    return [
        f"- CPU: {cpu['model']}, {cpu['usable_cores']} cores visible"
        + (f", {int(memory) / 2**20:.0f} GiB memory" if memory else ""),
        f"- instruction sets that change numerics: {numerics}",
        f"- GPU: {', '.join(name for name in gpus if name) or 'none'}",
        f"- OS: {platform.platform()}; Python {platform.python_version()}",
    ]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _has(command: str) -> bool:
    return any((Path(folder) / command).exists() for folder in os.environ.get("PATH", "").split(os.pathsep))


def run(bench: Bench) -> tuple[str, float]:
    """Run one script, echoing its output; return what it printed and how long it took."""
    print(f"== bench/{bench.script}", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / bench.script), *bench.args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in process.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    if process.wait() != 0:
        sys.exit(f"error: bench/{bench.script} failed (exit {process.returncode}); run it alone to see why")
    return "".join(lines).rstrip("\n"), time.perf_counter() - started


def page(results: list[tuple[Bench, str, float]]) -> str:
    """docs/performance.md from this run's output."""
    today = datetime.date.today().isoformat()
    parts = [
        "# Performance",
        "",
        f"Written by `make bench` on {today} (bench/report.py): every figure below is what a script in `bench/`",
        "printed in that run, on this machine. Re-run `make bench` to get yours; the test suite asserts no timings.",
        "",
        *machine(),
        "",
    ]
    for bench, output, seconds in results:
        parts += section(bench, output, f"{seconds:.0f} s")
    if GPU_PAGE.is_file():  # figures from a GPU machine, which `make bench` on this one cannot produce
        parts += ["## On a GPU (bench/gpu_check.py)", "", *GPU_PAGE.read_text().splitlines()[2:], ""]
    return "\n".join(parts)


def section(bench: Bench, output: str, when: str) -> list[str]:
    """One bench's section of the page: what it measures, its command, `when` (its time, and date if not the
    page's), and what it printed."""
    command = " ".join([".venv/bin/python", f"bench/{bench.script}", *bench.args])
    return [f"## {bench.title}", "", bench.measures, "", f"`{command}` ({when}):", "", "```text", output, "```", ""]


def updated(text: str, results: list[tuple[Bench, str, float]]) -> str:
    """The page `text` with the sections of `results` replaced by this run's, each with its date and machine (a
    bench re-run alone, `--only ... --update`), the rest of the page as its full run wrote it."""
    today = datetime.date.today().isoformat()
    cpu, _, _, system = (line.removeprefix("- ") for line in machine())
    lines = text.split("\n")
    for bench, output, seconds in results:
        if f"## {bench.title}" not in lines:  # a bench new to the page: its place in BENCHES order
            lines[_place(lines, bench) : _place(lines, bench)] = [f"## {bench.title}", ""]
        start = lines.index(f"## {bench.title}")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = section(bench, output, f"{seconds:.0f} s, re-run alone on {today}: {cpu}; {system}")
    return "\n".join(lines)


def _place(lines: list[str], bench: Bench) -> int:
    """Where a bench new to the page goes: before the section of the first bench after it in BENCHES that the page
    has, else before the GPU section, else at the end."""
    later = [f"## {other.title}" for other in BENCHES[BENCHES.index(bench) + 1 :]]
    later.append("## On a GPU (bench/gpu_check.py)")
    return next((lines.index(title) for title in later if title in lines), len(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these benches (file names without .py)")
    parser.add_argument(
        "--update", action="store_true", help="with --only: replace those benches' sections of the page, dated"
    )
    args = parser.parse_args()
    if args.update and not args.only:
        parser.error("--update replaces the sections of the benches --only names; without it the page is written whole")
    chosen = [bench for bench in BENCHES if not args.only or bench.script.removesuffix(".py") in args.only]
    results = [(bench, *run(bench)) for bench in chosen]
    if args.only and not args.update:
        print("(--only: docs/performance.md left as it is; --update replaces these sections, dated)")
        return
    PAGE.write_text(updated(PAGE.read_text(), results) if args.update else page(results))
    print(f"wrote {PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
