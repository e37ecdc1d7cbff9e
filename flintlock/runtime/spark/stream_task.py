"""``SparkStreamTask``: the invokable that runs one subtask's operator chain on Spark.

Invokable class path: ``flintlock.runtime.spark.stream_task:SparkStreamTask``.

Needs from ``RuntimeEnvironment.services``: ``"spark"`` (a ``SparkSessionProvider``) and, when the
vertex produces partitions, ``"shuffle_dir"`` (str, local path or URI).

One attempt = Spark operations under one tag (derived from ``str(attempt_id)``; ``addTag`` is
thread-local in the Connect client, so only this thread's operations carry it). ``cancel()`` sets a
flag and, until ``invoke()`` returned, repeats ``interruptTag`` and cancels the tag's Spark jobs on
the embedded server (an interrupt swallowed during planning would leave the job running); on a
remote server, where only the interrupt reaches the job, it waits until the attempt's operation
reports a running Spark stage (``_remote_interrupt_due``). ``invoke()`` then raises
``TaskCancelledError``. While it runs, ``stats`` counts what its Spark
jobs read and wrote so far (``spark_progress``: live I/O for REST, the CLI and Prometheus). Each output is
one DataFrame plan ending in its partition write (Spark-written Parquet; or, when the subtask's
input is estimated below ``taskmanager.network.blocking.arrow-partition-threshold`` and its chain
cannot multiply rows, one collect whose Arrow batches the TaskManager writes as Arrow IPC files:
``arrow_partitions``); each sink one plan ending in its write. An
operator several of them share is persisted for the task when recomputing it would cost more than
reading a cached copy (``chain_translator.shared_nodes_to_cache``), then unpersisted.

Follows Flink ``runtime/tasks/StreamTask`` (invoke/cancel) and ``ResultPartitionWriter``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import cloudpickle

from flintlock.config import options
from flintlock.runtime.deployment import ChainedConsumer, ResultPartitionDeploymentDescriptor
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators.specs import (
    FlatMapSpec,
    JoinSpec,
    MapBatchesSpec,
    OperatorChain,
    OutputSpec,
)
from flintlock.runtime.shuffle.exceptions import PartitionNotFoundException
from flintlock.runtime.shuffle.layout import partition_uri, release_partitions
from flintlock.runtime.shuffle.pipelined import ARROW
from flintlock.runtime.spark.arrow_segments import write_arrow_segment
from flintlock.runtime.spark.chain_translator import (
    TranslatedChain,
    broadcast_head_join,
    operator_error,
    shared_nodes_to_cache,
    translate_chain,
)
from flintlock.runtime.spark.connector_io import write_sink
from flintlock.runtime.spark.consumer_chaining import chain_consumer
from flintlock.runtime.spark.epoch_sources import FILE_EXPANSION, estimated_bytes
from flintlock.runtime.spark.errors import (
    OperatorException,
    describe_spark_error,
    is_analysis_error,
)
from flintlock.runtime.spark.join_pushdown import (
    chain_join_to_output,
    duplicate_column_error,
    read_joined_probe,
)
from flintlock.runtime.spark.partitions import (
    GateRead,
    consumed_only,
    owner_of_missing_path,
    read_gate,
    subpartition_column_clash,
    write_partition,
)
from flintlock.runtime.spark.session import cancel_jobs_with_connect_tag
from flintlock.runtime.spark.spark_progress import SparkTaskProgress
from flintlock.runtime.spark.whole_job import translate_whole_job
from flintlock.runtime.taskmanager.invokable import RuntimeEnvironment, TaskCancelledError
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, TaskResult

__all__ = ["SparkStreamTask", "arrow_partitions", "estimated_input_bytes", "job_setting",
           "spark_tag"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def spark_tag(attempt_id: Any) -> str:
    """A Spark job tag for an attempt: letters, digits, ``_`` and ``-`` only."""
    return "flintlock-" + re.sub(r"[^A-Za-z0-9_-]", "_", str(attempt_id))


#: how often a cancelled task re-sends ``interruptTag`` while ``invoke`` still runs (seconds)
_INTERRUPT_INTERVAL_S = 0.25
#: a remote server's interrupt waits at most this long for a running Spark stage (seconds)
_REMOTE_INTERRUPT_GRACE_S = 10.0
#: give up re-sending after this long (Flink ``task.cancellation.timeout`` default 180 s)
_INTERRUPT_DEADLINE_S = 180.0


class _LiveStats(Protocol):
    """The live counters of a running task (``SparkTaskProgress``, or the streaming loop's
    ``StreamingTaskStats``); cancellation reads whether a remote Spark stage runs."""

    #: remote server: the attempt's operation last reported a Spark stage with tasks left
    #: (None: no progress is followed)
    remote_stage_running: bool | None


class SparkStreamTask:
    """Runs the ``OperatorChain`` in ``env.tdd.invokable_payload`` as Spark work.

    Args:
        env: the task's runtime environment (see the module docstring for the services).
    """

    def __init__(self, env: RuntimeEnvironment) -> None:
        self._env = env
        self._tdd = env.tdd
        self._tag = spark_tag(env.tdd.attempt_id)
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._spark: Any = None
        self._lock = threading.Lock()
        self._canceler: threading.Thread | None = None
        #: live counters while the Spark work runs (``Task.live_stats``; ``spark_progress``)
        self.stats: _LiveStats | None = None

    # ---- cancellation ------------------------------------------------------------------------

    def cancel(self) -> None:
        """Interrupt this attempt's Spark operations; ``invoke`` raises TaskCancelledError.

        A Spark action may start just after an interrupt (between a cancellation check and the
        action), so, like Flink's TaskCanceler/TaskInterrupter, a daemon thread repeats the
        interrupt every ``_INTERRUPT_INTERVAL_S`` until ``invoke`` returned, for at most
        ``_INTERRUPT_DEADLINE_S``.
        """
        self._cancelled.set()
        with self._lock:
            if self._canceler is not None or self._done.is_set():
                return
            self._canceler = threading.Thread(
                target=self._interrupt_until_done,
                name=f"Canceler-{self._tdd.attempt_id.short()}",
                daemon=True,
            )
            self._canceler.start()

    def _interrupt_until_done(self) -> None:
        started = time.monotonic()
        deadline = started + _INTERRUPT_DEADLINE_S
        reason = f"{self._tdd.task_name_with_subtask()} was cancelled"
        while not self._done.is_set() and time.monotonic() < deadline:
            with self._lock:
                spark = self._spark
            if spark is not None:
                # the server interrupts an operation only once; a swallowed interrupt leaves
                # its Spark job running, so on the embedded server cancel the tagged jobs too
                embedded = cancel_jobs_with_connect_tag(spark, self._tag, reason)
                if embedded or self._remote_interrupt_due(started):
                    try:
                        spark.interruptTag(self._tag)
                    except Exception:
                        log.debug("interruptTag(%s) failed", self._tag, exc_info=True)
            self._done.wait(_INTERRUPT_INTERVAL_S)

    def _remote_interrupt_due(self, cancelled_at: float) -> bool:
        """Whether to interrupt on a remote server (``spark.remote``) now.

        Nothing there cancels the tagged Spark jobs but the interrupt, and an interrupt that
        lands while the operation is still being planned is lost: its job then runs to the end.
        So the interrupt waits until the attempt's operation reports a Spark stage with tasks
        left (Connect's execution progress, every ``spark.connect.progress.reportInterval``,
        2 s by default), when it reaches the thread waiting for the job and Spark cancels the
        job; without progress reports, or after ``_REMOTE_INTERRUPT_GRACE_S``, at once.
        """
        stats = self.stats
        running = stats.remote_stage_running if stats is not None else None
        return (running is None or running
                or time.monotonic() - cancelled_at >= _REMOTE_INTERRUPT_GRACE_S)

    def _is_cancelled(self) -> bool:
        return self._cancelled.is_set() or self._env.cancelled.is_set()

    def _check_cancelled(self) -> None:
        if self._is_cancelled():
            raise TaskCancelledError(f"{self._tdd.task_name_with_subtask()} was cancelled")

    def _run(self, action: Callable[[], T]) -> T:
        """Run one Spark action under the task's tag, honouring cancellation before and after."""
        self._check_cancelled()
        result = action()
        self._check_cancelled()
        return result

    # ---- invoke --------------------------------------------------------------------------------

    def invoke(self) -> TaskResult:
        """Run the chain: read inputs, write every output partition and sink; report the result.

        Raises:
            TaskCancelledError: ``cancel()`` was called.
            OperatorException: an operator failed (message names operator, vertex and cause).
            PartitionNotFoundException: an input partition is gone.
        """
        try:
            return self._invoke()
        finally:
            self._done.set()

    def _tagged_session(self) -> Any:
        """The TaskManager's Spark session, remembered for ``cancel()``, with this attempt's tag."""
        spark = self._env.services["spark"].get()
        with self._lock:
            self._spark = spark
        self._check_cancelled()
        spark.addTag(self._tag)
        return spark

    def _untag(self, spark: Any) -> None:
        try:
            spark.removeTag(self._tag)
        except Exception:
            log.debug("removeTag failed", exc_info=True)

    def _task_error(self, chain: OperatorChain, tc: TranslatedChain | None,
                    exc: Exception) -> BaseException:
        """What ``invoke`` raises for ``exc``: a cancellation when cancelled, operator and
        partition errors as they are, anything else explained (``_explain``)."""
        if self._is_cancelled():
            error = TaskCancelledError(f"{self._tdd.task_name_with_subtask()} was cancelled")
            error.__cause__ = exc
            return error
        if isinstance(exc, (OperatorException, PartitionNotFoundException)):
            return exc
        pushed = self._tdd.pushed_join
        moved = duplicate_column_error(exc, pushed.consumer_name, self._tdd.vertex_name) \
            if pushed is not None else None
        return moved or self._explain(chain, tc, exc)

    def _invoke(self) -> TaskResult:
        self._check_cancelled()
        chain = self._load_chain()
        spark = self._tagged_session()
        written: list[str] = []
        translated: TranslatedChain | None = None
        progress = SparkTaskProgress(job_setting(self._tdd.job_configuration,
                                                 options.TASK_METRICS_REPORT_INTERVAL))
        progress.start(spark, self._tag, f"SparkProgress-{self._tdd.attempt_id.short()}")
        self.stats = progress
        finished = False
        try:
            started = time.perf_counter()
            if self._tdd.whole_job:
                chain, translated = translate_whole_job(
                    spark, chain, self._chained_vertices(), vertex_name=self._tdd.vertex_name,
                    source_splits=self._tdd.source_splits,
                    read_gate=lambda i: self._read_gate(spark, i))
            else:
                translated = translate_chain(
                    spark, chain, vertex_name=self._tdd.vertex_name,
                    source_splits=self._tdd.source_splits,
                    read_gate=lambda i: self._read_gate(spark, i))
            log.debug("%s: translated in %.0f ms", self._tdd.task_name_with_subtask(),
                      (time.perf_counter() - started) * 1e3)
            result = self._execute(chain, translated, written)
            finished = True  # its exact counts are in the result: no last read of Spark's
            return result
        except TaskCancelledError:
            release_partitions(written)
            raise
        except Exception as exc:
            release_partitions(written)
            error = self._task_error(chain, translated, exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            progress.stop(final_read=not finished)
            self._untag(spark)

    def _load_chain(self) -> OperatorChain:
        try:
            chain = cloudpickle.loads(self._tdd.invokable_payload)
        except Exception as exc:
            raise OperatorException(
                f"vertex '{self._tdd.vertex_name}': cannot unpickle its operator chain: "
                f"{type(exc).__name__}: {exc}", non_recoverable=True,
            ) from exc
        if not isinstance(chain, OperatorChain):
            raise OperatorException(
                f"vertex '{self._tdd.vertex_name}': invokable payload is a "
                f"{type(chain).__name__}, not an OperatorChain", non_recoverable=True,
            )
        if self._tdd.broadcast_join_side:
            chain = broadcast_head_join(chain, self._tdd.broadcast_join_side, self._tdd.vertex_name)
        if self._tdd.pushed_probe_side:
            chain = read_joined_probe(chain, self._tdd.pushed_probe_side, self._tdd.vertex_name)
        pushed = self._tdd.pushed_join
        if pushed is not None:
            try:
                join_chain = cloudpickle.loads(pushed.consumer_payload)
            except Exception as exc:
                raise OperatorException(
                    f"vertex '{self._tdd.vertex_name}': cannot unpickle the operator chain of "
                    f"'{pushed.consumer_name}', whose join it runs: {type(exc).__name__}: {exc}",
                    non_recoverable=True) from exc
            chain = chain_join_to_output(chain, pushed.output_dataset, join_chain,
                                         pushed.probe_side, pushed.build_gate,
                                         self._tdd.vertex_name, pushed.reduce_only)
        if self._tdd.whole_job:  # translate_whole_job runs them
            return chain
        for consumer, consumer_chain in self._chained_vertices():
            assert consumer.input_dataset is not None
            chain = chain_consumer(chain, consumer.input_dataset, consumer_chain,
                                   consumer.consumer_name, self._tdd.vertex_name)
        return chain

    def _chained_vertices(self) -> list[tuple[ChainedConsumer, OperatorChain]]:
        """The vertices chained into this task at run time, with their operator chains."""
        chained = []
        for consumer in self._tdd.chained_consumers:
            try:
                consumer_chain = cloudpickle.loads(consumer.consumer_payload)
            except Exception as exc:
                raise OperatorException(
                    f"vertex '{self._tdd.vertex_name}': cannot unpickle the operator chain of "
                    f"'{consumer.consumer_name}', chained to it at run time: "
                    f"{type(exc).__name__}: {exc}", non_recoverable=True) from exc
            chained.append((consumer, consumer_chain))
        return chained

    def _read_gate(self, spark: Any, index: int) -> GateRead:
        gates = self._tdd.input_gates
        if index >= len(gates):
            raise OperatorException(
                f"vertex '{self._tdd.vertex_name}' reads input gate {index} but was deployed "
                f"with {len(gates)} gates", non_recoverable=True,
            )
        return read_gate(spark, gates[index])

    def _partition_for(self, index: int, output: OutputSpec) -> ResultPartitionDeploymentDescriptor:
        for rpdd in self._tdd.produced_partitions:
            if rpdd.partition_id.dataset_id == output.dataset_id:
                return rpdd
        return self._tdd.produced_partitions[index]

    def _execute(self, chain: OperatorChain, tc: TranslatedChain, written: list[str]) -> TaskResult:
        actions = [n for _, n in tc.outputs] + [n for _, n, _ in tc.sinks]
        cached = [tc.frames[i].persist() for i in shared_nodes_to_cache(chain, actions)]
        try:
            return self._execute_actions(chain, tc, written)
        finally:
            for df in cached:
                try:
                    df.unpersist()
                except Exception:
                    log.debug("unpersist failed", exc_info=True)

    def _execute_actions(self, chain: OperatorChain, tc: TranslatedChain,
                         written: list[str]) -> TaskResult:
        tdd = self._tdd
        locations = []
        records_out = bytes_out = 0
        arrow = bool(tc.outputs) and arrow_partitions(
            chain, tdd, job_setting(tdd.job_configuration, options.ARROW_PARTITION_THRESHOLD))
        for out_index, node_index in sorted(tc.outputs):
            output = chain.outputs[out_index]
            rpdd = self._partition_for(out_index, output)
            shuffle_dir = self._env.services.get("shuffle_dir")
            if not shuffle_dir:
                raise OperatorException(
                    f"vertex '{tdd.vertex_name}' produces partitions but the TaskManager has "
                    f"no 'shuffle_dir' service", non_recoverable=True,
                )
            uri = partition_uri(str(shuffle_dir), tdd.job_id, rpdd.partition_id, tdd.attempt_id)
            written.append(uri)
            started = time.perf_counter()
            df = self._run(functools.partial(consumed_only, tc.frames[node_index], output.columns))
            try:
                write = write_arrow_segment if arrow else write_partition
                loc = self._run(functools.partial(write, df, rpdd, output, uri, tdd.attempt_id))
            except Exception as exc:
                if not subpartition_column_clash(exc):
                    raise
                loc = self._run(functools.partial(write_partition, df, rpdd, output, uri,
                                                  tdd.attempt_id, shadow_sp=True))
            log.debug("%s: wrote output %d (%s, %s) in %.0f ms", tdd.task_name_with_subtask(),
                      out_index, output.ship_strategy.name, loc.format,
                      (time.perf_counter() - started) * 1e3)
            locations.append(loc)
            records_out += sum(loc.rows_per_subpartition)
            bytes_out += sum(loc.bytes_per_subpartition)
        committables: dict[int, object] = {}
        accumulators: dict[str, bytes] = {}
        for sink_index, node_index, sink in tc.sinks:
            started = time.perf_counter()
            committable, acc, rows = write_sink(
                tc.frames[node_index], sink, job_id=str(tdd.job_id), attempt=self._tag,
                subtask_index=tdd.subtask_index, parallelism=tdd.number_of_subtasks,
                print_fn=self._env.print_fn, run=self._run,
            )
            log.debug("%s: wrote sink %d in %.0f ms", tdd.task_name_with_subtask(), sink_index,
                      (time.perf_counter() - started) * 1e3)
            if committable is not None:
                committables[sink_index] = committable
            accumulators.update(acc)
            records_out += rows
        self._check_cancelled()
        return TaskResult(
            partitions=tuple(locations),
            committables=committables,
            accumulators=accumulators,
            metrics=IOMetrics(records_in=tc.records_in, records_out=records_out,
                              bytes_in=tc.bytes_in, bytes_out=bytes_out),
        )

    # ---- failures --------------------------------------------------------------------------------

    def _explain(self, chain: OperatorChain, tc: TranslatedChain | None, exc: BaseException) -> BaseException:
        """Name the operator that caused a Spark failure (re-analysing node by node)."""
        text = str(exc)
        # a missing or unreadable (e.g. truncated) input partition file: PartitionNotFound
        if any(m in text for m in ("PATH_NOT_FOUND", "FileNotFoundException", "FAILED_READ_FILE")):
            for gate in self._tdd.input_gates:
                loc = owner_of_missing_path(gate, text)
                if loc is not None:
                    return PartitionNotFoundException(str(loc.partition_id), loc.uri)
        vertex = self._tdd.vertex_name
        if tc is not None and is_analysis_error(exc):
            for node, df in zip(chain.nodes, tc.frames, strict=False):
                try:
                    df.schema  # noqa: B018 - forces analysis of this node's plan
                except Exception as node_exc:
                    return operator_error(vertex, node, node_exc)
        for node in chain.nodes:
            fn = getattr(node.spec, "fn", None)
            if fn is not None and fn.name and fn.name in text:
                return operator_error(vertex, node, exc)
        if not _is_spark_error(exc):
            return exc
        return OperatorException(
            f"vertex '{vertex}': {describe_spark_error(exc)}",
            non_recoverable=is_analysis_error(exc), error_class=type(exc).__name__,
        )


def estimated_input_bytes(tdd: Any) -> int | None:
    """The in-memory bytes a batch subtask is expected to read: its source splits
    (``epoch_sources.estimated_bytes``) and its gates' subpartitions (Parquet bytes x
    ``FILE_EXPANSION``, Arrow bytes as they are); None when a split's size is unknown."""
    total = estimated_bytes(tuple(tdd.source_splits)) if tdd.source_splits else 0
    if total is None:
        return None
    for gate in tdd.input_gates:
        start, end = gate.subpartition_start, gate.subpartition_end
        if gate.ship_strategy == ShipStrategy.BROADCAST:
            start, end = 0, 0
        for loc in gate.partitions:
            stored = sum(loc.bytes_per_subpartition[start:end + 1])
            total += stored * (1 if loc.format == ARROW else FILE_EXPANSION)
    return total


#: operators whose output may be far larger than their input: their subtasks never collect
_EXPANDING = (FlatMapSpec, MapBatchesSpec)


def arrow_partitions(chain: OperatorChain, tdd: Any, threshold: int) -> bool:
    """Whether this subtask writes its result partitions as Arrow IPC files through the
    TaskManager (``arrow_segments``): its input is known to be below ``threshold`` bytes
    (``taskmanager.network.blocking.arrow-partition-threshold``) and no operator of its chain can
    multiply rows (a cross join, a flat map, a map over batches). Measured per hop for small data
    (``arrow_segments``' docstring): ~50-125 ms instead of ~270 ms for a Spark write, listing and
    read."""
    if threshold <= 0:
        return False
    for node in chain.nodes:
        spec = node.spec
        if isinstance(spec, _EXPANDING) or (isinstance(spec, JoinSpec) and spec.how == "cross"):
            return False
    size = estimated_input_bytes(tdd)
    return size is not None and size < threshold


def job_setting(job_configuration: Mapping[str, str], option: Any) -> Any:
    """A job setting parsed by its option (the default when absent)."""
    raw = job_configuration.get(option.key)
    return option.default if raw is None else option.parse(raw)


def _is_spark_error(exc: BaseException) -> bool:
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, PySparkException)
