"""Live I/O of a running batch subtask, from Spark's own progress (an I/O shell).

Flink's tasks count ``numRecordsIn/Out`` and ``numBytesIn/Out`` as they go; a flintlock batch
subtask is Spark work, so its counts while it runs are what Spark reports for the Spark jobs of
the attempt (all carry its tag, ``stream_task.spark_tag``):

- **Embedded server** (the TaskManager runs the Spark Connect server in its own process, the
  default): the SparkContext's status store (``AppStatusStore``, what Spark's UI shows). The jobs
  carrying the attempt's Connect job tag (``SparkStatusTracker.getJobIdsForTag`` on
  ``ExecuteSessionTag(user, session, tag)``), and of each of their stages the last attempt
  (``lastStageAttempt``; a retried stage counts once): ``inputRecords``/``inputBytes`` are what
  its file scans read (source splits and input partitions), ``outputRecords``/``outputBytes``
  what its file writes wrote (result partitions and sinks). Measured here, the store's counts
  move when Spark tasks end (running tasks' input metrics did not show, even with a 3 s executor
  heartbeat): a subtask whose Spark job is a few long Spark tasks shows 0 until they end.
- **Remote server** (``spark.remote``): Spark Connect's execution progress
  (``SparkSession.registerProgressHandler``), which carries the bytes read by finished Spark
  tasks only; records are known when the subtask finishes.

``SparkTaskProgress`` is the attempt's ``stats`` (what ``LiveMetricsReporter`` samples):
cumulative counts that never go down, refreshed by a daemon thread every
``metrics.task.report-interval``; a running batch subtask is busy all the time (Flink's
``busyTimeMsPerSecond`` 1000, no back pressure or idleness inside one Spark job).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from flintlock.runtime.spark.session import connect_job_tag, embedded_spark_context
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics

__all__ = ["SparkTaskProgress", "embedded_tagged_io"]

log = logging.getLogger(__name__)


def embedded_tagged_io(session: Any, tag: str) -> IOMetrics | None:
    """What the Spark jobs of ``session``'s operations tagged ``tag`` read and wrote so far
    (records, and bytes as Spark counts them), from this process's embedded server; None
    without one (or when Py4J fails: logged at debug)."""
    sc = embedded_spark_context()
    if sc is None:
        return None
    try:
        jsc = sc._jsc.sc()
        store = jsc.statusStore()
        stages: set[int] = set()
        for job_id in jsc.statusTracker().getJobIdsForTag(connect_job_tag(session, tag)):
            ids = store.job(int(job_id)).stageIds()
            stages.update(int(ids.apply(i)) for i in range(ids.length()))
        totals = [0, 0, 0, 0]  # IOMetrics' order: records in, out; bytes in, out
        for stage_id in stages:
            try:
                stage = store.lastStageAttempt(stage_id)
            except Exception:  # not submitted yet, or evicted (spark.ui.retainedStages)
                continue
            for i, value in enumerate((stage.inputRecords(), stage.outputRecords(),
                                       stage.inputBytes(), stage.outputBytes())):
                totals[i] += int(value)
        return IOMetrics(*totals)
    except Exception:
        log.debug("reading the Spark progress of tag %s failed", tag, exc_info=True)
        return None


class SparkTaskProgress:
    """One running batch attempt's live counters (the fields ``LiveMetricsReporter`` reads).

    Args:
        interval_s: how often the daemon thread reads Spark's progress (s).
        clock: monotonic seconds (tests pass a fake one).
    """

    back_pressured_ms = 0.0
    idle_ms = 0.0
    epochs = 0
    input_watermark = None
    output_watermark = None

    def __init__(self, interval_s: float = 1.0, clock: Any = time.monotonic) -> None:
        self.records_in = self.records_out = self.bytes_in = self.bytes_out = 0
        self._interval_s = max(0.05, interval_s)
        self._clock = clock
        self._started = clock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._remote_bytes: dict[str, int] = {}
        self._handler: Any = None
        self._session: Any = None

    @property
    def busy_ms(self) -> float:
        """Milliseconds since the attempt started running its Spark work."""
        return (self._clock() - self._started) * 1000.0

    def update(self, io: IOMetrics) -> None:
        """Take newer counts; none goes down (a stage evicted from Spark's store, or a
        report that raced a newer one, keeps the higher count)."""
        self.records_in = max(self.records_in, io.records_in)
        self.bytes_in = max(self.bytes_in, io.bytes_in)
        self.records_out = max(self.records_out, io.records_out)
        self.bytes_out = max(self.bytes_out, io.bytes_out)

    def start(self, session: Any, tag: str, name: str) -> None:
        """Follow the Spark work of ``session``'s operations tagged ``tag`` (embedded server:
        a daemon thread named ``name``; remote: a progress handler for this thread's
        operations)."""
        self._session = session
        if embedded_spark_context() is not None:
            self._thread = threading.Thread(target=self._poll, args=(session, tag),
                                             name=name, daemon=True)
            self._thread.start()
            return
        register = getattr(session, "registerProgressHandler", None)
        if register is None:
            return
        owner = threading.get_ident()

        def on_progress(stages: Any = None, operation_id: Any = None, **_: Any) -> None:
            if threading.get_ident() != owner or not stages:
                return  # another task's operation: handlers are per session
            self._remote_bytes[str(operation_id)] = sum(int(s.num_bytes_read) for s in stages)
            self.update(IOMetrics(bytes_in=sum(self._remote_bytes.values())))

        self._handler = on_progress
        try:
            register(on_progress)
        except Exception:
            log.debug("registerProgressHandler failed", exc_info=True)
            self._handler = None

    def stop(self) -> None:
        """Stop following (idempotent); the counts stay as last read."""
        self._stopped.set()
        if self._handler is not None:
            try:
                self._session.removeProgressHandler(self._handler)
            except Exception:
                log.debug("removeProgressHandler failed", exc_info=True)
            self._handler = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _poll(self, session: Any, tag: str) -> None:
        while not self._stopped.wait(self._interval_s):
            io = embedded_tagged_io(session, tag)
            if io is not None:
                self.update(io)
