"""``SparkTaskProgress``: a batch attempt's live counters (no Spark started; the embedded-server
path runs in tests/e2e/test_live_metrics.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from flintlock.runtime.spark import spark_progress
from flintlock.runtime.spark.spark_progress import SparkTaskProgress
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics


class _RemoteSession:
    """What the progress code uses of a Spark Connect session to a remote server."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def registerProgressHandler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def removeProgressHandler(self, handler: Any) -> None:
        self.handlers.remove(handler)

    def report(self, operation_id: str, *bytes_read: int) -> None:
        stages = [SimpleNamespace(num_bytes_read=b) for b in bytes_read]
        for handler in list(self.handlers):  # PySpark passes keywords
            handler(stages=stages, inflight_tasks=1, operation_id=operation_id, done=False)


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> _RemoteSession:
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: None)
    return _RemoteSession()


def test_counts_never_go_down() -> None:
    progress = SparkTaskProgress()
    progress.update(IOMetrics(records_in=10, bytes_in=100, records_out=5, bytes_out=50))
    progress.update(IOMetrics(records_in=7, bytes_in=120, records_out=0, bytes_out=60))
    assert (progress.records_in, progress.bytes_in, progress.records_out, progress.bytes_out) == (
        10, 120, 5, 60)


def test_busy_time_is_the_time_since_start_and_nothing_else_is_counted() -> None:
    now = [100.0]
    progress = SparkTaskProgress(clock=lambda: now[0])
    now[0] = 102.5
    assert progress.busy_ms == 2500.0
    assert (progress.back_pressured_ms, progress.idle_ms, progress.epochs) == (0.0, 0.0, 0)
    assert progress.input_watermark is None and progress.output_watermark is None


def test_a_remote_session_counts_bytes_read_of_the_tasks_own_operations(remote) -> None:
    progress = SparkTaskProgress()
    progress.start(remote, "flintlock-tag", "progress")
    remote.report("op-1", 100, 50)
    remote.report("op-1", 300, 50)  # the same operation, later: replaces its figure
    remote.report("op-2", 25)
    assert progress.bytes_in == 375 and progress.records_in == 0
    # another task's operation (another thread) is not counted
    other = threading.Thread(target=remote.report, args=("op-3", 10_000))
    other.start()
    other.join()
    assert progress.bytes_in == 375
    progress.stop()
    assert remote.handlers == []
    progress.stop()  # idempotent


def test_no_handler_api_means_no_live_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: None)
    progress = SparkTaskProgress()
    progress.start(object(), "tag", "progress")  # e.g. a classic session
    progress.stop()
    assert progress.bytes_in == 0


def test_without_an_embedded_server_there_is_nothing_to_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: None)
    assert spark_progress.embedded_tagged_io(object(), "tag") is None


def test_stop_reads_the_embedded_servers_counts_once_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancelled attempt reports what its Spark jobs did up to the cancel, not the last poll."""
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: object())
    reads: list[tuple[object, str]] = []
    counts = [IOMetrics(records_in=100, bytes_in=800)]

    def tagged_io(session: object, tag: str, scans: object = None) -> IOMetrics:
        reads.append((session, tag))
        return counts[0]

    monkeypatch.setattr(spark_progress, "embedded_tagged_io", tagged_io)
    progress = SparkTaskProgress(interval_s=3600.0)  # the poll thread never reads on its own
    session = object()
    progress.start(session, "flintlock-tag", "progress")
    counts[0] = IOMetrics(records_in=2500, bytes_in=20_000, records_out=40, bytes_out=900)
    progress.stop()
    assert reads == [(session, "flintlock-tag")]
    assert (progress.records_in, progress.bytes_in, progress.records_out, progress.bytes_out) == (
        2500, 20_000, 40, 900)
    progress.stop()  # idempotent: no second read
    assert len(reads) == 1
    finished = SparkTaskProgress(interval_s=3600.0)
    finished.start(session, "flintlock-tag-2", "progress")
    finished.stop(final_read=False)  # a finished attempt: its result has the exact counts
    assert len(reads) == 1 and finished.records_in == 0


def test_sql_sum_metrics_parse_as_spark_formats_them() -> None:
    assert spark_progress.parse_sum_metric("2,834,432") == 2_834_432
    assert spark_progress.parse_sum_metric("7") == 7
    assert spark_progress.parse_sum_metric(None) == 0 and spark_progress.parse_sum_metric("") == 0
    assert spark_progress.parse_sum_metric("n/a") == 0


class _Scala:
    """Py4J stand-ins for the Scala collections and SQL status store objects SqlScanRows reads."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _sql_store(executions: dict[int, list[int]], nodes: dict[int, list[tuple[str, int]]],
               values: dict[int, str], calls: list[str]) -> Any:
    def executions_list(start: int, length: int) -> list[Any]:
        calls.append("executionsList")
        return [_Scala(executionId=lambda e=e: e, jobs=lambda j=j: _Scala(keySet=lambda j=j: j))
                for e, j in list(executions.items())[start:start + length]]

    def plan_graph(eid: int) -> Any:
        calls.append(f"planGraph {eid}")
        return _Scala(allNodes=lambda: [
            _Scala(name=lambda n=name: n, metrics=lambda a=acc: [
                _Scala(name=lambda: "number of output rows", accumulatorId=lambda a=a: a),
                _Scala(name=lambda: "number of files read", accumulatorId=lambda a=a: a + 1000)])
            for name, acc in nodes[eid]])

    return _Scala(executionsCount=lambda: len(executions), executionsList=executions_list,
                  planGraph=plan_graph, executionMetrics=lambda eid: values)


def test_sql_scan_rows_sum_the_scans_of_the_jobs_executions_and_look_them_up_once() -> None:
    jvm = _Scala(scala=_Scala(jdk=_Scala(javaapi=_Scala(
        CollectionConverters=_Scala(asJava=lambda x: x)))))
    calls: list[str] = []
    values = {1: "1,000", 2: "250", 3: "99,999"}
    store = _sql_store({0: [0], 1: [1, 2], 2: [3]},
                       {1: [("Scan parquet ", 1), ("ArrowEvalPython", 3)],
                        2: [("Scan csv ", 2)]}, values, calls)
    scans = spark_progress.SqlScanRows()
    # jobs 1 and 2 run execution 1, job 3 execution 2: both scans, not the Python node's rows
    assert scans.rows(store, jvm, [1, 2, 3]) == 1250
    values[1] = "4,096"
    assert scans.rows(store, jvm, [1, 2, 3]) == 4346
    assert calls == ["executionsList", "planGraph 1", "planGraph 2"]
    assert scans.rows(store, jvm, [1]) == 4096  # only the execution of the given jobs
    # a job of no SQL execution is searched for once
    assert scans.rows(store, jvm, [1, 7]) == 4096
    assert scans.rows(store, jvm, [1, 7]) == 4096
    assert calls.count("executionsList") == 2
