"""README.md and docs/ as a newcomer uses them: the README's commands typed as it shows them, its links followed.

The README stays short (at most MAX_README_LINES) and points into docs/; every relative link of README.md and
docs/*.md must reach a file, and a `#anchor` a heading of that file. The commands the README shows run in the
`project` fixture (a real git + DVC copy of this pipeline) and must print what the README says they print.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import FENCE, README, README_TYPED, REPO, clone_files, project_env, readme_runs, run

from tracking.config.params_file import load_params
from tracking.entry import say_error
from tracking.errors import TrackingError
from tracking.inspect.diff.ranked_groups import is_training_param
from tracking.noise.notes import NOTES_HEADING

DOCS = REPO / "docs"
MAX_README_LINES = 220
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def block_starting(text: str, start: str) -> str:
    """The one fenced block of `text` whose first line starts with `start`."""
    (found,) = [body for _, body in FENCE.findall(text) if body.startswith(start)]
    return found


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file (fenced blocks left out; repeats get -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        if not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    """The links of a Markdown file that point into this repository (not to the web), outside fenced blocks."""
    return [target for target in LINK.findall(FENCE.sub("", path.read_text())) if "://" not in target]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in relative_links(path):
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor} in {resolved.relative_to(REPO)}")
    return broken


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= MAX_README_LINES


def test_readme_defines_the_words_its_verdicts_use():
    """Issue 67: CONTROL, ALGO and `min_effect` appeared in the README undefined."""
    text = README.read_text()
    words = text[text.index("**Words.**") :].split("\n\n")[0]
    defined = ("**CONTROL**", "**ALGO**", "**IMPL**", "**`compare.min_effect`**")
    outcomes = ("`exceeds_noise`", "`within_noise`", "`within_tolerance`", "`inconclusive`")
    assert all(word in words for word in (*defined, *outcomes)), words


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda page: page.name)
def test_every_link_resolves(page: Path):
    assert broken_links(page) == []


def test_the_readme_links_every_docs_page():
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in relative_links(README)}
    assert {page.resolve() for page in DOCS.glob("*.md")} <= linked


def named_tests(text: str) -> set[tuple[str, str]]:
    """(file, test) for each test a guarantees.md row names: `tests/x.py::name`, or `::name` after the file named
    before it in the same cell."""
    found = set()
    for line in text.splitlines():
        for cell in line.split(" | ")[1:]:
            module = None
            for path, name in re.findall(r"`(tests/[\w/]+\.py)?::(\w+)", cell):
                module = path or module
                found.add((module, name))
    return found


def test_every_test_the_guarantees_name_exists():
    named = named_tests((DOCS / "guarantees.md").read_text())
    assert len(named) > 40
    assert [(path, name) for path, name in sorted(named) if f"def {name}(" not in (REPO / path).read_text()] == []


def mapped_modules(text: str) -> set[str]:
    """The modules architecture.md's package map lists: `- `name.py`` lines under a `**`folder/`**` heading."""
    found, folder = set(), ""
    for line in text.splitlines():
        if heading := re.match(r"^\*\*`([\w/]+/)`\*\*", line):
            folder = heading.group(1)
        elif module := re.match(r"^- `(\w+\.py)`:", line):
            found.add(folder + module.group(1))
    return found


def test_the_package_map_lists_every_module():
    modules = {
        str(path.relative_to(REPO))
        for folder in ("tracking", "pipelines")
        for path in (REPO / folder).rglob("*.py")
        if path.name != "__init__.py"
    }
    assert mapped_modules((DOCS / "architecture.md").read_text()) == modules


def test_tracking_help_is_what_the_readme_shows(tmp_path: Path):
    shown = block_starting(README.read_text(), "usage: tracking")
    assert run(["tracking", "--help"], tmp_path, env=project_env(COLUMNS="80")).stdout == shown


def pipeline_table() -> dict[str, str]:
    """The README's pipeline table: stage name -> its `writes` cell."""
    rows = re.findall(r"^\| `(\w+)`[^|]*\|[^|]*\|[^|]*\| (.*) \|$", README.read_text(), re.M)
    return dict(rows)


def declared_outputs(dvc_yaml: Path) -> dict[str, list[str]]:
    """Each stage of a dvc.yaml -> the paths of its outs, metrics and plots."""
    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    return {
        name: [
            next(iter(entry)) if isinstance(entry, dict) else entry
            for kind in ("outs", "metrics", "plots")
            for entry in stage.get(kind, [])
        ]
        for name, stage in stages.items()
    }


