"""The run lifecycle against a real SQLite MLflow store: honest end states, resuming, background writes."""

import contextlib
import itertools
import os
import re
import time

import pytest
from conftest import client_for

from tracking.errors import RunStateError, TrackingServerError
from tracking.run.tracker import Tracker
from tracking.store.sinks import RunSink


def status(root, run_id):
    return client_for(root).get_run(run_id).info.status


def test_clean_exit_finishes_and_resume_reuses_the_run(root):
    with Tracker("t", root) as first:
        first.log_metrics({"a": 1.0})
    assert status(root, first.run_id) == "FINISHED"
    with Tracker("t", root, run_id=first.run_id, stage="evaluate") as second:
        second.log_metrics({"b": 2.0})
    run = client_for(root).get_run(first.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics == {"a": 1.0, "b": 2.0}
    assert run.data.tags["pipeline.stage"] == "evaluate"


@pytest.mark.parametrize(("error", "expected"), [(ValueError("boom"), "FAILED"), (KeyboardInterrupt(), "KILLED")])
def test_errors_end_the_run_failed_or_killed(root, error, expected):
    with pytest.raises(type(error)), Tracker("t", root) as tracker:
        tracker.log_metrics({"epoch_loss": 0.5}, step=0, wait=False)
        raise error
    run = client_for(root).get_run(tracker.run_id)
    assert run.info.status == expected
    assert run.data.metrics["epoch_loss"] == 0.5
    assert run.data.tags["error"].startswith(type(error).__name__)


def test_an_interrupt_in_a_later_stage_leaves_the_finished_run_finished(root, monkeypatch):
    """Ctrl-C in evaluate, which resumes train's FINISHED run: the training is whole (DVC keeps its model), so the
    run stays FINISHED with its own end time, the error tag names the interrupted stage, and no run is said
    KILLED; a run that was not FINISHED is still ended KILLED."""
    import tracking.run.lifecycle
    from tracking.run.lifecycle import ended_killed

    monkeypatch.setattr(tracking.run.lifecycle, "_killed", [])
    with Tracker("t", root) as trained:
        trained.log_metrics({"epoch_loss": 0.5})
    end_time = client_for(root).get_run(trained.run_id).info.end_time
    with pytest.raises(KeyboardInterrupt), Tracker("t", root, run_id=trained.run_id, stage="evaluate") as evaluating:
        evaluating.log_metrics({"test_loss": 0.7})
        raise KeyboardInterrupt
    run = client_for(root).get_run(trained.run_id)
    assert (run.info.status, run.info.end_time) == ("FINISHED", end_time) and ended_killed() == []
    assert run.data.tags["error"].startswith("KeyboardInterrupt: the evaluate stage was interrupted")
    with pytest.raises(KeyboardInterrupt), Tracker("t", root) as killed:
        raise KeyboardInterrupt
    assert status(root, killed.run_id) == "KILLED" and ended_killed() == [killed.run_id]


def test_failed_background_write_is_reported_once_and_fails_the_run(root, caplog):
    """A failed background write is raised as the run ends, and logged only where another error ends the run (it
    would be lost behind that one); raised and logged, a stage said it twice."""

    def broken() -> None:
        raise OSError("disk full")

    written = r"writing to the MLflow store .* failed \(disk full\)"
    with pytest.raises(TrackingServerError, match=written), Tracker("t", root) as tracker:
        tracker.in_background(broken)
        tracker.log_metrics({"later": 1.0}, wait=False)
    assert status(root, tracker.run_id) == "FAILED"
    assert not [record for record in caplog.records if record.name == "tracking.run.tracker"], "said once: raised"
    assert "later" not in client_for(root).get_run(tracker.run_id).data.metrics

    with pytest.raises(ValueError, match="the training's own"), Tracker("t", root) as tracker:
        tracker.in_background(broken)
        raise ValueError("the training's own")
    reported = [record for record in caplog.records if record.name == "tracking.run.tracker"]
    assert [record.levelname for record in reported] == ["ERROR"] and "disk full" in reported[0].getMessage()


def test_background_metrics_keep_their_order_and_steps(root):
    with Tracker("t", root) as tracker:
        for step in range(5):
            tracker.log_metrics({"epoch_loss": 1.0 / (step + 1)}, step=step, wait=False)
    history = client_for(root).get_metric_history(tracker.run_id, "epoch_loss")
    assert [m.step for m in history] == list(range(5))


def metric_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many metrics each write to the store carried, from here on (the writes still reach the store)."""
    counts: list[int] = []
    write = RunSink.write

    def counted(self: RunSink, op: dict) -> None:
        if op["op"] == "batch" and op["metrics"]:
            counts.append(len(op["metrics"]))
        write(self, op)

    monkeypatch.setattr(RunSink, "write", counted)
    return counts


def test_quick_epochs_reach_the_store_in_few_writes_with_every_step(root, monkeypatch):
    """Fifty epochs logged within a second: the first is written at once, the rest together as the run ends."""
    writes = metric_writes(monkeypatch)
    with Tracker("t", root) as tracker:
        for step in range(50):
            tracker.log_metrics({"epoch_loss": 1.0 / (step + 1), "epoch_accuracy": step / 50}, step=step, wait=False)
    client = client_for(root)
    for key, value in (("epoch_loss", lambda step: 1.0 / (step + 1)), ("epoch_accuracy", lambda step: step / 50)):
        history = client.get_metric_history(tracker.run_id, key)
        assert [(m.step, m.value) for m in history] == [(step, value(step)) for step in range(50)]
    assert sum(writes) == 100 and len(writes) <= 2, writes


def test_slow_epochs_are_in_the_store_while_the_run_is_open(root, monkeypatch):
    """Queued epochs are written every `METRICS_FLUSH_S` during training, not only at its end."""
    monkeypatch.setattr("tracking.run.log_calls.METRICS_FLUSH_S", 0.2)
    writes = metric_writes(monkeypatch)
    with Tracker("t", root) as tracker:
        for step in range(10):
            tracker.log_metrics({"epoch_loss": 1.0 / (step + 1)}, step=step, wait=False)
            time.sleep(0.1)
        time.sleep(0.3)
        seen = client_for(root).get_metric_history(tracker.run_id, "epoch_loss")
    assert len(seen) >= 8, [m.step for m in seen]
    assert 3 <= len(writes) <= 7, writes


def test_an_epoch_queued_before_a_pause_is_written_by_the_next_heartbeat(root, monkeypatch):
    """Two epochs close together, then a long pause: the second reaches the store with the heartbeat, not at the end."""
    monkeypatch.setattr("tracking.run.tracker.HEARTBEAT_INTERVAL_S", 0.2)
    with Tracker("t", root) as tracker:
        tracker.log_metrics({"epoch_loss": 1.0}, step=0, wait=False)
        time.sleep(0.1)  # written by now; the next epoch comes within METRICS_FLUSH_S of it
        tracker.log_metrics({"epoch_loss": 0.5}, step=1, wait=False)
        time.sleep(0.6)
        seen = client_for(root).get_metric_history(tracker.run_id, "epoch_loss")
    assert [m.step for m in seen] == [0, 1]


def test_runs_opened_after_the_same_seeding_get_their_own_names_and_leave_the_seeded_stream(root, monkeypatch):
    """`dvc repro` seeds Python's `random` before the run opens, and MLflow drew every run's name from it: each run
    was `gaudy-conch-754`, and the draw moved the seeded stream. Names come from elsewhere and the stream stays."""
    import random

    monkeypatch.delenv("DVC_EXP_NAME", raising=False)
    names = []
    for _ in range(2):
        random.seed(42)
        seeded = random.getstate()
        with Tracker("t", root) as tracker:
            assert random.getstate() == seeded
        names.append(client_for(root).get_run(tracker.run_id).info.run_name)
    assert names[0] != names[1] and all(re.fullmatch(r"train-[0-9a-f]{6}", name) for name in names), names
    monkeypatch.setenv("DVC_EXP_NAME", "pavid-vine")
    with Tracker("t", root) as tracker:
        pass
    assert client_for(root).get_run(tracker.run_id).info.run_name == "pavid-vine"


def test_a_stage_that_keeps_the_end_time_adds_to_a_finished_run_without_lengthening_it(root):
    """The compare stage reopens the train stage's run after the calibration's minutes: MLflow took the run to
    last until compare ended (3.4 min for 40 s of training)."""
    with Tracker("t", root) as first:
        first.log_metrics({"a": 1.0})
    ended = client_for(root).get_run(first.run_id).info.end_time
    time.sleep(0.05)
    with Tracker("t", root, run_id=first.run_id, stage="compare", keep_end_time=True) as second:
        second.log_metrics({"b": 2.0})
    run = client_for(root).get_run(first.run_id)
    assert (run.info.status, run.info.end_time, run.data.metrics) == ("FINISHED", ended, {"a": 1.0, "b": 2.0})
    with pytest.raises(ValueError), Tracker("t", root, run_id=first.run_id, stage="compare", keep_end_time=True):
        raise ValueError("boom")
    failed = client_for(root).get_run(first.run_id).info
    assert failed.status == "FAILED" and failed.end_time > ended


def test_unknown_run_id_is_a_user_error(root):
    expected = f"the run to resume, {'f' * 32}, is not in sqlite:///"
    with pytest.raises(RunStateError, match=expected) as raised, Tracker("t", root, run_id="f" * 32):
        pass
    assert "`dvc repro --force --downstream train`" in str(raised.value)


@pytest.mark.format
def test_experiments_open_on_training_runs_in_the_mlflow_ui(root):
    """MLflow 3's UI shows an experiment without `mlflow.experimentKind` as a GenAI app (traces, tokens)."""
    with Tracker("new", root):
        pass
    client = client_for(root)
    older = client.create_experiment("older")
    with Tracker("older", root):
        pass
    for experiment_id in (client.get_experiment_by_name("new").experiment_id, older):
        assert client.get_experiment(experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_logged_model_says_nothing_of_a_uv_lock_beside_it(root, capfd):
    """MLflow logs "Detected uv project" when uv.lock and pyproject.toml sit in the working folder, as in this
    repository; the packages are given to it, so the line is noise in every training's output."""
    import keras
    import numpy as np

    (root / "uv.lock").write_text("version = 1\n")
    (root / "pyproject.toml").write_text('[project]\nname = "team"\nversion = "0"\n')
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with Tracker("t", root) as tracker:
        tracker.log_keras_model(model, np.zeros((2, 3), dtype="float32"))
    assert client_for(root).search_logged_models([client_for(root).get_experiment_by_name("t").experiment_id])
    assert "Detected uv project" not in capfd.readouterr().err


def sampler_threads() -> list[str]:
    import threading

    """Ours, and MLflow's own (which the tracker never starts)."""
    return [t.name for t in threading.enumerate() if t.name in ("tracking-system-metrics", "SystemMetricsMonitor")]


@pytest.mark.parametrize(
    ("error", "expected"), [(None, "FINISHED"), (ValueError("boom"), "FAILED"), (KeyboardInterrupt(), "KILLED")]
)
def test_system_metrics_sample_a_run_shorter_than_the_interval_and_stop_with_it(
    root, capfd, monkeypatch, error, expected
):
    """The default pipeline's repeats last about 4.5 s: even a run that ends before the first interval has a sample,
    and ending the run does not wait for the interval."""
    import time

    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "30")
    with (
        pytest.raises(type(error)) if error else contextlib.nullcontext(),
        Tracker("t", root, system_metrics=True) as tracker,
    ):
        time.sleep(0.5)
        assert sampler_threads() == ["tracking-system-metrics"]
        closing = time.monotonic()
        if error:
            raise error
    assert time.monotonic() - closing < 10, "ending the run waited for the next sample"
    assert sampler_threads() == []
    client = client_for(root)
    assert client.get_run(tracker.run_id).info.status == expected
    for key in ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"):
        [sample] = client.get_metric_history(tracker.run_id, key)
        assert sample.step == 0 and sample.value >= 0
    err = capfd.readouterr().err  # MLflow's INFO lines ("Skip logging GPU metrics", ...) stay out of stage output
    assert "GPU metrics" not in err and "system metrics" not in err, err


def test_system_metrics_are_sampled_every_interval(root, monkeypatch):
    import time

    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")  # MLflow's own setting is honoured
    key = "system/cpu_utilization_percentage"
    with Tracker("t", root, system_metrics=True) as tracker:
        # Samples reach the store while the run is open: wait for three (on a loaded CI core a sample itself takes
        # a good part of 0.2 s), then check they came closer together than the default interval of 2 s.
        deadline = time.monotonic() + 30
        while len(client_for(root).get_metric_history(tracker.run_id, key)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    history = client_for(root).get_metric_history(tracker.run_id, key)
    assert len(history) >= 3 and [m.step for m in history] == list(range(len(history)))
    periodic = history[:3]  # the samples before the one `stop` takes
    gaps = [later.timestamp - earlier.timestamp for earlier, later in itertools.pairwise(periodic)]
    assert min(gaps) < 1500, gaps


class SlowStore:
    """A real store slowed on purpose: each write waits `delay` seconds first, one writer at a time (as SQLite takes
    them), then goes to the run's own `MlflowSink`."""

    def __init__(self, live, delay: float) -> None:
        import threading

        self.live, self.delay, self.writes = live, delay, 0
        self._lock = threading.Lock()

    def write(self, op) -> None:
        with self._lock:
            time.sleep(self.delay)
            self.writes += 1
            self.live.write(op)

    def close(self):
        return self.live.close()


def test_a_long_run_on_a_slow_store_ends_in_bounded_time(root, monkeypatch):
    """Thousands of epochs' metrics and thousands of system metrics samples on a store that takes 0.2 s a write: the
    sampler keeps its interval whatever the store does (it never writes), the writer gathers what queued while it
    waited, and the end waits for a couple of writes at most, not for the run's length (1.2 to 1.5 s on 2 loaded
    cores for 1,000, 3,000 and 10,000 epochs alike, 0.2 s of it each write's sleep). Every value arrives."""
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.002")
    epochs, keys = 3000, ("epoch_loss", "epoch_accuracy", "epoch_val_loss", "epoch_val_accuracy")
    with Tracker("t", root, system_metrics=True) as tracker:
        slow = tracker._sink.live = SlowStore(tracker._sink.live, 0.2)
        started = time.monotonic()
        for epoch in range(epochs):
            tracker.log_metrics({key: 1.0 / (epoch + 1) for key in keys}, step=epoch, wait=False)
            time.sleep(0.001)
        training_s = time.monotonic() - started
        closing = time.monotonic()
    ending_s = time.monotonic() - closing
    assert ending_s < 3.0, f"the run took {ending_s:.2f} s to end after {training_s:.1f} s of epochs"
    client = client_for(root)
    assert client.get_run(tracker.run_id).info.status == "FINISHED"
    for key in keys:
        assert [m.step for m in client.get_metric_history(tracker.run_id, key)] == list(range(epochs)), key
    samples = client.get_metric_history(tracker.run_id, "system/cpu_utilization_percentage")
    # At 0.2 s a write the store took at most training_s / 0.2 writes: a sampler that waited for it would have
    # sampled that often, not every few milliseconds.
    assert len(samples) > 10 * training_s / slow.delay, (len(samples), training_s, slow.writes)
    assert sorted(m.step for m in samples) == list(range(len(samples)))
    assert slow.writes < 3 * training_s, slow.writes  # gathered: about a write a second, not one per epoch or sample


def test_a_sampler_mid_interval_and_a_write_in_flight_do_not_hold_up_the_end(root, monkeypatch):
    """The run ends 0.1 s into a 60 s sampling interval, with the writer in the middle of a 0.5 s write: the end
    takes the last sample at once (the sampler's wait is an `Event`, never a sleep of the interval) and waits for the
    write in flight and the last one only (about 1 s, the store's delays; 0.2 s on a quiet core without them). The
    sample and the epoch both arrive."""
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "60")
    with Tracker("t", root, system_metrics=True) as tracker:
        slow = tracker._sink.live = SlowStore(tracker._sink.live, 0.5)
        tracker.log_metrics({"epoch_loss": 0.5}, step=0, wait=False)  # the first goes at once: the writer is busy
        time.sleep(0.1)
        closing = time.monotonic()
    ending_s = time.monotonic() - closing
    assert ending_s < 3.0, f"the run took {ending_s:.2f} s to end, {slow.writes} slow writes"
    client = client_for(root)
    assert [m.value for m in client.get_metric_history(tracker.run_id, "epoch_loss")] == [0.5]
    [sample] = client.get_metric_history(tracker.run_id, "system/cpu_utilization_percentage")
    assert sample.step == 0


def test_without_system_metrics_none_are_logged_whatever_mlflow_is_told(root, monkeypatch):
    """MLflow's own monitor, which MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING would start, never runs beside ours."""
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "true")
    with Tracker("t", root) as tracker:
        tracker.log_metrics({"a": 1.0})
        assert sampler_threads() == []
    assert set(client_for(root).get_run(tracker.run_id).data.metrics) == {"a"}


