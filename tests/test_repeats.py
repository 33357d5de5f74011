"""Kept calibration repeats: what their key covers (and what it leaves out), and how they are written and read."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run

from tracking.config.params import Params
from tracking.data.manifest import Manifest
from tracking.repeats.kept import KeptRepeat, RepeatStore, code_version, repeat_key
from tracking.repeats.planning import repeat_identity

DVC_YAML = "stages:\n  calibrate:\n    cmd: python3 -m pipelines.calibrate\n    deps: [data/prepared, models/net.py]\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models/net.py").write_text("def build(shape, n):\n    ...\n")
    (tmp_path / "notes.md").write_text("not a dep\n")
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    return tmp_path


def identity(root: Path, params: Params, baseline: Params, gpu: bool = False, data: str = "a" * 64) -> dict:
    manifest = Manifest(source="s", source_sha256="s", content_sha256=data, arrays={}, n_samples={}, n_outputs=10)
    return repeat_identity(params, baseline, manifest, root, gpu)


def test_the_key_follows_the_baseline_the_data_and_the_code_not_where_or_how_many(project: Path) -> None:
    params = Params()
    baseline = Params.model_validate({"train": {"epochs": 3}})
    key = repeat_key(identity(project, params, baseline), "algo", 0)

    elsewhere = params.model_validate(
        {"compute": {"executor": "ray", "workers": 8}, "calibration": {"repeats": 40}, "compare": {"alpha": 0.01}}
    )
    assert repeat_key(identity(project, elsewhere, baseline), "algo", 0) == key
    (project / "notes.md").write_text("edited\n")
    assert repeat_key(identity(project, params, baseline), "algo", 0) == key

    changed = {
        "variant": repeat_key(identity(project, params, baseline), "control", 0),
        "index": repeat_key(identity(project, params, baseline), "algo", 1),
        "baseline": repeat_key(identity(project, params, Params.model_validate({"train": {"epochs": 4}})), "algo", 0),
        "data": repeat_key(identity(project, params, baseline, data="b" * 64), "algo", 0),
        "gpu": repeat_key(identity(project, params, baseline, gpu=True), "algo", 0),
        "kernel-noise simulation": repeat_key(
            identity(project, params.model_validate({"calibration": {"simulate_impl_noise": False}}), baseline),
            "algo",
            0,
        ),
    }
    (project / "models/net.py").write_text("def build(shape, n):\n    return None\n")
    changed["code"] = repeat_key(identity(project, params, baseline), "algo", 0)
    assert len({key, *changed.values()}) == len(changed) + 1, changed


def test_installed_product_code_counts_where_no_dvc_yaml_lists_it(project: Path) -> None:
    files = code_version(project, "calibrate")["files"]
    assert "models/net.py" in files and "notes.md" not in files
    assert "tracking/repeats/worker.py" in files and "tracking/repeats/kept.py" in files  # installed outside `project`
    assert code_version(project, "calibrate", "models.net:build")["files"] == files  # the project's own: a dep


def test_a_builder_installed_outside_the_project_counts_with_its_whole_package(
    project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = tmp_path_factory.mktemp("site")
    (installed / "teamnets").mkdir()
    (installed / "teamnets/__init__.py").write_text("")
    (installed / "teamnets/cnn.py").write_text("def build(shape, n):\n    ...\n")
    (installed / "teamnets/layers.py").write_text("SCALE = 1\n")
    (installed / "onenet.py").write_text("def build(shape, n):\n    ...\n")
    monkeypatch.syspath_prepend(str(installed))
    files = code_version(project, "calibrate", "teamnets.cnn:build")["files"]
    assert {"teamnets/__init__.py", "teamnets/cnn.py", "teamnets/layers.py", "models/net.py"} <= files.keys()
    assert "onenet.py" in code_version(project, "calibrate", "onenet:build")["files"]
    baseline = Params.model_validate({"model": {"builder": "teamnets.cnn:build"}})
    key = repeat_key(identity(project, Params(), baseline), "algo", 0)
    (installed / "teamnets/layers.py").write_text("SCALE = 2\n")
    assert repeat_key(identity(project, Params(), baseline), "algo", 0) != key


def test_a_repeat_is_kept_whole_in_a_folder_git_ignores(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = RepeatStore(tmp_path / "repeats")
    kept = KeptRepeat({"variant": "algo", "repeat": 0, "metrics": {"test_accuracy": 0.9}}, np.arange(5), np.ones(3))
    assert store.load("k") is None
    store.save("k", kept)
    loaded = store.load("k")
    assert loaded is not None and loaded.run == kept.run
    assert np.array_equal(loaded.predicted, kept.predicted) and np.array_equal(loaded.weights, kept.weights)
    assert sorted(path.name for path in store.folder.iterdir()) == [".gitignore", "k.npz"]
    assert (store.folder / ".gitignore").read_text() == "*\n"

    (store.folder / "k.npz").write_bytes(b"cut short")
    with caplog.at_level(logging.WARNING):
        assert store.load("k") is None
    assert "trained again" in caplog.text


def test_a_ray_calibration_s_own_process_leaves_the_backend_to_its_workers(project: Path) -> None:
    """The stage's process trains nothing on Ray: importing TensorFlow there only to read its build cost 4 s of CPU
    that the workers' start-up shares the cores with. The workers record their backend (tests/test_cluster.py)."""
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom tracking.config.params import Params\n"
        "from tracking.data.manifest import Manifest\nfrom tracking.determinism.seeds import resolve_seeds\n"
        "from tracking.repeats.planning import repeat_spec\n"
        "params = Params()\n"
        "manifest = Manifest(source='s', source_sha256='s', content_sha256='a' * 64, arrays={}, n_samples={}, "
        "n_outputs=10)\n"
        "spec = repeat_spec(params, params, resolve_seeds(params.seeds), Path.cwd(), (manifest, {}), 'run', 'ray')\n"
        "print(json.dumps({'imported': sorted({'tensorflow', 'keras'} & set(sys.modules)), "
        "'software': sorted(spec.record['software']), 'determinism': sorted(spec.record['determinism'])}))\n"
    )
    for command in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "project"]):
        run(command, project)
    done = run([sys.executable, "-c", code], project)
    assert json.loads(done.stdout) == {
        "imported": [],
        "software": ["executable", "python_implementation", "versions"],
        "determinism": ["requested"],
    }
