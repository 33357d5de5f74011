"""A data set larger than memory: prepared, trained and scored from memory-mapped files under a memory limit
smaller than the data set, in a memory cgroup the test makes (as root, as CI runs; v1 or v2 as the machine
mounts it). TensorFlow reserves far more address space than it uses, so `ulimit -v` cannot say this."""

from __future__ import annotations

import os
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import add_deps, assert_user_error, make_project, project_env, run, write_params

pytestmark = pytest.mark.slow

LIMIT = 1024 * 2**20
ROWS, WIDTH = 4_400, 65_536  # float32 features: 1.15 GB, more than LIMIT
LOADER = '''"""A team's loader of a large data set: its arrays memory-mapped, never read whole."""

from pathlib import Path

import numpy as np


def load(folder):
    return {name: np.load(Path(folder) / f"{name}.npy", mmap_mode="r") for name in ("x", "y")}


def load_whole(folder):
    return {name: np.load(Path(folder) / f"{name}.npy") for name in ("x", "y")}
'''
V2, V1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")


def memory_cgroup() -> Path | None:
    """A new memory cgroup under this process's own, limited to `LIMIT` (v2's `memory.max`, v1's
    `memory.limit_in_bytes`); None where this machine gives none to this user."""
    if os.geteuid() != 0:
        return None
    name = f"tracking-test-{uuid.uuid4().hex[:8]}"
    if "memory" in (V2 / "cgroup.controllers").read_text().split() if (V2 / "cgroup.controllers").is_file() else ():
        own = Path(Path("/proc/self/cgroup").read_text().splitlines()[-1].split(":", 2)[2].lstrip("/"))
        folder = V2 / own / name
        folder.mkdir()
        if not (folder / "memory.max").is_file():  # the parent does not hand the memory controller down
            folder.rmdir()
            return None
        (folder / "memory.max").write_text(str(LIMIT))
        (folder / "memory.swap.max").write_text("0")
        return folder
    if V1.is_dir():
        lines = [line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines()]
        own = next(path for _, controllers, path in lines if "memory" in controllers.split(","))
        folder = V1 / own.lstrip("/") / name
        folder.mkdir()
        (folder / "memory.limit_in_bytes").write_text(str(LIMIT))
        return folder
    return None


@pytest.fixture
def limited() -> Iterator[Path]:
    folder = memory_cgroup()
    if folder is None:
        pytest.skip("needs root and a memory cgroup controller (v1 or v2) to limit a stage's memory")
    yield folder
    folder.rmdir()


def test_a_data_set_larger_than_the_memory_limit_prepares_trains_and_scores(tmp_path: Path, limited: Path):
    root = make_project(tmp_path / "project")
    data = root / "data/raw/large"
    data.mkdir()
    x = np.lib.format.open_memmap(data / "x.npy", mode="w+", dtype=np.float32, shape=(ROWS, WIDTH))
    for start in range(0, ROWS, 1000):  # every row its own value, written a block at a time
        x[start : start + 1000] = np.arange(start, min(start + 1000, ROWS), dtype=np.float32)[:, None] / ROWS
    x.flush()
    del x
    np.save(data / "y.npy", np.arange(ROWS) % 2)
    assert (data / "x.npy").stat().st_size > LIMIT
    run(["dvc", "config", "cache.type", "hardlink,copy"], root)  # as a team with large data sets it
    run(["dvc", "add", "-q", "data/raw/large"], root)
    (root / "team_large.py").write_text(LOADER)
    write_params(
        root,
        data={"source": None, "loader": "team_large:load", "kwargs": {"folder": "data/raw/large"}},
        model={"builder": "pipelines.models:mlp", "kwargs": {"hidden_units": [8]}},
        train={"epochs": 1, "batch_size": 256},
    )
    add_deps(root, "team_large.py", "prepare")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "a large data set"], root)
    command = f"echo $$ > {shlex.quote(str(limited / 'cgroup.procs'))} && exec dvc repro evaluate"
    done = run(["sh", "-c", command], root, timeout=900)
    assert "trained pipelines.models:mlp" in done.stdout
    assert (root / "metrics/eval.json").is_file()
    prepared = sum(path.stat().st_size for path in (root / "data/prepared").glob("*.npy"))
    assert prepared > LIMIT


def test_arrays_held_in_memory_that_the_split_cannot_copy_are_one_line_naming_the_fix(tmp_path: Path, limited: Path):
    """A loader returning 0.63 GB of arrays read whole, under the 1 GiB limit: prepare says the split's copy does not
    fit the memory available to it (the cgroup's, not the machine's), and how to read the data a batch at a time."""
    root = make_project(tmp_path / "project")
    data = root / "data/raw/whole"
    data.mkdir()
    np.save(data / "x.npy", np.ones((2400, 65_536), dtype=np.float32))
    np.save(data / "y.npy", np.arange(2400) % 2)
    (root / "team_large.py").write_text(LOADER)
    write_params(root, data={"source": None, "loader": "team_large:load_whole", "kwargs": {"folder": "data/raw/whole"}})
    add_deps(root, "team_large.py", "prepare")
    add_deps(root, "data/raw/whole", "prepare")
    command = f"echo $$ > {shlex.quote(str(limited / 'cgroup.procs'))} && exec python -m pipelines.prepare"
    done = run(["sh", "-c", command], root, check=False, env=project_env())
    assert_user_error(done, "gave 600 MiB of arrays in memory", "of memory is available", "mmap_mode='r'")
    assert not (root / "data/prepared").exists()
