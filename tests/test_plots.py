"""`dvc plots show` as a user runs it: each chart drawn once, and what it writes is no change to the project."""

import configparser
import json
import re
import shutil
import sys
from pathlib import Path

from conftest import REPO, run

from tracking.inspect.plots_page import PLOTS_PAGE


def test_dvc_plots_show_draws_each_chart_once_and_leaves_git_clean(project: Path):
    """The training curves and the confusion matrix were declared twice (as the stages' plots and in dvc.yaml's
    `plots:`), so DVC drew four charts for two; its `dvc_plots/` folder made every later run look dirty."""
    (project / "plots/train").mkdir(parents=True)
    (project / "plots/train/history.csv").write_text("epoch,loss,accuracy,val_loss,val_accuracy\n0,1,0.5,1,0.5\n")
    (project / "plots/confusion.json").write_text(json.dumps([{"actual": 0, "predicted": 0}]))
    run(["git", "add", "plots"], project)
    run(["git", "commit", "-qm", "plots as a run leaves them"], project)
    shown = json.loads(run(["dvc", "plots", "show", "--json"], project).stdout)["data"]
    drawn = [name for name in shown if "confusion" in name or "history" in name or "curves" in name]
    assert sorted(drawn) == ["test confusion", "training curves"], sorted(shown)
    run(["dvc", "plots", "show"], project)
    assert (project / "dvc_plots/index.html").is_file()
    assert run(["git", "status", "--porcelain"], project).stdout == ""


def test_dvc_plots_show_draws_offline_with_the_page_the_project_names(project: Path):
    """DVC's own page loads Vega from a CDN and is blank offline: the committed .dvc/config names a page holding the
    libraries (written by `make run` through `tracking plots-page`), and each chart's spec renders with them."""
    config = configparser.ConfigParser()
    config.read(REPO / ".dvc/config")
    assert config["plots"]["html_template"] == PLOTS_PAGE.as_posix()
    shutil.copy(REPO / ".dvc/.gitignore", project / ".dvc/.gitignore")
    run(["dvc", "config", "plots.html_template", PLOTS_PAGE.as_posix()], project)
    (project / "plots/train").mkdir(parents=True)
    (project / "plots/train/history.csv").write_text("epoch,loss,accuracy,val_loss,val_accuracy\n0,1,0.5,1,0.5\n")
    (project / "plots/confusion.json").write_text(json.dumps([{"actual": 0, "predicted": 1}]))
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "plots, and the page dvc plots show fills"], project)
    run([sys.executable, "-m", "tracking", "plots-page"], project / "plots")
    run(["dvc", "plots", "show"], project)
    page = (project / "dvc_plots/index.html").read_text()
    assert not re.search(r"<script[^>]+src=", page) and "https://cdn" not in page
    assert "vegaEmbed" in page and len(page) > 500_000  # the libraries are inside the page
    import vl_convert

    specs = re.findall(r"var spec = (\{.*?\});\n\s*vegaEmbed", page, re.S)
    assert len(specs) == 2
    for spec in specs:
        assert "<svg" in vl_convert.vegalite_to_svg(json.loads(spec))
    assert run(["git", "status", "--porcelain"], project).stdout == ""
