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

    def report(self, operation_id: str, *bytes_read: int, tasks_left: int = 1,
               done: bool = False) -> None:
        stages = [SimpleNamespace(stage_id=i, num_tasks=2, num_completed_tasks=2 - tasks_left,
                                  num_bytes_read=b, done=tasks_left == 0)
                  for i, b in enumerate(bytes_read)]
        for handler in list(self.handlers):  # PySpark passes keywords
            handler(stages=stages, inflight_tasks=tasks_left, operation_id=operation_id,
                    done=done)


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


def test_a_remote_session_tells_whether_the_tasks_operation_runs_a_spark_stage(remote) -> None:
    """What a cancelled attempt waits for before it interrupts a remote server
    (``SparkStreamTask._remote_interrupt_due``)."""
    progress = SparkTaskProgress()
    assert progress.remote_stage_running is None  # nothing followed
    progress.start(remote, "flintlock-tag", "progress")
    assert progress.remote_stage_running is False  # planning: no stage reported yet
    remote.report("op-1", 100)
    assert progress.remote_stage_running is True
    other = threading.Thread(target=remote.report, args=("op-9", 1), kwargs={"tasks_left": 0})
    other.start()
    other.join()
    assert progress.remote_stage_running is True  # another task's operation changes nothing
    remote.report("op-1", 100, tasks_left=0)
    assert progress.remote_stage_running is False  # every stage's tasks are done
    remote.report("op-2", 5)
    remote.report("op-2", 5, done=True)
    assert progress.remote_stage_running is False  # the operation ended
    progress.stop()


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


