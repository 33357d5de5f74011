"""`dvc plots show` as a user runs it: each chart drawn once, and what it writes is no change to the project."""

import json
from pathlib import Path

from conftest import run


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
