"""Screenshots of the MLflow UI on a project's store, taken by headless Chromium, to look at what users see.

    .venv/bin/python bench/ui_screenshots.py --project . --out docs/images

Needs a project where `dvc repro` has run (a candidate run, judged, and calibration repeats) and a `chromium` on
PATH (Debian: `apt-get install chromium`); tests/test_ui_browser.py opens the candidate's run page the same way. It
starts `mlflow ui` on 127.0.0.1 on a free port as the README does (telemetry off through MLFLOW_DISABLE_TELEMETRY
alone), and Chromium with its network features off, so nothing leaves the machine. Five pictures, each in a fresh
browser profile: the experiment as a fresh browser opens it (MLflow 3.17: its GenAI overview), the experiment in
the *Model training* view (its runs), the candidate's run page (its description, the verdict, first), the chart view
its description links (the judged test metrics first, tracking/noise/judged_view.py), and the compare view of a
calibration repeat and the candidate run (params and `prov.*` tags must show values on both sides, not blanks).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

from tracking.names import PROV_PREFIX
from tracking.noise.judged_view import MODEL_TRAINING, view_link

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
RENDER_BUDGET_MS = 20000
README_UI_COMMAND = "MLFLOW_DISABLE_TELEMETRY=true .venv/bin/mlflow ui "
START_TIMEOUT_S = 240  # `mlflow ui` takes over a minute to start on 2 busy cores
RUN_PAGE_WIDTH = 2400  # narrower, MLflow's Assistant panel pushes the run's description below its tags
# What also turns MLflow's telemetry off (mlflow/telemetry/utils.py): left out of the UI's environment, so that
# the README's MLFLOW_DISABLE_TELEMETRY=true is what turns it off here, as on a user's machine.
TELEMETRY_OFF_OTHERWISE = ("DO_NOT_TRACK", "PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS")
COMPARE_HEIGHT = 2400  # the compare view's sections scroll inside; the DOM check below reads every row


class TableRows(HTMLParser):
    """The text of each cell of each table row in a page's rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def readme_ui_flags() -> list[str]:
    """The flags the README's `mlflow ui` command adds to the store and port (`--workers 1`), so the UI started here,
    under a loaded test suite too, is the one a user starts."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    (line,) = [line for line in readme.splitlines() if line.startswith(README_UI_COMMAND)]
    words = shlex.split(line.removeprefix(README_UI_COMMAND))
    flags = []
    while words:
        word = words.pop(0)
        if word in ("--backend-store-uri", "--port"):
            words.pop(0)
        else:
            flags.append(word)
    return flags


def start_ui(database: Path, port: int, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """`mlflow ui` on the SQLite store, answering on /health before this returns; `extra_env` is added to its
    environment (the browser test points its proxy variables at a socket that records any outbound request)."""
    mlflow = Path(sys.executable).parent / "mlflow"
    env = {key: value for key, value in os.environ.items() if key not in TELEMETRY_OFF_OTHERWISE}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    env.update(extra_env or {})
    server = subprocess.Popen(
        [
            str(mlflow),
            "ui",
            "--backend-store-uri",
            f"sqlite:///{database}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *readme_ui_flags(),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return server
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"error: mlflow ui on port {port} did not answer within {START_TIMEOUT_S} s")


def run_page(base: str, experiment_id: str, run_id: str) -> str:
    """The URL of a run's page in the *Model training* view."""
    return f"{base}/experiments/{experiment_id}/runs/{run_id}?{MODEL_TRAINING}"


def screenshot(chromium: str, url: str, path: Path, height: int, width: int = 1600) -> None:
    """One headless Chromium screenshot of `url`, in a fresh profile, after the React UI has rendered."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--screenshot={path}",
                f"--window-size={width},{height}",
                f"--virtual-time-budget={RENDER_BUDGET_MS}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    print(f"{path}: {url}")


def rendered_dom(chromium: str, url: str, *flags: str) -> str:
    """The DOM of `url` after the React UI has rendered, in a fresh profile; `flags` go to Chromium as well."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                *flags,
                f"--user-data-dir={profile}",
                "--dump-dom",
                f"--virtual-time-budget={RENDER_BUDGET_MS}",
                url,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
    return done.stdout


def blank_tags(dom: str) -> tuple[int, list[str], list[str]]:
    """How many `prov.*` rows the compare view shows, and those blank for the first and for the second run."""
    parser = TableRows()
    parser.feed(dom)
    rows = [row for row in parser.rows if len(row) == 3 and row[0].startswith(PROV_PREFIX)]
    return len(rows), [row[0] for row in rows if not row[1]], [row[0] for row in rows if not row[2]]


def pick_runs(database: Path, project: Path, experiment: str) -> tuple[str, str, str]:
    """The experiment id, the candidate run (from outputs/run.json) and the first calibration repeat."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"error: no experiment {experiment!r} in {database}; run `dvc repro evaluate calibrate` first")
    candidate = json.loads((project / "outputs/run.json").read_text())["run_id"]
    repeats = client.search_runs([found.experiment_id], filter_string="tags.`noise.repeat` = '0'", max_results=1)
    if not repeats:
        raise SystemExit(f"error: no calibration repeat in {database}; run `dvc repro calibrate` first")
    return found.experiment_id, repeats[0].info.run_id, candidate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=Path("."), help="project root holding mlflow.db (default: .)")
    parser.add_argument(
        "--experiment", help="experiment name (default: mlflow.experiment in the project's params.yaml)"
    )
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="folder for the PNG files")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("error: chromium not found on PATH; install it (Debian: apt-get install chromium)")
    project = args.project.resolve()
    database = project / "mlflow.db"
    if args.experiment is None:
        import yaml

        args.experiment = yaml.safe_load((project / "params.yaml").read_text())["mlflow"]["experiment"]
    experiment_id, repeat, candidate = pick_runs(database, project, args.experiment)
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = start_ui(database, port)
    try:
        base = f"http://127.0.0.1:{port}/#"
        screenshot(
            chromium, f"{base}/experiments/{experiment_id}", args.out / "mlflow_experiment_fresh_browser.png", 1000
        )
        screenshot(
            chromium,
            f"{base}/experiments/{experiment_id}?{MODEL_TRAINING}",
            args.out / "mlflow_experiment_runs.png",
            1000,
        )
        screenshot(
            chromium,
            run_page(base, experiment_id, candidate),
            args.out / "mlflow_run_verdict.png",
            1000,
            RUN_PAGE_WIDTH,
        )
        screenshot(
            chromium,
            f"http://127.0.0.1:{port}/{view_link(experiment_id)}",
            args.out / "mlflow_chart_view_judged_metrics.png",
            1000,
        )
        runs, experiments = quote(json.dumps([repeat, candidate])), quote(json.dumps([experiment_id]))
        compare = f"{base}/compare-runs?runs={runs}&experiments={experiments}&{MODEL_TRAINING}"
        screenshot(chromium, compare, args.out / "mlflow_compare_repeat_candidate.png", COMPARE_HEIGHT)
        shown, blank_repeat, blank_candidate = blank_tags(rendered_dom(chromium, compare))
        print(
            f"compare view: {shown} prov.* tag rows; blank for the repeat: {blank_repeat or 'none'}; "
            f"blank for the candidate: {blank_candidate or 'none'}"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
