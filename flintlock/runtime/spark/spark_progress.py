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
  what its file writes wrote (result partitions and sinks). These move when Spark tasks end;
  records read and written also come from the running SQL executions' row metrics
  (``SqlRowCounts``: the file scans' output rows, and the rows flowing into write commands),
  which executor heartbeats update (``spark.executor.heartbeatInterval``, 3 s in the embedded
  server), so a subtask whose Spark job is one long Spark task shows its reads and writes grow.
  Bytes stay at Spark task ends.
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
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from flintlock.runtime.spark.session import (
    connect_job_tag,
    embedded_spark_context,
    embedded_sql_status_store,
)
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics

__all__ = [
    "PlanNode",
    "SparkTaskProgress",
    "SqlRowCounts",
    "embedded_tagged_io",
    "parse_sum_metric",
    "row_metric_ids",
]

log = logging.getLogger(__name__)


#: the plan-graph names of Spark's file and data-source write commands (the root of a write's SQL
#: execution: ``Execute InsertIntoHadoopFsRelationCommand``, V2 ``AppendData``, ...)
_WRITE_COMMANDS = re.compile(
    r"InsertInto|SaveIntoDataSource|AppendData|OverwriteByExpression|OverwritePartitionsDynamic"
    r"|WriteToDataSourceV2")
_OUTPUT_ROWS = "number of output rows"


@dataclass(frozen=True)
class PlanNode:
    """One node of a SQL execution's plan graph (``SparkPlanGraphNode``): its id, name and the
    accumulator id of its ``number of output rows`` metric (None: the node has no such metric)."""

    id: int
    name: str
    output_rows: int | None


def row_metric_ids(nodes: list[PlanNode], edges: list[tuple[int, int]]
                   ) -> tuple[list[int], list[int]]:
    """(read, written): the accumulator ids of the rows a SQL execution's file scans read
    (``Scan <format>`` nodes) and of the rows that flow into its write commands (pure).

    A write command counts its rows only when the write commits; the rows flowing into it are
    counted by the nearest node below it that has a ``number of output rows`` metric, reached
    through nodes that keep the row count and have no such metric (``WriteFiles``, projections,
    ``AdaptiveSparkPlan``, ``ColumnarToRow`` adapters without it). A node with several inputs
    (a union, a join) before one with the metric means no live count for that write.

    Args:
        nodes: the plan graph's nodes.
        edges: ``(from, to)`` node ids, data flowing from ``from`` (the child) to ``to``.
    """
    by_id = {n.id: n for n in nodes}
    children: dict[int, list[int]] = {}
    for child_id, parent_id in edges:
        children.setdefault(parent_id, []).append(child_id)
    read = [n.output_rows for n in nodes if n.name.startswith("Scan ") and n.output_rows is not None]
    written: list[int] = []
    for node in nodes:
        if not _WRITE_COMMANDS.search(node.name):
            continue
        below = children.get(node.id, [])
        while len(below) == 1 and below[0] in by_id:
            child = by_id[below[0]]
            if child.output_rows is not None:
                written.append(child.output_rows)
                break
            below = children.get(child.id, [])
    return read, written


class SqlRowCounts:
    """Rows the tagged jobs' SQL executions have read (file scans) and written (rows into write
    commands) so far; the Py4J reads plus a cache, one per attempt.

    The metrics come from ``SQLAppStatusStore.executionMetrics``: while an execution runs, Spark
    aggregates there what executor heartbeats carried, by accumulator id. (The stage counts of
    the status store do not move with heartbeats in local mode: the heartbeat's accumulators
    reach the driver unserialized, without the names ``AppStatusListener`` keys task metrics by;
    they move when Spark tasks end.) Which metrics count is ``row_metric_ids``. A job's
    execution is looked up once (a job without an execution, which Spark registers before its
    jobs start, is not searched again); an execution's metric ids are looked up again when its
    plan graph changes size (adaptive query execution re-plans, with new metrics).
    """

    #: how many of the newest SQL executions are searched for a new job's execution
    RECENT_EXECUTIONS = 32

    def __init__(self) -> None:
        #: the embedded server's ``SQLAppStatusStore`` (Py4J), looked up at the first read
        self.sql_store: Any = None
        self._execution_of_job: dict[int, int | None] = {}
        #: execution id -> (plan graph node count, read ids, written ids)
        self._metric_ids: dict[int, tuple[int, list[int], list[int]]] = {}

    def counts(self, sql_store: Any, jvm: Any, job_ids: list[int]) -> tuple[int, int]:
        """(rows read, rows written) over the executions of ``job_ids`` (Py4J errors
        propagate)."""
        convert = jvm.scala.jdk.javaapi.CollectionConverters
        if any(j not in self._execution_of_job for j in job_ids):
            count = int(sql_store.executionsCount())
            start = max(0, count - self.RECENT_EXECUTIONS)
            for execution in convert.asJava(sql_store.executionsList(start, count - start)):
                for job in convert.asJava(execution.jobs().keySet()):
                    self._execution_of_job[int(job)] = int(execution.executionId())
            for job in job_ids:
                self._execution_of_job.setdefault(job, None)
        read = written = 0
        executions = {self._execution_of_job[j] for j in job_ids}
        for eid in (e for e in executions if e is not None):
            read_ids, written_ids = self._ids(sql_store, convert, eid)
            if not read_ids and not written_ids:
                continue
            values = convert.asJava(sql_store.executionMetrics(eid))
            read += sum(parse_sum_metric(values.get(i)) for i in read_ids)
            written += sum(parse_sum_metric(values.get(i)) for i in written_ids)
        return read, written

    def _ids(self, sql_store: Any, convert: Any, eid: int) -> tuple[list[int], list[int]]:
        graph = sql_store.planGraph(eid)
        all_nodes = convert.asJava(graph.allNodes())
        size = len(all_nodes)
        cached = self._metric_ids.get(eid)
        if cached is None or cached[0] != size:
            nodes = [PlanNode(int(n.id()), str(n.name()), next(
                (int(m.accumulatorId()) for m in convert.asJava(n.metrics())
                 if m.name() == _OUTPUT_ROWS), None)) for n in all_nodes]
            edges = [(int(e.fromId()), int(e.toId())) for e in convert.asJava(graph.edges())]
            cached = (size, *row_metric_ids(nodes, edges))
            self._metric_ids[eid] = cached
        return cached[1], cached[2]


def parse_sum_metric(text: str | None) -> int:
    """A SQL sum metric as Spark formats it (``"2,834,432"``, US grouping); 0 when absent."""
    if not text:
        return 0
    try:
        return int(str(text).split("\n")[0].replace(",", "").strip())
    except ValueError:
        return 0


def _sql_rows(sql: SqlRowCounts, jvm: Any, job_ids: list[int]) -> tuple[int, int]:
    try:
        if sql.sql_store is None:
            sql.sql_store = embedded_sql_status_store()
        return (0, 0) if sql.sql_store is None else sql.counts(sql.sql_store, jvm, job_ids)
    except Exception:  # the stage counts still stand
        log.debug("reading the SQL row metrics of jobs %s failed", job_ids, exc_info=True)
        return 0, 0


def embedded_tagged_io(session: Any, tag: str, sql: SqlRowCounts | None = None
                       ) -> IOMetrics | None:
    """What the Spark jobs of ``session``'s operations tagged ``tag`` read and wrote so far
    (records, and bytes as Spark counts them), from this process's embedded server; None
    without one (or when Py4J fails: logged at debug). With ``sql``, records read and written
    are also taken from the running SQL executions' row metrics (``SqlRowCounts``), whichever
    is higher."""
    sc = embedded_spark_context()
    if sc is None:
        return None
    try:
        jsc = sc._jsc.sc()
        store = jsc.statusStore()
        stages: set[int] = set()
        job_ids = [int(j) for j in jsc.statusTracker().getJobIdsForTag(
            connect_job_tag(session, tag))]
        for job_id in job_ids:
            ids = store.job(job_id).stageIds()
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
        if sql is not None and job_ids:
            read, written = _sql_rows(sql, sc._jvm, job_ids)
            totals[0], totals[1] = max(totals[0], read), max(totals[1], written)
        return IOMetrics(*totals)
    except Exception:
        log.debug("reading the Spark progress of tag %s failed", tag, exc_info=True)
        return None


class SparkTaskProgress:
    """One running batch attempt's live counters (the fields ``LiveMetricsReporter`` reads).

    Args:
        interval_s: how often the daemon thread reads Spark's progress (s).
        clock: monotonic seconds (tests pass a fake one).
        sql_rows_after_s: how long the attempt runs before its polls also read the SQL
            executions' row metrics (s). Reading them costs 0.2-0.8 s of Py4J round trips per
            new SQL execution on a busy 2-core machine (the plan graph, node by node), which
            stretched 1-2 s subtasks by up to a second; they only add to the stage counts once
            an executor heartbeat (``spark.executor.heartbeatInterval``, 3 s) reported a running
            Spark task's rows, so subtasks shorter than that never read them.
    """

    #: the default of ``sql_rows_after_s`` (s): the embedded server's executor heartbeat interval
    SQL_ROWS_AFTER_S = 3.0

    back_pressured_ms = 0.0
    idle_ms = 0.0
    epochs = 0
    input_watermark = None
    output_watermark = None

    def __init__(self, interval_s: float = 1.0, clock: Any = time.monotonic,
                 sql_rows_after_s: float = SQL_ROWS_AFTER_S) -> None:
        self.records_in = self.records_out = self.bytes_in = self.bytes_out = 0
        self._interval_s = max(0.05, interval_s)
        self._clock = clock
        self._started = clock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._remote_bytes: dict[str, int] = {}
        self._handler: Any = None
        self._session: Any = None
        self._tag = ""
        self._sql = SqlRowCounts()
        self._sql_rows_after_s = sql_rows_after_s
        #: remote server: whether the attempt's operation last reported a Spark stage with
        #: tasks left (None: no progress is followed, e.g. the embedded server)
        self.remote_stage_running: bool | None = None

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
        self._session, self._tag = session, tag
        if embedded_spark_context() is not None:
            self._thread = threading.Thread(target=self._poll, args=(session, tag),
                                             name=name, daemon=True)
            self._thread.start()
            return
        register = getattr(session, "registerProgressHandler", None)
        if register is None:
            return
        owner = threading.get_ident()

        def on_progress(stages: Any = None, operation_id: Any = None, done: bool = False,
                        **_: Any) -> None:
            if threading.get_ident() != owner:
                return  # another task's operation: handlers are per session
            self.remote_stage_running = not done and any(
                not s.done and s.num_completed_tasks < s.num_tasks for s in stages or ())
            if stages:
                self._remote_bytes[str(operation_id)] = sum(int(s.num_bytes_read) for s in stages)
                self.update(IOMetrics(bytes_in=sum(self._remote_bytes.values())))

        self._handler = on_progress
        try:
            register(on_progress)
            self.remote_stage_running = False
        except Exception:
            log.debug("registerProgressHandler failed", exc_info=True)
            self._handler = None

    def stop(self, final_read: bool = True) -> None:
        """Stop following (idempotent); with ``final_read``, after a last read of the embedded
        server's counts: a cancelled or failed attempt reports what its Spark jobs did until
        then (a finished one has exact counts in its result)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._handler is not None:
            try:
                self._session.removeProgressHandler(self._handler)
            except Exception:
                log.debug("removeProgressHandler failed", exc_info=True)
            self._handler = None
        # a finished attempt does not wait for a poll in flight: its result has the exact counts
        thread = self._thread
        if final_read and thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
            io = embedded_tagged_io(self._session, self._tag, self._sql)
            if io is not None:
                self.update(io)

    def _poll(self, session: Any, tag: str) -> None:
        while not self._stopped.wait(self._interval_s):
            sql = self._sql if self.busy_ms >= self._sql_rows_after_s * 1000.0 else None
            io = embedded_tagged_io(session, tag, sql)
            if io is not None and not self._stopped.is_set():
                self.update(io)