def test_the_pipeline_table_names_every_stage_and_what_it_writes(project: Path):
    """The table's stages are those `dvc stage list` finds (the audit in audit/dvc.yaml), and each stage's row
    names every output its dvc.yaml declares; `dvc status` reads both files as the README's commands do."""
    (project / "audit").mkdir()
    shutil.copy(REPO / "audit/dvc.yaml", project / "audit/dvc.yaml")
    listed = (
        run(["dvc", "stage", "list"], project).stdout + run(["dvc", "stage", "list", "audit/dvc.yaml"], project).stdout
    )
    stages = {line.split()[0].rpartition(":")[2] for line in listed.splitlines()}
    table = pipeline_table()
    assert set(table) == stages
    for dvc_yaml in (REPO / "dvc.yaml", REPO / "audit/dvc.yaml"):
        for stage, outputs in declared_outputs(dvc_yaml).items():
            written = [path.rstrip("/") for path in re.findall(r"`([^`]+)`", table[stage])]
            assert all(any(fnmatch.fnmatch(out, path) for path in written) for out in outputs), (stage, outputs)
    status = run(["dvc", "status"], project).stdout + run(["dvc", "status", "audit/dvc.yaml"], project).stdout
    assert all(f"{stage}:" in status for stage in stages), status


def test_dvc_in_a_clone_of_this_repository_sees_only_its_own_pipelines(tmp_path: Path):
    """The README's `dvc` commands typed at this repository's root, as after `git clone`: the stages are this
    project's and the audit's, not the examples' (projects of their own, copied out to run), and `dvc metrics
    show` reads the committed metrics without reporting the examples' as missing."""
    clone = clone_files(tmp_path / "clone")
    listed = run(["dvc", "stage", "list", "--all"], clone).stdout
    audit = {f"audit/dvc.yaml:{stage}" for stage in declared_outputs(REPO / "audit/dvc.yaml")}
    assert {line.split()[0] for line in listed.splitlines()} == {*declared_outputs(REPO / "dvc.yaml"), *audit}
    shown = run(["dvc", "metrics", "show"], clone)
    assert "test_accuracy" in shown.stdout and "failed to load" not in shown.stderr, shown.stderr


def test_tracking_doctor_in_a_fresh_project(project: Path):
    """`tracking doctor` where no pipeline has run yet: one line, exit status 0, no store created."""
    done = run(["tracking", "doctor"], project)
    assert done.stdout == f"sqlite:///{project / 'mlflow.db'}: no store yet, so no run left RUNNING to repair\n"
    assert not (project / "mlflow.db").exists()


@pytest.mark.slow
def test_the_readme_commands_then_diff_as_shown(readme_typed: Path):
    """The README's `dvc` block typed as it stands (a tiny model, the `readme_typed` fixture), each compare
    printing a verdict line shaped as the README's; then `tracking diff` of the first run and the experiment, by
    its DVC name, prints the sections of the README's example and names the learning rate as typed."""
    project = readme_typed / "project"
    typed = (readme_typed / README_TYPED).read_text()
    verdict = (
        r"^(within_noise|exceeds_noise|inconclusive): .*; judged against \w+ \(\d+ runs\)\. Report: reports/compare.md$"
    )
    assert len(re.findall(verdict, typed, re.M)) == 2, typed
    # `dvc exp show` as the README has it: each experiment's verdict and test_accuracy, not a row of `…`
    (header,) = [line.split() for line in typed.splitlines() if line.split()[:2] == ["Experiment", "Created"]]
    assert sorted(header) == ["Created", "Experiment", "test_accuracy", "test_loss", "verdict"], typed
    assert len(re.findall(r" (within_noise|exceeds_noise|inconclusive) +$", typed, re.M)) >= 2, typed
    first, experiment = readme_runs(readme_typed)
    diff = run(["tracking", "diff", first, experiment], project).stdout
    shown = block_starting(README.read_text(), "$ tracking diff").splitlines()[1:]
    # The README's example decides both metrics; the tiny model here may leave one inconclusive, whose whole note
    # then follows in its own section (`tracking.noise.notes.NOTES_HEADING`), which the example has no need of.
    optional = NOTES_HEADING.split()[0]
    assert [part for part in sections(diff.splitlines()) if part != optional] == sections(shown), diff
    assert re.search(r"^    train\.learning_rate +0\.001 -> 1e-05$", diff, re.M), diff
    # Every field count the README's and diff-and-rerun.md's examples quote is the one a real diff prints, but for
    # the params group, which is the default params.yaml's (this project's tiny model has fewer kwargs).
    examples = [shown, *(body.splitlines() for _, body in FENCE.findall((DOCS / "diff-and-rerun.md").read_text()))]
    default = sum(map(is_training_param, load_params(REPO / "params.yaml").flat()))
    for example in (lines for lines in examples if lines and "Differences" in " ".join(lines)):
        assert group_sizes(example) == {**group_sizes(diff.splitlines()), "params": default}, (example, diff)


