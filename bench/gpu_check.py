"""The GPU check: the product's own training path on each Keras backend, determinism on and off, bands and cost.

One command, on a machine with an NVIDIA GPU and JAX or PyTorch (TensorFlow too where installed), or on a CPU:

    python bench/gpu_check.py --out OUT [--backends jax torch] [--runs 5] [--epochs 8]

For each backend and each model (`small_cnn`, `small_resnet` of pipelines/models.py, on the embedded digits split
as `prepare` splits it) it trains in processes of its own (XLA reads its flags once per process), each run as a
calibration repeat trains (tracking/training/repeat.py: the model prepared once and re-seeded, fitted with
validation, scored):
- determinism on: a warm-up run, then `--runs` runs on the same seeds (CONTROL: bit-identical or not, and the
  timed runs), then `--runs` runs with every seed drawn afresh (the ALGO band);
- determinism off: a warm-up run, then `--runs` runs on the same seeds (the IMPL band: what the kernels alone vary).
It writes `gpu_check.json` and `gpu_check.md` to OUT: NVML's provenance (GPU, driver, CUDA), CONTROL's verdict, the
share of the ALGO band's spread the IMPL band reaches (std ratio, with its F interval, which assumes normal noise),
and the cost of determinism (mean time on over off, warm-up runs left out, with a 95% interval from the log times).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The models checked: builder and its kwargs, small enough to train in seconds on digits (8x8x1 images).
MODELS = {
    "small_cnn": (
        "pipelines.models:small_cnn",
        {"filters": [32, 64, 128], "dense_units": 128, "dropout": 0.2},
    ),
    "small_resnet": ("pipelines.models:small_resnet", {"filters": [16, 32, 64], "blocks": 1}),
}
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}
# `--tiny`: the same models with the narrowest widths, to check the check itself on a CPU in seconds (the suite);
# with augmentation, so that every seed has draws to move, on the first `TINY_SAMPLES` training images.
TINY_WIDTHS = {
    "small_cnn": {"filters": [4, 4, 4], "dense_units": 8, "augment": True},
    "small_resnet": {"filters": [4, 4], "augment": True},
}
TINY_SAMPLES = 256
SEED = 42
# The seeds that each decide one source of randomness: the check moves each alone (the others kept).
SOURCES = ("init", "shuffle", "dropout", "augment")


def builders_without_stage_guard() -> None:
    """Make `pipelines.models` importable without `pipelines/__init__.py`, whose guard stops a stage on an
    interpreter without the whole project (MLflow, DVC, TensorFlow): the check needs only the builders, and a GPU
    machine's interpreter has JAX or PyTorch and the wheels carried for the training path."""
    package = types.ModuleType("pipelines")
    package.__path__ = [str(REPO / "pipelines")]
    sys.modules.setdefault("pipelines", package)


def child(backend: str, model: str, determinism: bool, runs: int, epochs: int, tiny: bool) -> None:
    """Train one backend/model/determinism cell in this process and print one JSON line per run."""
    builders_without_stage_guard()
    from tracking.config.params import Params
    from tracking.data.dataset import load_source
    from tracking.determinism.process import reproducible_process, seed_frameworks
    from tracking.determinism.settings import as_record, build_record
    from tracking.repeats.variants import algo_seeds
    from tracking.stages.prepare import split

    builder, kwargs = MODELS[model]
    kwargs = {**kwargs, **(TINY_WIDTHS[model] if tiny else {})}
    params = Params.model_validate(
        {
            "seeds": {"base": SEED},
            "determinism": {"backend": backend, "op_determinism": determinism},
            "model": {"builder": builder, "kwargs": kwargs},
            "train": {"epochs": epochs, "batch_size": 32},
        }
    )
    seeds = reproducible_process(params)
    source = load_source(params.data.source, REPO)
    splits = split(source, params.data, params.data.split_seed)
    if tiny:
        splits["train"] = {name: array[:TINY_SAMPLES] for name, array in splits["train"].items()}
    effective = seed_frameworks(params, seeds)
    from tracking.training.model import BuildInputs, RepeatedModel
    from tracking.training.repeat import train_and_score

    models = RepeatedModel(BuildInputs(splits["train"], 10, None, REPO))
    plan = [("warm-up", seeds), *((("control", seeds),) * runs)]
    if determinism:
        plan += [("algo", algo_seeds(seeds, repeat)) for repeat in range(runs)]
        plan += [(f"seed:{name}", replace(seeds, **{name: getattr(seeds, name) + 1})) for name in SOURCES]
    for index, (role, run_seeds) in enumerate(plan):
        effective = seed_frameworks(params, run_seeds)
        built = models.prepare(params, run_seeds)
        start = time.perf_counter()
        trained = train_and_score(built, params, run_seeds, splits, 10, None)
        seconds = time.perf_counter() - start
        line = {
            "role": role,
            "index": index,
            "seconds": seconds,
            "weights_sha256": trained.weights_sha256,
            "initial_weights_sha256": built.initial_weights_sha256,
            "test_accuracy": trained.metrics["test_accuracy"],
            "test_loss": trained.metrics["test_loss"],
        }
        if index == 0:
            line["determinism"] = as_record(params.determinism, effective)
            line["build"] = build_record()
            line["train_images"] = len(splits["train"]["y"])
        print(json.dumps(line), flush=True)


