"""The experiment's view in the MLflow UI that opens on the judged test metrics: a shared view the compare stage writes.

MLflow's compare page charts the first metric a run happened to log (often `system/cpu_utilization_percentage`)
and takes no setting for it; its experiment page sorts charts by name. What the UI does read is a *shared view*: an
experiment tag `mlflow.sharedViewState.<key>` holding the page's state, opened by `?viewStateShareKey=<key>` (what
its *Share* button writes). This one charts the judged metrics first, in a section of their own, and shows them
and the verdict as columns of the runs table; the candidate's run description links to it.
"""

from __future__ import annotations

import json

from tracking.names import SHARED_VIEW_TAG_PREFIX, VERDICT_TAG

VIEW_KEY = "tracking-judged-metrics"
VIEW_TAG = f"{SHARED_VIEW_TAG_PREFIX}{VIEW_KEY}"
# The UI's GenAI / Model training switch, as a URL query: without it MLflow 3.17 opens an experiment's GenAI overview.
MODEL_TRAINING = "workflowType=machine_learning"
SECTION = "Judged test metrics"
_SECTION_ID = "tracking-judged"


def view_state(metrics: list[str]) -> str:
    """The shared view's state, as MLflow's UI reads it: a bar chart per judged metric, in `metrics`' order, in the
    first section of the chart view (metrics the UI finds later go to its own sections after it), and the verdict
    and those metrics as the runs table's columns."""
    charts = [
        {
            "type": "BAR",
            "uuid": f"{_SECTION_ID}-{metric}",
            "metricSectionId": _SECTION_ID,
            "isGenerated": False,
            "deleted": False,
            "metricKey": metric,
            "displayName": metric,
        }
        for metric in metrics
    ]
    section = {
        "uuid": _SECTION_ID,
        "name": SECTION,
        "display": True,
        "isReordered": False,
        "deleted": False,
        "isGenerated": False,
    }
    columns = [f"tags.`{VERDICT_TAG}`", *(f"metrics.`{metric}`" for metric in metrics)]
    return json.dumps({"compareRunCharts": charts, "compareRunSections": [section], "selectedColumns": columns})


def view_link(experiment_id: str) -> str:
    """The UI's address (after its `#`) of the experiment's chart view opened on the shared view."""
    return f"#/experiments/{experiment_id}/runs?compareRunsMode=CHART&viewStateShareKey={VIEW_KEY}&{MODEL_TRAINING}"
