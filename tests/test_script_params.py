"""A team's params read through a seeds mapping, and the running stage's deps hashed as they are now (unit level)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tracking.determinism.seeds import derive_seed
from tracking.errors import ParamsError
from tracking.provenance.dvc import gather_dvc, stage_hashes_now
from tracking.script.team_params import read_params


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_seeds_come_from_the_teams_keys_and_the_rest_derive_from_base(tmp_path: Path):
    path = write(tmp_path / "params.yaml", "train:\n  seed: 7\n  shuffle_seed: 3\nmodel:\n  units: 8\n")
    read = read_params(path, {"base": "train.seed", "shuffle": "train.shuffle_seed", "augment": 11})
    assert read.flat == {"train.seed": 7, "train.shuffle_seed": 3, "model.units": 8}
    assert (read.seeds.base, read.seeds.shuffle, read.seeds.augment) == (7, 3, 11)
    assert read.seeds.init == derive_seed(7, "init")
    assert read.origins == {"base": "train.seed", "shuffle": "train.shuffle_seed", "augment": "given"}


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"base": "train.sed"}, "no key 'train.sed'"),
        ({"base": "model.units"}, "expected an integer seed"),
        ({"colour": "train.seed"}, "unknown source of randomness 'colour'"),
        ({"init": -1}, "expected an integer seed"),
    ],
)
def test_a_bad_seeds_mapping_is_one_line_naming_the_key(tmp_path: Path, mapping: dict, expected: str):
    path = write(tmp_path / "params.yaml", "train:\n  seed: 7\nmodel:\n  units: [8]\n")
    with pytest.raises(ParamsError, match=expected) as raised:
        read_params(path, mapping)
    assert "\n" not in str(raised.value)


def test_a_yaml_date_in_the_teams_params_is_one_line_naming_its_key(tmp_path: Path):
    path = write(tmp_path / "params.yaml", "train:\n  seed: 7\nrun:\n  started: 2024-01-01\n")
    with pytest.raises(ParamsError, match=r"run.started: YAML reads 2024-01-01 as a date") as raised:
        read_params(path, {"base": "train.seed"})
    assert 'quote it to keep it as text (started: "2024-01-01")' in str(raised.value) and "\n" not in str(raised.value)


def test_the_running_stage_is_hashed_now_and_other_stages_come_from_the_lock(tmp_path: Path):
    write(tmp_path / "dvc.yaml", "stages:\n  train:\n    cmd: python train.py\n    deps: [train.py, data]\n")
    write(
        tmp_path / "dvc.lock",
        "schema: '2.0'\nstages:\n  train:\n    deps:\n    - path: train.py\n      md5: stale\n"
        "  prepare:\n    deps:\n    - path: raw.csv\n      md5: abc\n",
    )
    code = write(tmp_path / "train.py", "print('hi')\n")
    write(tmp_path / "data" / "a.txt", "a")
    hashes = stage_hashes_now(tmp_path, "train")
    assert hashes["train.py"] == hashlib.md5(code.read_bytes()).hexdigest()
    assert hashes["data"].endswith(".files")
    deps = gather_dvc(tmp_path, running="train")["deps"]
    assert deps == {"prepare": {"raw.csv": "abc"}, "train": hashes}
    assert gather_dvc(tmp_path)["deps"]["train"] == {"train.py": "stale"}  # what our pipeline reads for stages that ran