class CellFailed(Exception):
    """A cell's process failed: its message is the end of what it printed on stderr."""


def run_cell(backend: str, model: str, determinism: bool, runs: int, epochs: int, tiny: bool) -> list[dict[str, Any]]:
    """One cell in a child process: its JSON lines; `CellFailed` with the end of its stderr where it failed."""
    command = [sys.executable, __file__, "--child", backend, model, "on" if determinism else "off"]
    command += ["--runs", str(runs), "--epochs", str(epochs), *(["--tiny"] if tiny else [])]
    env = {name: value for name, value in os.environ.items() if name != "KERAS_BACKEND"}  # the child picks its own
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env)
    if done.returncode != 0:
        tail = " / ".join(done.stderr.strip().splitlines()[-6:])
        raise CellFailed(f"determinism {'on' if determinism else 'off'} exited {done.returncode}: {tail}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def std(values: list[float]) -> float:
    """Sample standard deviation (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((value - mean) ** 2 for value in values) / (len(values) - 1))


def std_ratio(impl: list[float], algo: list[float]) -> dict[str, Any]:
    """IMPL's std over ALGO's, with the 95% interval from the F distribution of the variance ratio (normal noise)."""
    from scipy import stats

    a, b = std(impl), std(algo)
    if b == 0:
        return {"ratio": None, "low": None, "high": None, "note": "ALGO band has no spread"}
    ratio = a / b
    dfa, dfb = len(impl) - 1, len(algo) - 1
    low = ratio / math.sqrt(stats.f.ppf(0.975, dfa, dfb))
    high = ratio / math.sqrt(stats.f.ppf(0.025, dfa, dfb))
    return {"ratio": ratio, "low": low, "high": high}


def cost(on: list[float], off: list[float]) -> dict[str, Any]:
    """Mean time with determinism on over off, with a 95% Welch interval on the log times."""
    from scipy import stats

    logs_on, logs_off = [math.log(t) for t in on], [math.log(t) for t in off]
    gap = sum(logs_on) / len(on) - sum(logs_off) / len(off)
    va, vb = std(logs_on) ** 2 / len(on), std(logs_off) ** 2 / len(off)
    se = math.sqrt(va + vb)
    if se == 0:
        return {"ratio": math.exp(gap), "low": math.exp(gap), "high": math.exp(gap)}
    df = (va + vb) ** 2 / (va**2 / (len(on) - 1) + vb**2 / (len(off) - 1))
    half = stats.t.ppf(0.975, df) * se
    return {"ratio": math.exp(gap), "low": math.exp(gap - half), "high": math.exp(gap + half)}


def summarise(backend: str, model: str, on: list[dict[str, Any]], off: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the table from the two cells' runs."""
    control = [run for run in on if run["role"] in ("warm-up", "control")]
    algo = [run for run in on if run["role"] == "algo"]
    impl = [run for run in off if run["role"] != "warm-up"]
    moved = {
        run["role"].removeprefix("seed:"): {
            "initial_weights": run["initial_weights_sha256"] != control[0]["initial_weights_sha256"],
            "trained_weights": run["weights_sha256"] != control[0]["weights_sha256"],
        }
        for run in on
        if run["role"].startswith("seed:")
    }
    timed_on = [run["seconds"] for run in control if run["role"] == "control"]
    timed_off = [run["seconds"] for run in impl]
    return {
        "backend": backend,
        "model": model,
        "build": on[0]["build"],
        "train_images": on[0]["train_images"],
        "determinism_on": on[0]["determinism"],
        "determinism_off": off[0]["determinism"],
        "control_bit_identical": len({run["weights_sha256"] for run in control}) == 1,
        "seeds_alone": moved,
        "control_runs": len(control),
        "impl_distinct_weights": len({run["weights_sha256"] for run in off}),
        "impl_runs": len(off),
        "accuracy": {
            "control": [run["test_accuracy"] for run in control],
            "impl": [run["test_accuracy"] for run in impl],
            "algo": [run["test_accuracy"] for run in algo],
        },
        "loss": {"impl": [run["test_loss"] for run in impl], "algo": [run["test_loss"] for run in algo]},
        "impl_share_accuracy": std_ratio([r["test_accuracy"] for r in impl], [r["test_accuracy"] for r in algo]),
        "impl_share_loss": std_ratio([r["test_loss"] for r in impl], [r["test_loss"] for r in algo]),
        "seconds": {"on": timed_on, "off": timed_off},
        "cost_of_determinism": cost(timed_on, timed_off),
    }


def seeds_alone(moved: dict[str, dict[str, bool]]) -> str:
    """How each seed moved the run when changed alone: `init` its initial weights, every other seed only what
    training made of them; a seed that moved nothing draws nothing in this model."""
    said = []
    for source, seen in moved.items():
        if source == "init":
            ok = seen["initial_weights"] and seen["trained_weights"]
        else:
            ok = not seen["initial_weights"] and seen["trained_weights"]
        if seen["initial_weights"] or seen["trained_weights"] or source == "init":
            said.append(source if ok else f"{source} NOT alone")
        else:
            said.append(f"{source} (draws nothing)")
    return ", ".join(said)


def interval(figure: dict[str, Any], digits: int = 2) -> str:
    """`ratio (low-high)`, or the note where there is none."""
    if figure.get("ratio") is None:
        return figure.get("note", "n/a")
    return f"{figure['ratio']:.{digits}f} ({figure['low']:.{digits}f}-{figure['high']:.{digits}f})"


def table(rows: list[dict[str, Any]], gpus: dict[str, Any], runs: int, epochs: int) -> str:
    """The markdown page: where it ran, then one row per backend and model."""
    devices = gpus.get("devices") or []
    where = "; ".join(
        f"{d.get('name', '?')} (driver {d.get('driver', '?')}, compute capability {d.get('compute_capability', '?')})"
        for d in devices
    )
    images = sorted({row["train_images"] for row in rows if "train_images" in row})
    lines = [
        f"GPU: {where or 'none (CPU)'}; NVML source: {gpus.get('source')}. {runs} runs per band, {epochs} epochs, "
        f"digits ({', '.join(f'{n:,}' for n in images)} training images).",
        "",
        "| backend (version, CUDA, cuDNN) | model | CONTROL (on, same seeds) | seeds, each moved alone | IMPL distinct weights (off, same seeds) | IMPL/ALGO std, accuracy "
        "(95% F interval) | IMPL/ALGO std, loss | ALGO accuracy std | cost of determinism, on/off (95%) | "
        "s per run on / off |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "failed" in row:
            lines.append(f"| {row['backend']} | {row['model']} | failed: {row['failed'][:300]} |||||||")
            continue
        seconds = row["seconds"]
        build = row["build"]
        lines.append(
            f"| {row['backend']} ({build.get('version')}, {build.get('cuda_version')}, {build.get('cudnn_version')}) "
            f"| {row['model']} | "
            f"{'bit-identical' if row['control_bit_identical'] else 'differ'} ({row['control_runs']} runs) | "
            f"{seeds_alone(row['seeds_alone'])} | "
            f"{row['impl_distinct_weights']} of {row['impl_runs']} | {interval(row['impl_share_accuracy'])} | "
            f"{interval(row['impl_share_loss'])} | {std(row['accuracy']['algo']):.4f} | "
            f"{interval(row['cost_of_determinism'], 3)}x | "
            f"{sum(seconds['on']) / len(seconds['on']):.2f} / {sum(seconds['off']) / len(seconds['off']):.2f} |"
        )
    return "\n".join(lines) + "\n"


def installed(backends: list[str]) -> list[str]:
    """The backends of `backends` whose framework is importable here."""
    return [name for name in backends if importlib.util.find_spec(BACKEND_MODULES[name]) is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_check"))
    parser.add_argument("--backends", nargs="+", default=["jax", "torch"], choices=sorted(BACKEND_MODULES))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--tiny", action="store_true", help="narrowest widths, augmented: checks the check on a CPU")
    parser.add_argument("--child", nargs=3, metavar=("BACKEND", "MODEL", "ON_OFF"))
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2: a band needs two runs")
    if args.child:
        backend, model, switch = args.child
        child(backend, model, switch == "on", args.runs, args.epochs, args.tiny)
        return
    from tracking.provenance.hardware import gather_gpus

    backends = installed(args.backends)
    if not backends:
        raise SystemExit(f"error: none of {', '.join(args.backends)} is installed; install one (e.g. jax[cpu])")
    os.environ.setdefault("KERAS_BACKEND", backends[0])  # gather_gpus asks the backend which GPUs it sees
    gpus = gather_gpus()
    rows = []
    cells = [(backend, model) for model in args.models for backend in backends]
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    for done, (backend, model) in enumerate(cells):
        left = (time.time() - started) / done * (len(cells) - done) if done else None
        print(
            f"[{done + 1}/{len(cells)}] {backend} {model} ({time.time() - started:.0f} s so far"
            + (f", about {left:.0f} s left)" if left is not None else ")"),
            file=sys.stderr,
        )
        try:
            on = run_cell(backend, model, True, args.runs, args.epochs, args.tiny)
            off = run_cell(backend, model, False, args.runs, args.epochs, args.tiny)
            rows.append(summarise(backend, model, on, off))
        except CellFailed as failed:
            rows.append({"backend": backend, "model": model, "failed": str(failed)})
        write(args.out, {"gpus": gpus, "runs": args.runs, "epochs": args.epochs, "rows": rows})
    print(table(rows, gpus, args.runs, args.epochs))
    if any("failed" in row for row in rows):
        raise SystemExit("error: some cells failed (see the table); the other rows stand")


def write(out: Path, report: dict[str, Any]) -> None:
    """The JSON and the markdown page so far: a check stopped part-way keeps the cells it finished."""
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "gpu_check.md").write_text(table(report["rows"], report["gpus"], report["runs"], report["epochs"]))


if __name__ == "__main__":
    main()
