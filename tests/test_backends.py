"""Keras's backend as a recorded, honoured choice: chosen before Keras starts, refused where it would be ignored,
recorded with its determinism and build, ranked first by `tracking diff`, and trained on JAX (on this CPU) through
the GPU check's own command: CONTROL bit-identical and every seed moving its own source alone."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracking.config.params import DeterminismParams
from tracking.determinism import jax_backend, settings
from tracking.determinism.backend import EffectiveDeterminism, select
from tracking.entry import run_main
from tracking.env import KERAS_BACKEND, XLA_FLAGS
from tracking.errors import UsageError
from tracking.inspect.diff.ranked_groups import group_diffs
from tracking.inspect.diff.runs import RunSnapshot

REPO = Path(__file__).resolve().parents[1]


def test_an_environment_asking_for_another_backend_is_refused_with_the_params_key_to_set(monkeypatch):
    monkeypatch.setenv(KERAS_BACKEND, "jax")
    with pytest.raises(UsageError) as raised:
        select("tensorflow")
    assert "KERAS_BACKEND=jax in the environment, but determinism.backend is tensorflow" in str(raised.value)
    assert "dvc exp run -S determinism.backend=jax" in raised.value.fix


def test_xla_flags_keep_the_teams_own_and_set_ours_from_params(monkeypatch):
    monkeypatch.setenv(XLA_FLAGS, "--xla_dump_to=/tmp/x --xla_gpu_exclude_nondeterministic_ops=false")
    jax_backend.configure_environment(DeterminismParams(backend="jax", op_determinism=True, intra_op_threads=1))
    flags = os.environ[XLA_FLAGS].split()
    assert flags == [
        "--xla_dump_to=/tmp/x",
        "--xla_gpu_exclude_nondeterministic_ops=true",
        "--xla_cpu_multi_thread_eigen=false",
    ]


def test_the_record_holds_what_was_asked_and_the_backends_own_switches_beside_the_common_four():
    actual = EffectiveDeterminism(True, 1, 0, False, "jax", {"xla_flags": "--a=1", "default_prng_impl": "threefry2x32"})
    record = settings.as_record(DeterminismParams(backend="jax"), actual)
    assert record["requested"]["backend"] == "jax"
    assert record["effective"] == {
        "op_determinism": True,
        "intra_op_threads": 1,
        "inter_op_threads": 0,
        "onednn": False,
        "backend": "jax",
        "xla_flags": "--a=1",
        "default_prng_impl": "threefry2x32",
    }


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_a_backend_that_is_not_installed_is_one_line_saying_how_to_get_it():
    with pytest.raises(UsageError) as raised:
        settings.apply(DeterminismParams(backend="torch"))
    assert str(raised.value).startswith("determinism.backend is torch, but torch is not installed in ")
    assert "uv pip install torch" in raised.value.fix


def snapshot(params: dict[str, str], tags: dict[str, str]) -> RunSnapshot:
    return RunSnapshot("0" * 32, "r", "1", "FINISHED", params, {}, tags, None, "")


def test_diff_ranks_a_backend_change_first_and_reads_runs_from_before_backends_as_tensorflow():
    before = snapshot(
        {"determinism.op_determinism": "true", "train.learning_rate": "0.001"},
        {"prov.software.tensorflow_build.cuda_version": "None", "prov.software.versions.keras": "3.15.1"},
    )
    on_jax = snapshot(
        {"determinism.op_determinism": "true", "determinism.backend": "jax", "train.learning_rate": "0.001"},
        {"prov.software.backend.name": "jax", "prov.software.backend.cuda_version": "None"},
    )
    on_tensorflow = snapshot(
        {"determinism.op_determinism": "true", "determinism.backend": "tensorflow", "train.learning_rate": "0.001"},
        {"prov.software.backend.name": "tensorflow", "prov.software.backend.cuda_version": "None"}
        | {"prov.software.versions.keras": "3.15.1"},
    )
    changed = [group for group in group_diffs(before, on_jax) if group.changes]
    assert changed[0].name == "backend"
    assert {change.key: (change.a, change.b) for change in changed[0].changes} == {"name": ("tensorflow", "jax")}
    assert not [group.name for group in group_diffs(before, on_tensorflow) if group.changes]


def test_an_op_without_a_deterministic_kernel_ends_a_stage_in_one_line_naming_it(capsys):
    def train() -> None:
        raise RuntimeError(
            "adaptive_max_pool2d_backward_cuda does not have a deterministic implementation, but you set "
            "'torch.use_deterministic_algorithms(True)'. You can turn off determinism just for this operation"
        )

    with pytest.raises(SystemExit) as stopped:
        run_main(train, startup_line=False)
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: adaptive_max_pool2d_backward_cuda does not have a deterministic implementation")
    assert "(determinism.op_determinism is true)" in line and "tracking audit" in line


def test_tensorflow_is_imported_without_jax_which_stays_importable():
    """TensorFlow's TFLite converter imports JAX where it is installed (0.45 s for every process on TensorFlow):
    our import of TensorFlow leaves it out, and a team's `import jax` afterwards still works."""
    script = (
        "import sys\n"
        "from tracking.determinism.tensorflow_backend import import_tensorflow\n"
        "import_tensorflow()\n"
        "import keras\n"
        "print('jax' in sys.modules)\n"
        "import jax\n"
        "print(jax.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "jax"]