def group_sizes(lines: list[str]) -> dict[str, int]:
    """How many fields `tracking diff` compared in each group: `params (1 of 17 fields differ)` and the
    `identical:` line's `data (47 fields)`."""
    text = "\n".join(lines)
    found = {name: int(total) for name, total in re.findall(r"^  (\w+) \(\d+ of (\d+) fields? differ", text, re.M)}
    (identical,) = re.findall(r"^  identical: (.*)$", text, re.M)
    found.update({name: int(total) for name, total in re.findall(r"(\w+) \((\d+) fields?\)", identical)})
    return found


def sections(lines: list[str]) -> list[str]:
    """The headings of `tracking diff` output: the first word of each line that is not indented."""
    return [re.split(r"[\s:,]", line)[0] for line in lines if line and not line.startswith(" ")]


def test_make_says_what_it_does_before_the_silent_bytecode_compile():
    """`make run` on a fresh clone printed nothing for 1 min 23 s while uv compiled bytecode: it says so first."""
    planned = run(["make", "-n", "-B", "-s", "-f", str(REPO / "Makefile"), "venv"], REPO).stdout.splitlines()
    (sync,) = [index for index, line in enumerate(planned) if " sync --frozen --compile-bytecode " in line]
    said = " ".join(line for line in planned[:sync] if line.startswith("echo "))
    assert "compiling their bytecode" in said and "uv prints nothing while it compiles" in said, planned


def test_the_audit_stage_lock_is_committed():
    """Without audit/dvc.lock in git, `dvc status` listed the audit stage in every clone as never run."""
    listed = run(["git", "ls-files", "audit/dvc.lock"], REPO).stdout.split()
    assert listed == ["audit/dvc.lock"]
    assert "audit" in yaml.safe_load((REPO / "audit/dvc.lock").read_text())["stages"]


def test_the_ui_command_make_run_prints_is_the_readme_s_and_the_browser_test_s():
    """Issue 50: the README's `mlflow ui` never served a page on a loaded 2-core machine (4 workers killed 13 times);
    the browser test started it with `--workers 1`. Make's hint, the README and the UI the tests start share flags."""
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    from ui_screenshots import readme_ui_flags

    flags = readme_ui_flags()
    assert flags == ["--workers", "1"]
    (hint,) = [line for line in (REPO / "Makefile").read_text().splitlines() if "bin/mlflow ui " in line]
    assert hint.rstrip('"').endswith("--port 5000 " + " ".join(flags)), hint


def test_the_readme_s_error_line_is_what_a_misspelled_key_prints(tmp_path: Path, monkeypatch, capsys):
    """The stage's own path, in process (test_bad_inputs.py runs the stage and checks its exit status)."""
    shown = block_starting(README.read_text(), "error: params.yaml: unknown key")
    typo = (REPO / "params.yaml").read_text().replace("\n  learning_rate:", "\n  lerning_rate:", 1)
    (tmp_path / "params.yaml").write_text(typo)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrackingError) as raised:
        load_params()
    say_error(raised.value)
    assert capsys.readouterr().err == shown


def test_performance_md_has_a_section_for_every_bench_and_update_replaces_only_those_it_ran():
    """docs/performance.md is bench/report.py's output: every bench's section is there under its title, so
    `--only NAME --update` finds it, and replacing one leaves every other section as the page had it."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("bench_report", REPO / "bench/report.py")
    report = sys.modules["bench_report"] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(report)
    page = report.PAGE.read_text()
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert [f"## {bench.title}" for bench in report.BENCHES] == headings[: len(report.BENCHES)]
    (cluster,) = [bench for bench in report.BENCHES if bench.script == "cluster_speedup.py"]
    new = report.updated(page, [(cluster, "speed-up: 9.99x", 12.0)])
    assert "speed-up: 9.99x" in new and "(12 s, re-run alone on " in new
    kept = [chunk for chunk in page.split("\n## ") if not chunk.startswith(cluster.title)]
    assert kept == [chunk for chunk in new.split("\n## ") if not chunk.startswith(cluster.title)]
