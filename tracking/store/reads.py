"""Reads of runs: the queries the library makes of a store's runs, typed, with their order, limits and paging
written once. Filter strings are built from tracking/names.py's clauses, which quote a value once (`quoted`).

MLflow's errors pass through unchanged: each caller says what a lost server or a rejected filter means to it.
MLflow loads only when a client is handed in, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tracking.names import MLFLOW_PARENT_RUN_TAG, NEWEST_FIRST, REPEAT_KEY_TAG, as_logged, status_is, tag_is

if TYPE_CHECKING:
    from mlflow.entities import Experiment, Run
    from mlflow.tracking import MlflowClient

# Runs per page of a search: MLflow's own default (`SEARCH_MAX_RESULTS_DEFAULT`).
PAGE = 1000


def run_by_id(client: MlflowClient, run_id: str) -> Run:
    """The run `run_id`; MLflow's error when the store cannot give it (RESOURCE_DOES_NOT_EXIST: it has none)."""
    return client.get_run(run_id)


def present_run(client: MlflowClient, run_id: str) -> Run | None:
    """The run `run_id`, or None where the store has no such run or holds it as deleted (a store deleted or
    replaced under outputs that name its runs); any other error of the store is raised."""
    from mlflow.exceptions import MlflowException

    try:
        run = run_by_id(client, run_id)
    except MlflowException as err:
        if getattr(err, "error_code", "") != "RESOURCE_DOES_NOT_EXIST":
            raise
        return None
    return None if run.info.lifecycle_stage == "deleted" else run


def run_metrics(run: Run) -> dict[str, float]:
    """The run's latest metric values as they were logged: MLflow's SQL store keeps an infinite value as the largest
    float (±1.797e308) and hands that back, so it reads as infinite again here, for every command that judges."""
    return {name: as_logged(value) for name, value in run.data.metrics.items()}


def experiment_by_id(client: MlflowClient, experiment_id: str) -> Experiment:
    """The experiment `experiment_id`; MLflow's error when the store cannot give it."""
    return client.get_experiment(experiment_id)


def experiment_named(client: MlflowClient, name: str) -> Experiment | None:
    """The experiment called `name`, or None when the store has none."""
    return client.get_experiment_by_name(name)


def experiment_ids(client: MlflowClient) -> list[str]:
    """The ids of the store's active experiments, as one search lists them (MLflow's first page)."""
    return [found.experiment_id for found in client.search_experiments()]


def newest_run(client: MlflowClient, experiments: Sequence[str], filter_string: str) -> Run | None:
    """The latest-started run of the experiments `experiments` (ids) that `filter_string` selects; None when none
    does (or no experiment is given)."""
    if not experiments:
        return None
    found = client.search_runs(list(experiments), filter_string=filter_string, order_by=[NEWEST_FIRST], max_results=1)
    return found[0] if found else None


def first_runs(client: MlflowClient, experiments: Sequence[str], filter_string: str, limit: int) -> list[Run]:
    """At most `limit` runs of `experiments` that `filter_string` selects, in MLflow's order: enough to tell
    one match from several."""
    if not experiments:
        return []
    return list(client.search_runs(list(experiments), filter_string=filter_string, max_results=limit))


def all_runs(
    client: MlflowClient,
    experiments: Sequence[str],
    filter_string: str = "",
    deleted_too: bool = False,
    page_size: int = PAGE,
) -> list[Run]:
    """Every run of `experiments` that `filter_string` selects, page after page of `page_size`; deleted runs
    too when `deleted_too`."""
    from mlflow.entities import ViewType

    if not experiments:
        return []
    view = ViewType.ALL if deleted_too else ViewType.ACTIVE_ONLY
    runs: list[Run] = []
    token = None
    while True:
        page = client.search_runs(
            list(experiments), filter_string, run_view_type=view, max_results=page_size, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def children_of(client: MlflowClient, experiment_id: str, parent_run_id: str, where: str = "") -> list[Run]:
    """The nested runs of `parent_run_id` (in its experiment, `experiment_id`) that the filter clauses `where`
    select as well."""
    return all_runs(
        client, [experiment_id], " and ".join(filter(None, (tag_is(MLFLOW_PARENT_RUN_TAG, parent_run_id), where)))
    )


def finished_repeat(client: MlflowClient, experiment_id: str, key: str) -> Run | None:
    """The newest FINISHED run of `experiment_id` that trained the repeat whose key is `key` (its `noise.repeat_key`
    tag, tracking/repeats/kept.py), or None: a repeat any clone finished against this store."""
    return newest_run(client, [experiment_id], f"{tag_is(REPEAT_KEY_TAG, key)} and {status_is('FINISHED')}")
