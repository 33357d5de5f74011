"""Reads of runs (tracking/store/reads.py) on a real SQLite MLflow store: paging past one page, the newest run,
a parent's children, and filter values holding quotes."""

from __future__ import annotations

import pytest

from tracking.errors import RunSelectionError
from tracking.names import MLFLOW_PARENT_RUN_TAG, attribute_is, quoted, status_is, tag_is
from tracking.store.reads import all_runs, children_of, first_runs, newest_run


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """A SQLite store for the module's tests (creating one costs about a second)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{tmp_path_factory.mktemp('reads') / 'mlflow.db'}")


@pytest.fixture
def store(client, request):
    """An experiment of the test's own in the store, and a function that adds a finished run to it."""
    experiment = client.create_experiment(request.node.name)

    def add(name: str, start: int, **tags: str) -> str:
        run_id = client.create_run(experiment, start_time=start, run_name=name, tags=tags).info.run_id
        client.set_terminated(run_id)
        return run_id

    return client, experiment, add


def test_every_run_comes_back_across_pages(store):
    client, experiment, add = store
    made = {add(f"run-{index}", 1000 + index, group="paged") for index in range(5)}
    add("other", 2000, group="other")
    assert len(first_runs(client, [experiment], tag_is("group", "paged"), limit=2)) == 2  # one page holds 2
    paged = all_runs(client, [experiment], tag_is("group", "paged"), page_size=2)
    assert len(paged) == 5 and {run.info.run_id for run in paged} == made
    assert all_runs(client, [], tag_is("group", "paged")) == []


def test_newest_run_and_a_parents_children(store):
    client, experiment, add = store
    parent = add("parent", 1000)
    first = add("child", 1001, **{MLFLOW_PARENT_RUN_TAG: parent, "key": "a"})
    latest = add("child", 1002, **{MLFLOW_PARENT_RUN_TAG: parent, "key": "b"})
    add("stranger", 1003, key="a")
    assert newest_run(client, [experiment], attribute_is("run_name", "child")).info.run_id == latest
    assert newest_run(client, [experiment], attribute_is("run_name", "nobody")) is None
    assert newest_run(client, [], "") is None
    assert {run.info.run_id for run in children_of(client, experiment, parent)} == {first, latest}
    keyed = children_of(client, experiment, parent, f"{tag_is('key', 'a')} and {status_is('FINISHED')}")
    assert [run.info.run_id for run in keyed] == [first]


def test_a_value_holding_a_quote_is_matched_exactly(store):
    client, experiment, add = store
    apostrophe = add("it's", 1000, note="it's")
    double = add('say "hi"', 1001, note='say "hi"')
    add("its", 1002, note="its")
    assert newest_run(client, [experiment], attribute_is("run_name", "it's")).info.run_id == apostrophe
    assert newest_run(client, [experiment], tag_is("note", "it's")).info.run_id == apostrophe
    assert newest_run(client, [experiment], tag_is("note", 'say "hi"')).info.run_id == double
    assert quoted("plain") == "'plain'" and quoted("it's") == '"it\'s"'
    with pytest.raises(RunSelectionError, match="both quote characters"):
        quoted("""it's "both\"""")


def test_the_run_of_a_training_is_found_by_content_and_an_earlier_run_file_by_its_id(store, tmp_path):
    """outputs/run.json records a training by its inputs' and weights' hashes: the newest run tagged with both (a
    rerun left out) is its run; a file an earlier version wrote (a revision committed before) named its run by id,
    and still finds it; a damaged one names the file."""
    from tracking.errors import RunStateError
    from tracking.layout import TRAIN
    from tracking.names import RERUN_OF_TAG, TRAINED_INPUTS_TAG, WEIGHTS_TAG
    from tracking.store.recorded import find_training, parse_run_file, write_link

    client, experiment, add = store
    name = client.get_experiment(experiment).name
    hashes = {TRAINED_INPUTS_TAG: "1" * 64, WEIGHTS_TAG: "2" * 64}
    older, newer = add("train-a", 1000, **hashes), add("train-b", 2000, **hashes)
    add("rerun", 3000, **hashes, **{RERUN_OF_TAG: newer})
    add("other-weights", 4000, **{**hashes, WEIGHTS_TAG: "3" * 64})
    today = f'{{"experiment": "{name}", "inputs_sha256": "{"1" * 64}", "weights_sha256": "{"2" * 64}"}}'
    assert find_training(client, parse_run_file(today)).info.run_id == newer
    write_link(tmp_path, TRAIN, {**parse_run_file(today).content(), "run_id": older})  # this checkout's run
    assert find_training(client, parse_run_file(today), tmp_path).info.run_id == older
    earlier = f'{{"run_id": "{older}", "experiment": "{name}", "weights_sha256": "{"2" * 64}"}}'
    assert find_training(client, parse_run_file(earlier)).info.run_id == older
    gone = parse_run_file(f'{{"run_id": "{"f" * 32}", "experiment": "{name}"}}')
    assert (
        find_training(client, gone) is None
        and gone.describe("here") == f"outputs/run.json names MLflow run {'f' * 32}, which here does not hold"
    )
    with pytest.raises(RunStateError, match=r"outputs/run\.json is damaged"):
        parse_run_file('{"experiment": "x"}')