def test_polls_read_sql_row_metrics_only_once_the_attempt_ran_past_a_heartbeat(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading SQL row metrics costs Py4J round trips per execution; a short attempt reads only
    the stage counts, a long one also the row metrics (after ``sql_rows_after_s``)."""
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: object())
    now = [100.0]
    polls: list[bool] = []
    seen = threading.Condition()

    def tagged_io(session: object, tag: str, sql: object = None) -> IOMetrics:
        with seen:
            polls.append(sql is not None)
            seen.notify_all()
        return IOMetrics(records_in=len(polls))

    def wait_for(count: int) -> None:
        with seen:
            assert seen.wait_for(lambda: len(polls) >= count, timeout=10.0), polls

    monkeypatch.setattr(spark_progress, "embedded_tagged_io", tagged_io)
    progress = SparkTaskProgress(interval_s=0.05, clock=lambda: now[0], sql_rows_after_s=3.0)
    progress.start(object(), "flintlock-tag", "progress")
    wait_for(2)
    now[0] += 3.0
    with seen:
        before = len(polls)
    wait_for(before + 2)
    progress.stop(final_read=False)
    assert polls[:2] == [False, False] and polls[-1] is True, polls
    assert progress.records_in >= 2


def test_sql_sum_metrics_parse_as_spark_formats_them() -> None:
    assert spark_progress.parse_sum_metric("2,834,432") == 2_834_432
    assert spark_progress.parse_sum_metric("7") == 7
    assert spark_progress.parse_sum_metric(None) == 0 and spark_progress.parse_sum_metric("") == 0
    assert spark_progress.parse_sum_metric("n/a") == 0


class _Scala:
    """Py4J stand-ins for the Scala collections and SQL status store objects SqlRowCounts reads."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


Graph = tuple[list[tuple[int, str, int | None]], list[tuple[int, int]]]


def _sql_store(executions: dict[int, list[int]], graphs: dict[int, Graph],
               values: dict[int, str], calls: list[str]) -> Any:
    """``graphs``: execution id -> (nodes as (id, name, output-rows accumulator), edges)."""
    def executions_list(start: int, length: int) -> list[Any]:
        calls.append("executionsList")
        return [_Scala(executionId=lambda e=e: e, jobs=lambda j=j: _Scala(keySet=lambda j=j: j))
                for e, j in list(executions.items())[start:start + length]]

    def node(node_id: int, name: str, acc: int | None) -> Any:
        metrics = [_Scala(name=lambda: "number of files read", accumulatorId=lambda: 999)]
        if acc is not None:
            metrics.append(_Scala(name=lambda: "number of output rows", accumulatorId=lambda: acc))
        return _Scala(id=lambda: node_id, name=lambda: name, metrics=lambda: metrics)

    def plan_graph(eid: int) -> Any:
        calls.append(f"planGraph {eid}")
        nodes, edges = graphs[eid]
        return _Scala(allNodes=lambda: [node(*n) for n in nodes],
                      edges=lambda: [_Scala(fromId=lambda f=f: f, toId=lambda t=t: t)
                                     for f, t in edges])

    return _Scala(executionsCount=lambda: len(executions), executionsList=executions_list,
                  planGraph=plan_graph, executionMetrics=lambda eid: values)


_JVM = _Scala(scala=_Scala(jdk=_Scala(javaapi=_Scala(
    CollectionConverters=_Scala(asJava=lambda x: x)))))
#: a file write of a Python function's output over a Parquet scan, as Spark 4 plans it
_WRITE: Graph = ([(0, "Execute InsertIntoHadoopFsRelationCommand", 10), (1, "WriteFiles", None),
                  (2, "MapInArrow", 11), (3, "WholeStageCodegen (1)", None),
                  (4, "ColumnarToRow", 12), (5, "Scan parquet ", 1)],
                 [(1, 0), (2, 1), (4, 2), (5, 4)])


def test_sql_row_counts_sum_the_jobs_executions_and_look_each_up_once() -> None:
    calls: list[str] = []
    values = {1: "1,000", 2: "250", 3: "99,999", 11: "700"}
    store = _sql_store({0: [0], 1: [1, 2], 2: [3]},
                       {1: _WRITE, 2: ([(0, "Scan csv ", 2), (1, "ArrowEvalPython", 3)],
                                       [(0, 1)])}, values, calls)
    sql = spark_progress.SqlRowCounts()
    # jobs 1 and 2 run execution 1, job 3 execution 2: the scans' rows, and the rows flowing
    # into the write (the Python node's, not the scan's under it, nor the uncommitted write's)
    assert sql.counts(store, _JVM, [1, 2, 3]) == (1250, 700)
    values[1], values[11] = "4,096", "2,048"
    assert sql.counts(store, _JVM, [1, 2, 3]) == (4346, 2048)
    assert calls.count("executionsList") == 1
    assert sql.counts(store, _JVM, [1]) == (4096, 2048)  # only the execution of the given jobs
    # a job of no SQL execution is searched for once
    assert sql.counts(store, _JVM, [1, 7]) == (4096, 2048)
    assert sql.counts(store, _JVM, [1, 7]) == (4096, 2048)
    assert calls.count("executionsList") == 2


def test_sql_row_counts_follow_a_re_planned_execution() -> None:
    """Adaptive query execution replaces an execution's plan graph, with new metrics."""
    calls: list[str] = []
    values = {1: "10", 11: "5", 21: "9"}
    graphs = {0: _WRITE}
    store = _sql_store({0: [0]}, graphs, values, calls)
    sql = spark_progress.SqlRowCounts()
    assert sql.counts(store, _JVM, [0]) == (10, 5)
    graphs[0] = ([(0, "Execute InsertIntoHadoopFsRelationCommand", 10), (1, "WriteFiles", None),
                  (6, "AdaptiveSparkPlan", None), (7, "HashAggregate", 21),
                  (8, "ShuffleQueryStage", None), (9, "Exchange", 22), (5, "Scan parquet ", 1)],
                 [(1, 0), (6, 1), (7, 6), (8, 7), (9, 8), (5, 9)])
    assert sql.counts(store, _JVM, [0]) == (10, 9)


def _nodes(*spec: tuple[int, str, int | None]) -> list[spark_progress.PlanNode]:
    return [spark_progress.PlanNode(*s) for s in spec]


def test_row_metric_ids_stop_at_nodes_that_change_the_row_count_unseen() -> None:
    # a union under the write: no single node counts what is written
    union = _nodes((0, "AppendData", None), (1, "Union", None), (2, "Scan parquet ", 5),
                   (3, "Scan csv ", 6))
    assert spark_progress.row_metric_ids(union, [(1, 0), (2, 1), (3, 1)]) == ([5, 6], [])
    # a collect (no write command) writes nothing the live count could see
    collect = _nodes((0, "HashAggregate", 7), (1, "Scan parquet ", 5))
    assert spark_progress.row_metric_ids(collect, [(1, 0)]) == ([5], [])
    # a V1 data source save counts its input's rows
    save = _nodes((0, "Execute SaveIntoDataSourceCommand", None), (1, "Project", None),
                  (2, "Filter", 8), (3, "Scan parquet ", 5))
    assert spark_progress.row_metric_ids(save, [(1, 0), (2, 1), (3, 2)]) == ([5], [8])
