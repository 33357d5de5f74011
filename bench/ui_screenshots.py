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
import fcntl
import json
import os
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tracking.layout import TRAIN
from tracking.names import PROV_PREFIX
from tracking.noise.judged_view import MODEL_TRAINING, view_link
from tracking.store.recorded import read_link

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
RENDER_BUDGET_MS = 20000  # a screenshot's virtual time: the page's own clock, not the wall's
READY_TIMEOUT_S = 120  # how long rendered_dom waits, on the wall's clock, for a page to show what it waits for
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


def rendered_dom(chromium: str, url: str, ready: Callable[[str], bool], *flags: str) -> str:
    """The DOM of `url` once `ready` holds for it, read every half second for up to READY_TIMEOUT_S (the last one
    read, if it never does), in a fresh profile; `flags` go to Chromium as well. Chromium is driven over its
    DevTools pipe rather than --dump-dom, whose virtual-time budget runs on the page's clock: the chart view's
    chart code, fetched lazily, was cut off in about 1 of 2 fresh loads here and the cards never drawn."""
    with devtools_on(chromium, url, flags) as devtools:
        return devtools.page_once(ready)


def text_top(
    chromium: str,
    url: str,
    ready: Callable[[str], bool],
    text: str,
    width: int,
    height: int,
    assistant_closed: bool = False,
) -> tuple[int, int]:
    """Where `text` starts on `url` in a window of `width` x `height` once `ready` holds: the top of the first
    element holding it, in CSS pixels from the top of the page as it opens (-1 if absent), and the height the page
    is shown in. A top below that height is off the first screen. With `assistant_closed`, first close the MLflow
    Assistant panel as a user does (its x button; MLflow opens it on a local server's first page and keeps it
    closed once closed), then reload the page."""
    with devtools_on(chromium, url, (f"--window-size={width},{height}",)) as devtools:
        devtools.page_once(ready)
        if assistant_closed:
            devtools.evaluate(CLOSE_ASSISTANT)
            devtools.until(lambda: not devtools.evaluate(ASSISTANT_OPEN))
            devtools.evaluate(MARK_BEFORE_RELOAD)
            devtools.call("Page.reload")
            devtools.until(lambda: devtools.evaluate(RELOADED) and ready(devtools.evaluate(OUTER_HTML)))
        return tuple(devtools.evaluate(TOP_OF % json.dumps(text)))  # type: ignore[return-value]


# The Assistant panel's close button, by MLflow's component id (3.17), clicked; and whether the panel is still open.
ASSISTANT_CLOSE = '[data-component-id="mlflow.assistant.chat_panel.close"]'
CLOSE_ASSISTANT = f"document.querySelector({json.dumps(ASSISTANT_CLOSE)})?.click()"
ASSISTANT_OPEN = f"document.querySelector({json.dumps(ASSISTANT_CLOSE)}) !== null"
MARK_BEFORE_RELOAD, RELOADED = "window.beforeReload = true", "window.beforeReload === undefined"
OUTER_HTML = "document.documentElement.outerHTML"


# The page's script for text_top: the first text node holding the text, its element's top, and the window's height.
TOP_OF = """(() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    if (walker.currentNode.textContent.includes(%s)) {
      return [Math.round(walker.currentNode.parentElement.getBoundingClientRect().top), window.innerHeight];
    }
  }
  return [-1, window.innerHeight];
})()"""


@contextmanager
def devtools_on(chromium: str, url: str, flags: tuple[str, ...]) -> Iterator[DevTools]:
    """Headless Chromium opening `url` in a fresh profile with `flags`, driven over its DevTools pipe; quit on exit."""
    to_browser, from_test = os.pipe()
    to_test, from_browser = os.pipe()
    to_browser, from_browser = above_pipe_fds(to_browser), above_pipe_fds(from_browser)
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            [
                "bash",  # dash, Debian's sh, takes no file descriptor above 9
                "-c",
                f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-',
                chromium,
                *CHROMIUM_FLAGS,
                *flags,
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                url,
            ],
            pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        devtools = DevTools(from_test, to_test, time.monotonic() + READY_TIMEOUT_S)
        try:
            yield devtools
        finally:
            devtools.close()
            try:
                browser.wait(timeout=30)
            except subprocess.TimeoutExpired:
                browser.kill()
                browser.wait()