def test_logging_a_model_leaves_the_generators_of_a_layer_that_draws_at_inference_where_they_were(root):
    """The signature's call on the example must not move a generator: a team script that logs its model and then
    evaluates it (a VAE's sampling layer) would score from other draws than it would untracked."""
    import keras
    import numpy as np

    class Noisy(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.generator = keras.random.SeedGenerator(3)

        def call(self, x):
            return x + keras.random.normal(keras.ops.shape(x), seed=self.generator)

    model = keras.Sequential([keras.Input(shape=(2,)), Noisy()])
    example = np.zeros((2, 2), "float32")
    before = model.layers[0].generator.state.numpy()
    with Tracker("t", root) as tracker:
        tracker.log_keras_model(model, example)
    assert model.layers[0].generator.state.numpy().tolist() == before.tolist()
    assert status(root, tracker.run_id) == "FINISHED"


def test_mlflow_context_tags_reach_the_store_redacted_from_the_run_s_first_write(tmp_path):
    """MLflow resolves the git branch, remote and source file itself when a run starts and sends them in the
    run's first write: a team script on a branch named after a token must not hand it to the store, not even
    for the moment before provenance overwrites it (a server would have it in its request log)."""
    import subprocess
    import sys

    token = "ghp_contextPlantedToken0123456789ab"
    for command in (["init", "-q"], ["checkout", "-q", "-b", f"feature/{token}"]):
        subprocess.run(["git", *command], cwd=tmp_path, check=True)
    (tmp_path / "script.py").write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from mlflow.tracking import MlflowClient\n"
        "from tracking.run.tracker import Tracker\n"
        "root = Path(sys.argv[1])\n"
        "with Tracker('t', root) as tracker:\n"
        "    tags = MlflowClient(f'sqlite:///{root}/mlflow.db').get_run(tracker.run_id).data.tags\n"
        "    print(tags['mlflow.source.git.branch'])\n"
    )
    subprocess.run(["git", "add", "script.py"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s"], cwd=tmp_path, check=True)
    done = subprocess.run(
        [sys.executable, "script.py", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "feature/<redacted>"
    assert token.encode() not in (tmp_path / "mlflow.db").read_bytes()


@pytest.mark.parametrize(("ahead_s", "warned"), [(365 * 86400, True), (600, False)])
def test_a_run_opened_under_a_clock_behind_the_experiment_s_runs_says_so(root, caplog, ahead_s, warned):
    """A run already in the experiment started a year (or ten minutes, within hosts' usual drift) after this
    machine's now: the new run is recorded either way, and only the year is worth a warning."""
    with Tracker("t", root) as first:
        pass
    client = client_for(root)
    experiment_id = client.get_run(first.run_id).info.experiment_id
    ahead = client.create_run(experiment_id, start_time=int((time.time() + ahead_s) * 1000), run_name="ahead")
    client.set_terminated(ahead.info.run_id)
    with caplog.at_level("WARNING"), Tracker("t", root) as second:
        pass
    said = [record.getMessage() for record in caplog.records if "clock reads" in record.getMessage()]
    assert status(root, second.run_id) == "FINISHED"
    if warned:
        assert len(said) == 1 and "365 days before run " + ahead.info.run_id in said[0], said
        assert "set the clock (NTP: `timedatectl set-ntp true`)" in said[0]
    else:
        assert said == []
