"""The CSV recipe of docs/configuration.md ("A CSV table") run as written: its loader and params on scikit-learn's
wine table (13 features), `dvc repro train`, then `tracking baseline` (issue 67: CSV data was mentioned nowhere)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TINY, add_deps, make_project, run, runs_of, write_params

from tracking.yaml_text import parse_yaml

pytestmark = pytest.mark.slow


def recipe() -> tuple[str, dict]:
    """The section's loader (its Python block) and params (its YAML block)."""
    text = (REPO / "docs/configuration.md").read_text()
    section = text[text.index("#### A CSV table") :]
    code, params = (re.search(rf"```{kind}\n(.*?)```", section, re.S)[1] for kind in ("python", "yaml"))
    return code, parse_yaml(params)


def test_a_csv_table_trains_from_the_recipe_and_is_frozen_as_the_baseline(tmp_path: Path):
    from sklearn.datasets import load_wine

    root = make_project(tmp_path / "project")
    wine = load_wine()
    table = np.column_stack([wine.data, wine.target])
    header = ",".join([*(re.sub(r"\W", "_", name) for name in wine.feature_names), "label"])
    (root / "data/raw").mkdir(parents=True, exist_ok=True)
    np.savetxt(root / "data/raw/wine.csv", table, delimiter=",", header=header, comments="", fmt="%.6g")
    code, params = recipe()
    (root / "csv_data.py").write_text(code)
    write_params(root, data=params["data"], model=params["model"], train=TINY["train"])  # kwargs replaced whole
    add_deps(root, "csv_data.py", "prepare")
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "the CSV recipe"], root)
    run(["dvc", "repro", "train"], root)
    (trained,) = runs_of(root)
    assert trained.info.status == "FINISHED" and trained.data.params["model.builder"] == "pipelines.models:mlp"
    assert trained.data.params["data.loader"] == "csv_data:load" and trained.data.params["model.kwargs.hidden_units"]
    frozen = run(["tracking", "baseline"], root).stdout
    assert "froze the training sections of params.yaml into baseline.yaml" in frozen
    baseline = parse_yaml((root / "baseline.yaml").read_text())
    assert baseline["model"]["builder"] == "pipelines.models:mlp" and baseline["data"]["loader"] == "csv_data:load"