def above_pipe_fds(fd: int) -> int:
    """`fd` moved to 10 or above: Chromium reads its DevTools pipe on fd 3 and writes on 4, and the shell that puts
    the pipe there must not overwrite one end with the other (pytest's own files take the low numbers)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class DevTools:
    """The Chrome DevTools protocol over Chromium's --remote-debugging-pipe (JSON messages, each ended by a NUL
    byte), every read bounded by one deadline so that a stuck browser fails the caller instead of hanging it."""

    def __init__(self, send: int, receive: int, deadline: float) -> None:
        self.send, self.receive, self.deadline = send, receive, deadline
        self.sent, self.session, self.buffer = 0, "", b""

    def page_once(self, ready: Callable[[str], bool]) -> str:
        """The first page's DOM once `ready` holds for it, or the last one read when the deadline passes."""
        while not (pages := [t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]):
            time.sleep(0.1)
        self.session = self.call("Target.attachToTarget", targetId=pages[0]["targetId"], flatten=True)["sessionId"]
        while True:
            dom = self.evaluate(OUTER_HTML) or ""
            if ready(dom) or time.monotonic() > self.deadline:
                return dom
            time.sleep(0.5)

    def evaluate(self, script: str) -> Any:
        """The value of `script` run in the attached page (None where it has none)."""
        return self.call("Runtime.evaluate", expression=script, returnByValue=True)["result"].get("value")

    def until(self, holds: Callable[[], object]) -> None:
        """Wait, checking every 0.2 s, until `holds()` is true; past the deadline, a TimeoutError."""
        while not holds():
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"the page did not get there within {READY_TIMEOUT_S} s")
            time.sleep(0.2)

    def call(self, method: str, **params: object) -> dict:
        """One command (sent to the attached page, once there is one) and its result."""
        self.sent += 1
        message: dict[str, object] = {"id": self.sent, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        self._write(message)
        while True:
            answer = self._read()
            if answer.get("id") == self.sent:
                if "result" not in answer:  # the protocol's answer is a result or a refusal
                    raise RuntimeError(f"Chromium refused {method}: {answer}")
                return answer["result"]

    def close(self) -> None:
        """Ask Chromium to quit (it closes the pipe rather than answer) and close this end."""
        try:
            self._write({"id": self.sent + 1, "method": "Browser.close"})
        except BrokenPipeError:
            pass
        finally:
            os.close(self.send)
            os.close(self.receive)

    def _write(self, message: dict[str, object]) -> None:
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.send, data) :]

    def _read(self) -> dict:
        while b"\0" not in self.buffer:
            if not select.select([self.receive], [], [], max(0.0, self.deadline - time.monotonic()))[0]:
                raise TimeoutError(f"Chromium did not answer within {READY_TIMEOUT_S} s")
            chunk = os.read(self.receive, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)


def blank_tags(dom: str) -> tuple[int, list[str], list[str]]:
    """How many `prov.*` rows the compare view shows, and those blank for the first and for the second run."""
    parser = TableRows()
    parser.feed(dom)
    rows = [row for row in parser.rows if len(row) == 3 and row[0].startswith(PROV_PREFIX)]
    return len(rows), [row[0] for row in rows if not row[1]], [row[0] for row in rows if not row[2]]


def pick_runs(database: Path, project: Path, experiment: str) -> tuple[str, str, str]:
    """The experiment id, the candidate run (the one the checkout's train link names) and the first calibration
    repeat."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"error: no experiment {experiment!r} in {database}; run `dvc repro evaluate calibrate` first")
    candidate = read_link(project, TRAIN)["run_id"]
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
        shown, blank_repeat, blank_candidate = blank_tags(
            rendered_dom(chromium, compare, lambda dom: blank_tags(dom)[0] > 0)
        )
        print(
            f"compare view: {shown} prov.* tag rows; blank for the repeat: {blank_repeat or 'none'}; "
            f"blank for the candidate: {blank_candidate or 'none'}"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
