"""The verdict where a user looks, proven in a real browser: `mlflow ui` started the README's way on a pipeline's
store, the candidate's run page rendered by headless Chromium (issue 36). Chromium is Debian's `chromium`, which
`.ci/run` installs when missing; without it the test fails unless TRACKING_TEST_SKIP_BROWSER=1."""

import json
import os
import shutil
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, client_for

sys.path.insert(0, str(REPO / "bench"))
from ui_screenshots import free_port, rendered_dom, run_page, start_ui

SKIP_BROWSER = "TRACKING_TEST_SKIP_BROWSER"


@pytest.mark.slow
def test_the_candidates_run_page_opens_on_its_verdict_in_chromium(readme_typed: Path, tmp_path: Path):
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get(SKIP_BROWSER) == "1":
            pytest.skip("chromium not on PATH")
        pytest.fail(f"chromium not on PATH: `apt-get install chromium` (as .ci/run does), or {SKIP_BROWSER}=1")
    project = readme_typed / "project"
    candidate = json.loads((project / "outputs/run.json").read_text())["run_id"]
    verdict = json.loads((project / "metrics/compare.json").read_text())["verdict"]
    experiment = client_for(project).get_run(candidate).info.experiment_id
    port = free_port()
    server = start_ui(project / "mlflow.db", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ajax-api/3.0/mlflow/ui-telemetry", timeout=10) as got:
            assert json.load(got)["disable_ui_telemetry"] is True  # the UI is told to send nothing
        netlog = tmp_path / "netlog.json"
        page = run_page(f"http://127.0.0.1:{port}/#", experiment, candidate)
        dom = rendered_dom(chromium, page, f"--log-net-log={netlog}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    shown = dom.find("Noise verdict: ")
    assert shown > 0 and dom[shown:].startswith(f"Noise verdict: {verdict}</strong>"), dom[shown - 200 : shown + 300]
    assert shown < dom.find("About this run")  # the description comes first
    assert f'href="#/experiments/{experiment}/runs/{candidate}/artifacts/compare/compare.md"' in dom
    assert "test_accuracy " in dom and ": gap " in dom and "Why this band: " in dom
    asked = page_requests(netlog)
    assert any(url.startswith(f"http://127.0.0.1:{port}/ajax-api/") for url in asked)  # the log holds the page's
    assert [url for url in asked if not url.startswith(f"http://127.0.0.1:{port}/")] == []  # and nothing else


def page_requests(netlog: Path) -> list[str]:
    """The URLs the page asked for, from Chromium's network log (the browser's own requests, which have no
    initiator, left out: they are Chromium's, not the UI's, and blocked here). A log cut short by Chromium's exit
    is closed first."""
    text = netlog.read_text().rstrip()
    log = json.loads(text if text.endswith("}") else text.rstrip(",") + "]}")
    return sorted(
        {
            event["params"]["url"]
            for event in log["events"]
            if "url" in event.get("params", {}) and event["params"].get("initiator", "not an origin") != "not an origin"
        }
    )
