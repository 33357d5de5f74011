"""`dvc plots show` as a user runs it: each chart drawn once, and what it writes is no change to the project."""

import configparser
import json
import re
import shutil
import sys
from pathlib import Path

from conftest import REPO, clone_files, run

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
    """DVC's own page loads Vega from a CDN and is blank offline: `tracking plots-page` (which `make run` calls)
    writes a page holding the libraries and names it in the clone's .dvc/config.local, and each chart's spec
    renders with them."""
    shutil.copy(REPO / ".dvc/.gitignore", project / ".dvc/.gitignore")
    (project / "plots/train").mkdir(parents=True)
    (project / "plots/train/history.csv").write_text("epoch,loss,accuracy,val_loss,val_accuracy\n0,1,0.5,1,0.5\n")
    (project / "plots/confusion.json").write_text(json.dumps([{"actual": 0, "predicted": 1}]))
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "plots, and the page dvc plots show fills"], project)
    run([sys.executable, "-m", "tracking", "plots-page"], project / "plots")
    config = configparser.ConfigParser()
    config.read(project / ".dvc/config.local")
    assert config["plots"]["html_template"] == PLOTS_PAGE.as_posix()
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


def test_dvc_plots_show_in_a_clone_set_up_without_make_draws_this_pipeline_s_charts(tmp_path: Path):
    """A clone set up without `make` has no offline page: the committed .dvc/config named it all the same, and DVC
    read the missing file's name as the template's text and refused ("HTML template has to contain
    '{plot_divs}'"). Nor does it draw the audit's committed heat map, the template's digits, which `dvc repro`
    does not re-make for a team's own data (issue 67)."""
    config = configparser.ConfigParser()
    config.read(REPO / ".dvc/config")
    assert "plots" not in config  # the page is named per clone, by `tracking plots-page`
    clone = clone_files(tmp_path / "clone")
    assert not (clone / PLOTS_PAGE).exists()
    shown = json.loads(run(["dvc", "plots", "show", "--json"], clone).stdout)["data"]
    assert "reports/audit.png" not in shown and {"training curves", "test confusion"} <= set(shown), sorted(shown)
    drawn = run(["dvc", "plots", "show"], clone)
    assert "HTML template" not in drawn.stderr and (clone / "dvc_plots/index.html").is_file()
