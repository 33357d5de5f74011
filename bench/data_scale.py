"""A team's data at its real size: prepare, train and calibrate on memory-mapped shards of 0.5 to 4 GB.

Per size, a fresh git + DVC project (DVC's cache hardlinked, as a team with large data sets it) whose loader is a
`keras.utils.PyDataset` over memory-mapped `.npy` shards of 32x32x3 float32 images, a tiny model (one dense layer
of 8 units, one epoch) so that data handling dominates; each stage through `dvc repro`, and per stage: wall and
CPU time, the peak of the stage's anonymous memory (RssAnon of its processes, summed, sampled every 50 ms; DVC's
own process left out) and the peak disk of the project (data, DVC's cache and scratch, hardlinks counted once),
also as a multiple of the data set. Then the full-content hash's throughput (`array_sha256`, what prepare
records) beside `sha256sum` and `dvc add` of the same bytes; and, at the first size, the trained weights of
the stage beside training in memory (the whole split loaded, tensors held in memory) and memory-mapped (read a
batch at a time), which must be bit-identical.

Targets (issue 63): train's and calibrate's peak anonymous memory flat (within 0.2 GB from the first size to the
last) and under 1.5 GB, prepare's disk peak at most 2.1x the data set, time per GB about constant.
Run from the project root: `.venv/bin/python bench/data_scale.py [--sizes 0.5 1 2 4]` (about 15 minutes on 2
cores at these sizes; 10 GB where the disk allows: `--sizes 10`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GB = 1e9
SHAPE = (32, 32, 3)
SHARD_ROWS = 2048
SAMPLE_EVERY_S = 0.05
LOADER = '''"""A team's loader: a PyDataset over memory-mapped .npy shards, one shard a batch."""

from pathlib import Path

import keras
import numpy as np


class Shards(keras.utils.PyDataset):
    def __init__(self, folder):
        super().__init__()
        self.paths = sorted(Path(folder).glob("x-*.npy"))

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        path = self.paths[index]
        return np.load(path, mmap_mode="r"), np.load(path.with_name(path.name.replace("x-", "y-")))


def load(folder):
    return Shards(folder)
