"""MLflow's system metrics for one run: CPU, memory, disk and network, and per GPU where NVML answers.

MLflow's `SystemMetricsMonitor` collects and names them (`system/cpu_utilization_percentage`, ...; the MLflow
UI shows them in the run's System metrics tab), and reads its own `MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL` and
`MLFLOW_SYSTEM_METRICS_NODE_ID`. Its thread is not used: it asks the server for the run's status before every
sample and writes through a client of its own (a lost server would cost each sample a timeout and a warning,
and nothing would reach the journal), and it drops the last interval's sample when stopped, so a run shorter
than the interval records nothing. Here a thread of ours samples at the end of each interval and once more
as the run ends, and queues each sample with the epochs' metrics (`RunLogCalls.queue_metrics`): the run's one
background writer takes them all in one write at most every second, to the server while it answers, then to
the offline journal with the rest of the run.

The sampler never writes to the store itself. When it did, it was a second writer beside the background one:
the two took turns at the store's lock (SQLite's one writer), every sample held up by the writes queued ahead of
it, and `stop` joined a thread that could be in the middle of such a write, so the end of a run waited on the
store for as long as the store kept the sampler. Now a sample costs the sampler microseconds (psutil's counters),
`stop` waits for one sample at most, and the last one goes with the run's last write
(`tests/test_tracker.py::test_a_long_run_on_a_slow_store_ends_in_bounded_time`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# A calibration repeat trains for about 4.5 s and the default train stage for about 17 s: MLflow's default of
# 10 s would give a repeat no sample before its last. Each sample is one write of about ten values.
SAMPLING_INTERVAL_S = 2.0
# MLflow logs "Skip logging GPU metrics" (INFO) on every run without NVML, and a warning on every sample for
# each value a GPU does not report (power on some boards, utilisation on MIG slices): a GPU value NVML does not
# answer is simply not logged, and stage output stays clean.
MLFLOW_SYSTEM_METRICS_LOGGER = "mlflow.system_metrics"


class SystemMetrics:
    """Samples MLflow's system metrics on a daemon thread every `SAMPLING_INTERVAL_S`, and once more on `stop`."""

    def __init__(self, run_id: str, uri: str, record: Callable[[list[list[Any]]], None], resume: bool = False) -> None:
        """`record` queues each sample's values without waiting (the run's `queue_metrics`); `resume` goes on from
        the run's last step."""
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        logging.getLogger(MLFLOW_SYSTEM_METRICS_LOGGER).setLevel(logging.ERROR)
        self._monitor = SystemMetricsMonitor(
            run_id, sampling_interval=SAMPLING_INTERVAL_S, resume_logging=resume, tracking_uri=uri
        )
        self._monitor.mlflow_logger = _Queues(record)  # what `publish_metrics` records through
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="tracking-system-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take the last sample and wait for the thread to end (a sample reads psutil's counters: microseconds)."""
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        import psutil

        # Utilisation since this thread's previous call (an ended sampler's, if the ident is reused): start afresh,
        # so the first sample covers the run from here.
        psutil.cpu_percent()
        try:
            while not self._stop.wait(self._monitor.sampling_interval):
                self._publish()
            self._publish()
        except Exception as err:
            # Training goes on; the run keeps the samples written so far.
            log.warning("system metrics stopped for this run: %s: %s", type(err).__name__, err)

    def _publish(self) -> None:
        self._monitor.collect_metrics()
        self._monitor.publish_metrics(self._monitor.aggregate_metrics())


class _Queues:
    """Stands in for the monitor's `BatchMetricsLogger`: each sample is queued for the run's background writer."""

    def __init__(self, record: Callable[[list[list[Any]]], None]) -> None:
        self._record = record

    def record_metrics(self, metrics: dict[str, Any], step: int) -> None:
        now = int(time.time() * 1000)
        self._record([[key, float(value), now, step] for key, value in metrics.items()])