'''
PARAMS = {
    "mlflow": {"experiment": "scale"},
    "data": {"source": None, "loader": "team_shards:load", "kwargs": {"folder": "data/raw/shards"}},
    "model": {"builder": "pipelines.models:mlp", "kwargs": {"hidden_units": [8], "dropout": 0.0}},
    "train": {"epochs": 1, "batch_size": 256},
    "calibration": {"repeats": 3, "variants": ["algo"]},
    "compute": {"system_metrics": False},
}


@dataclass(frozen=True)
class Measured:
    """One stage's wall and CPU seconds, peak anonymous memory and peak disk (bytes)."""

    wall_s: float
    cpu_s: float
    anon_peak: int
    disk_peak: int


def env() -> dict[str, str]:
    found = {key: value for key, value in os.environ.items() if key not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
    found["PATH"] = f"{BIN}{os.pathsep}{found.get('PATH', '')}"
    found.setdefault("GIT_AUTHOR_NAME", "bench")
    found.setdefault("GIT_AUTHOR_EMAIL", "bench@example.invalid")
    found["GIT_COMMITTER_NAME"], found["GIT_COMMITTER_EMAIL"] = found["GIT_AUTHOR_NAME"], found["GIT_AUTHOR_EMAIL"]
    return found


def run(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def project(folder: Path, rows: int) -> Path:
    """A git + DVC project of this repository's pipeline whose loader reads `rows` samples in shards."""
    from tracking.config.baseline import freeze
    from tracking.yaml_text import parse_yaml, yaml_editor

    root = folder / "project"
    root.mkdir()
    for name in ("tracking", "pipelines"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml", ".gitignore"):
        shutil.copy(REPO / name, root / name)
    shards = root / "data/raw/shards"
    shards.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for index, start in enumerate(range(0, rows, SHARD_ROWS)):
        count = min(SHARD_ROWS, rows - start)
        np.save(shards / f"x-{index:05d}.npy", rng.standard_normal((count, *SHAPE), dtype=np.float32))
        np.save(shards / f"y-{index:05d}.npy", rng.integers(0, 2, count))
    (root / "team_shards.py").write_text(LOADER)
    params = parse_yaml((root / "params.yaml").read_text())
    for section, values in PARAMS.items():
        params.setdefault(section, {}).update(values)
    with open(root / "params.yaml", "w", encoding="utf-8") as handle:
        yaml_editor().dump(params, handle)
    stages = parse_yaml((root / "dvc.yaml").read_text())
    stages["stages"]["prepare"]["deps"].append("team_shards.py")
    with open(root / "dvc.yaml", "w", encoding="utf-8") as handle:
        yaml_editor().dump(stages, handle)
    freeze(root / "params.yaml", root / "baseline.yaml")
    run(["git", "init", "-q", "-b", "main"], root)
    run(["dvc", "init", "-q"], root)
    run(["dvc", "config", "core.analytics", "false"], root)
    run(["dvc", "config", "cache.type", "hardlink,copy"], root)
    run(["dvc", "add", "-q", "data/raw/shards"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "project"], root)
    return root


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (not `pid` itself)."""
    children = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                parent = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop()
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def anon_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def disk_bytes(root: Path) -> int:
    """Bytes allocated under `root`, each inode once (DVC's hardlinked cache is not counted twice)."""
    seen, total = set(), 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                stat = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if stat.st_ino not in seen:
                seen.add(stat.st_ino)
                total += stat.st_blocks * 512
    return total


def measured(cmd: list[str], root: Path) -> tuple[Measured, str]:
    """Run `cmd` in `root`, sampling its processes' anonymous memory and the project's disk as it runs."""
    before = children_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(cmd, cwd=root, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks = {"anon": 0, "disk": disk_bytes(root)}

    def sample() -> None:
        while process.poll() is None:
            peaks["anon"] = max(peaks["anon"], anon_bytes(descendants(process.pid)))
            peaks["disk"] = max(peaks["disk"], disk_bytes(root))
            time.sleep(SAMPLE_EVERY_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = process.stdout.read()
    process.wait()
    sampler.join()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({process.returncode}):\n{output}")
    return Measured(wall, children_cpu() - before, peaks["anon"], peaks["disk"]), output


def hash_rates(root: Path) -> dict[str, float]:
    """GB per CPU-second over the shards' bytes (CPU time, so that other work on the machine does not move it):
    prepare's full-content hash, `sha256sum`, `dvc add` (MD5, DVC's start-up included)."""
    from tracking.data.hashing import array_sha256

    shards = sorted((root / "data/raw/shards").glob("x-*.npy"))
    size = sum(path.stat().st_size for path in shards) / GB
    started = time.process_time()
    for path in shards:
        array_sha256(np.load(path, mmap_mode="r"))
    ours = time.process_time() - started
    started = children_cpu()
    subprocess.run(["sha256sum", *map(str, shards)], capture_output=True, check=True)
    sha256sum = children_cpu() - started
    copy = root / "hash-copy"
    copy.mkdir()
    for path in shards:
        os.link(path, copy / path.name)
    started = children_cpu()
    run(["dvc", "add", "-q", "hash-copy"], root)
    dvc_add = children_cpu() - started
    return {"ours": size / ours, "sha256sum": size / sha256sum, "dvc add": size / dvc_add}


def children_cpu() -> float:
    """CPU seconds of this process's finished children."""
    found = os.times()
    return found.children_user + found.children_system


def weights_agree(root: Path) -> tuple[str, str, str]:
    """The train stage's weights hash beside the same training on the split loaded whole (tensors in memory) and
    memory-mapped (read a batch at a time), in a process of its own (it re-executes itself to pin
    PYTHONHASHSEED, as a stage does)."""
    done = subprocess.run(
        [sys.executable, __file__, "--weights-of", str(root)], env=env(), capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"training in memory and memory-mapped failed ({done.returncode}):\n{done.stderr}")
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def trained_both_ways(root: Path) -> tuple[str, str, str]:
    """`weights_agree`'s three hashes, in this process."""
    from tracking.config.params_file import load_params
    from tracking.data.dataset import load_splits
    from tracking.data.hashing import weights_sha256
    from tracking.data.manifest import Manifest
    from tracking.determinism.process import reproducible_process, seed_frameworks
    from tracking.training import batches
    from tracking.training.fitting import train_model
    from tracking.training.model import BuildInputs

    stage = json.loads((root / "metrics/train.json").read_text())["weights_sha256"]
    params = load_params(root / "params.yaml")
    seeds = reproducible_process(params)
    manifest = Manifest.read(root / "data/prepared")
    mapped = load_splits(root / "data/prepared", manifest)
    loaded = {split: {role: np.array(array) for role, array in arrays.items()} for split, arrays in mapped.items()}
    found = []
    for splits, in_memory in ((loaded, 2**62), (mapped, 0)):
        batches.IN_MEMORY_BYTES = in_memory
        seed_frameworks(params, seeds)
        model, _ = train_model(params, seeds, BuildInputs.of(manifest, splits["train"], root), splits.get("val"))
        found.append(weights_sha256(model.get_weights()))
    return stage, found[0], found[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 1, 2, 4], help="data set sizes in GB")
    parser.add_argument("--weights-of", type=Path, help=argparse.SUPPRESS)  # weights_agree's own process
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.weights_of is not None:
        print(json.dumps(trained_both_ways(args.weights_of)))
        return
    print("| data set | stage | wall s | CPU s | CPU s per GB | peak RssAnon GB | peak disk GB | disk / data |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    memory: dict[str, list[float]] = {}
    rates, agreement = [], None
    for size in args.sizes:
        rows = int(size * GB / (np.prod(SHAPE) * 4))
        with tempfile.TemporaryDirectory(prefix="data-scale-") as folder:
            root = project(Path(folder), rows)
            data = sum(path.stat().st_size for path in (root / "data/raw/shards").iterdir())
            for stage in ("prepare", "train", "calibrate"):
                found, _ = measured(["dvc", "repro", "-s", stage], root)
                memory.setdefault(stage, []).append(found.anon_peak / GB)
                print(
                    f"| {data / GB:.2f} GB | {stage} | {found.wall_s:.1f} | {found.cpu_s:.1f} | "
                    f"{found.cpu_s / (data / GB):.1f} | {found.anon_peak / GB:.2f} | {found.disk_peak / GB:.2f} | "
                    f"{found.disk_peak / data:.2f}x |",
                    flush=True,
                )
            rates.append((data / GB, hash_rates(root)))
            if agreement is None:
                agreement = (data / GB, weights_agree(root))
    print()
    print("| data set | prepare's hash, GB per CPU-second | sha256sum | dvc add (MD5) |")
    print("| --- | --- | --- | --- |")
    for size, found in rates:
        print(f"| {size:.2f} GB | {found['ours']:.2f} | {found['sha256sum']:.2f} | {found['dvc add']:.2f} |")
    print()
    for stage, peaks in memory.items():
        print(
            f"{stage}: peak RssAnon {min(peaks):.2f} to {max(peaks):.2f} GB, from the first size to the last {peaks[-1] - peaks[0]:+.2f} GB"
        )
    size, (stage, whole, mapped) = agreement
    same = stage == whole == mapped
    print(
        f"weights at {size:.2f} GB: the train stage's {stage[:12]}, in memory {whole[:12]}, memory-mapped "
        f"{mapped[:12]}: {'bit-identical' if same else 'DIFFERENT'}"
    )


if __name__ == "__main__":
    main()
