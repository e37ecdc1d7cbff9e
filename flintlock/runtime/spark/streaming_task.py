"""``SparkStreamingTask``: a STREAMING subtask, its operator chain run on Spark once per epoch.

Invokable class path: ``flintlock.runtime.spark.streaming_task:SparkStreamingTask`` (set by the
JobGraph generator for STREAMING jobs). Services as ``SparkStreamTask`` (``"spark"``); partitions
are PIPELINED (``flintlock.runtime.shuffle.pipelined``) in the directories the JobMaster named.

The loop (ARCHITECTURE section 4b, "a streaming subtask = a loop of epochs"):

1. Wait for credit: no output partition may be more than ``max_backlog`` segments ahead of its
   slowest consumer (back pressure; the time spent here is ``backPressuredTimeMsPerSecond``).
2. Take the epoch's input: a source head asks its ``EpochSource`` for splits (generated ranges,
   new files); any other head polls its input gates for newly committed segments (at most
   ``max_backlog`` per channel).
3. With input, translate the chain over it (``translate_chain``) and write each output into the
   next segment of its partition, then commit the segment. An epoch whose input is estimated
   below ``taskmanager.network.pipelined.arrow-segment-threshold`` collects each output with one
   Spark job and writes Arrow IPC files (``arrow_segments``); a larger one (or one of unknown
   size: a bounded source's splits) runs a Spark Parquet write (``partitions.write_partition``).
   Consumers read either format. A collect sink (``execute_and_collect``) writes each epoch's
   rows as the next Arrow segment of its own PIPELINED partition, read by the JobManager's
   collect coordinator (``dispatcher.collect_coordinator``) while the job runs; its credits
   back-pressure the job when the client does not read. Other sinks append (FileSink
   part files stay in the attempt's temporary transaction directories until the JobMaster
   publishes them, when a checkpoint that pre-committed them completes or when the job
   finishes; print sinks print at once). A Parquet FileSink reading one gate directly copies
   an epoch's Parquet segment files as its part files (``segment_sink``: no Spark job); a
   FileSink's epoch without rows leaves no part file (Spark writes one of no rows).
4. Acknowledge the consumed input segments (after the output was committed).
5. Checkpoints (``task_checkpoints``): a source the JobMaster triggered, or a subtask whose
   input channels all delivered barrier n, snapshots its source offset, operator state and sink
   transactions, commits barrier n into every output partition and acknowledges. A restored
   attempt (``tdd.task_restore``) starts from such a snapshot.
6. When every input ended (sources exhausted, every channel's end-of-partition seen), commit the
   end-of-partition records and finish; with nothing to do, wait (idle time) and go on.

``cancel()`` works as for ``SparkStreamTask``: it interrupts the running Spark action and ends any
wait at once. ``max_backlog`` = ``taskmanager.network.memory.buffers-per-channel`` +
``taskmanager.network.memory.floating-buffers-per-gate`` (a segment stands for a network buffer;
Flink's defaults 2 + 8); beyond the first ``buffers-per-channel`` segments, a producer commits
another only while its consumers have less than ``max_backlog`` x ``taskmanager.memory.
segment-size`` (320 KiB by default) of it unconsumed, so the data in flight stays near what
Flink's buffers hold (``credit_bounds``).
"""

from __future__ import annotations

import functools
import io
import logging
import time
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from flintlock.config import options
from flintlock.connectors.file import FileSink
from flintlock.connectors.sinks import CollectSink
from flintlock.runtime.checkpoint.snapshots import TaskStateSnapshot
from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.operators.specs import OperatorChain, SinkSpec, SourceSpec
from flintlock.runtime.shuffle.pipelined import (
    ARROW,
    MAX_WATERMARK,
    PARQUET,
    PipelinedPartitionReader,
    PipelinedPartitionWriter,
    ReadableSegment,
    collect_partition_uri,
    combined_watermark,
)
from flintlock.runtime.spark.arrow_segments import (
    read_arrow_segments,
    write_arrow_file,
    write_arrow_segment,
)
from flintlock.runtime.spark.chain_translator import TranslatedChain, translate_chain
from flintlock.runtime.spark.connector_io import write_sink
from flintlock.runtime.spark.epoch_sources import (
    ESTIMATED_ROW_BYTES,
    FILE_EXPANSION,
    Epoch,
    EpochSource,
    epoch_source,
    estimated_bytes,
)
from flintlock.runtime.spark.partitions import (
    GateRead,
    read_parquet,
    subpartition_column_clash,
    write_partition,
)
from flintlock.runtime.spark.schema import to_arrow
from flintlock.runtime.spark.segment_sink import (
    adoptable_schema,
    adopting_sink,
    copy_segment_files,
    drop_empty_part_files,
)
from flintlock.runtime.spark.stream_task import SparkStreamTask, job_setting
from flintlock.runtime.spark.task_checkpoints import TaskCheckpoints
from flintlock.runtime.spark.timed_operators import TimedOperators
from flintlock.runtime.taskmanager.invokable import TaskCancelledError
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, TaskResult

__all__ = ["SparkStreamingTask", "StreamingTaskStats", "credit_bounds", "max_backlog",
           "segment_format"]

log = logging.getLogger(__name__)

#: back-pressure and idle waits poll this often (seconds) at most
_POLL_S = 0.05


def segment_format(input_bytes: int | None, threshold: int) -> str:
    """The format of an epoch's output segments: ``ARROW`` when its input is known to be below
    ``threshold`` bytes, else ``PARQUET`` (see the module docstring)."""
    return ARROW if input_bytes is not None and input_bytes < threshold else PARQUET


def max_backlog(job_configuration: Mapping[str, str]) -> int:
    """Unacknowledged segments a producer may have per partition (see the module docstring)."""
    return max(1, job_setting(job_configuration, options.BUFFERS_PER_CHANNEL)
               + job_setting(job_configuration, options.FLOATING_BUFFERS_PER_GATE))


def credit_bounds(job_configuration: Mapping[str, str]) -> dict[str, int]:
    """``PipelinedPartitionWriter``'s ``exclusive`` segments (``buffers-per-channel``, at least
    1) and ``max_bytes`` for the floating ones: ``max_backlog`` buffers of
    ``taskmanager.memory.segment-size`` bytes, the data Flink's credits let be in flight."""
    return {"exclusive": max(1, job_setting(job_configuration, options.BUFFERS_PER_CHANNEL)),
            "max_bytes": max_backlog(job_configuration)
            * job_setting(job_configuration, options.SEGMENT_SIZE)}


class StreamingTaskStats:
    """What the loop measured: epochs, records, busy / back-pressured / idle time (ms) and
    watermarks; read by the TaskExecutor for live metrics (``metrics.live_task_metrics``)."""

    def __init__(self) -> None:
        self.epochs = 0
        self.records_in = self.records_out = self.bytes_in = self.bytes_out = 0
        self.busy_ms = self.back_pressured_ms = self.idle_ms = 0.0
        #: the subtask's input watermark and the watermark it last sent (ms; None: none yet)
        self.input_watermark: int | None = None
        self.output_watermark: int | None = None
        #: no Connect progress is followed: a cancelled task interrupts a remote server at once
        #: (``SparkStreamTask._remote_interrupt_due``)
        self.remote_stage_running: bool | None = None


class SparkStreamingTask(SparkStreamTask):
    """Runs the ``OperatorChain`` in ``env.tdd.invokable_payload`` epoch by epoch."""

    #: live counters (see ``StreamingTaskStats``)
    stats: StreamingTaskStats

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stats = StreamingTaskStats()
        self._epoch_source: EpochSource | None = None
        self._collect_writers: dict[str, PipelinedPartitionWriter] = {}
        self._adopting: FileSink | None = None  # a sink copying its gate's segment files
        self._shadow_sp: set[int] = set()  # outputs with a user column named `sp`
        conf = self._tdd.job_configuration
        # every streaming job can take a checkpoint or savepoint (periodic ones or not)
        self.checkpoints = TaskCheckpoints(
            job_setting(conf, options.CHECKPOINTING_MODE) == "EXACTLY_ONCE")

    # ---- checkpoint RPCs (TaskExecutor thread) -------------------------------------------------

    def trigger_checkpoint(self, checkpoint_id: int, location: str, stop: str = "") -> None:
        """A source subtask is to snapshot and emit barrier ``checkpoint_id`` (Flink
        ``triggerCheckpointAsync``; ``stop``: a stop-with-savepoint's, ``TaskCheckpoints``)."""
        self.checkpoints.trigger(checkpoint_id, location, stop)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.checkpoints.notify_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.checkpoints.notify_aborted(checkpoint_id)

    def _invoke(self) -> TaskResult:
        self._check_cancelled()
        chain = self._load_chain()
        spark = self._tagged_session()
        try:
            return self._loop(spark, chain)
        except TaskCancelledError:
            raise
        except Exception as exc:
            error = self._task_error(chain, None, exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            if self._epoch_source is not None:
                self._epoch_source.close()
            self._untag(spark)

    # ---- the loop --------------------------------------------------------------------------------

    def _loop(self, spark: Any, chain: OperatorChain) -> TaskResult:
        tdd = self._tdd
        conf = tdd.job_configuration
        backlog = max_backlog(conf)
        credits = credit_bounds(conf)
        arrow_threshold = job_setting(conf, options.ARROW_SEGMENT_THRESHOLD)
        writers = [PipelinedPartitionWriter(r.uri, r.number_of_subpartitions, r.number_of_consumers,
                                            backlog, **credits)
                   for r in tdd.produced_partitions]
        # live collect sinks: one partition each, consumed by the JobManager's collect coordinator
        self._collect_writers = {
            node.spec.sink.uid: PipelinedPartitionWriter(
                collect_partition_uri(tdd.collect_root, node.spec.sink.uid, tdd.subtask_index,
                                      tdd.attempt_id.attempt_number), 1, 1, backlog)
            for node in chain.nodes if tdd.collect_root and isinstance(node.spec, SinkSpec)
            and isinstance(node.spec.sink, CollectSink)}
        readers = [PipelinedPartitionReader([loc.uri for loc in g.partitions], tdd.subtask_index,
                                            g.subpartition_start, g.subpartition_end)
                   for g in tdd.input_gates]
        self.checkpoints.set_inputs(readers)
        self._adopting = adopting_sink(chain)
        align = self.checkpoints.exactly_once
        head = chain.nodes[0].spec
        source: EpochSource | None = None
        if isinstance(head, SourceSpec):
            source = epoch_source(head.source, tuple(tdd.source_splits),
                                  job_setting(conf, options.BUFFER_TIMEOUT))
            self._epoch_source = source
        committables: dict[int, object] = {}
        collected: dict[str, list[pa.Table]] = {}
        schemas = [""] * len(writers)
        timed = TimedOperators(spark, self._run, tdd.state_uri,
                               (tdd.task_name_with_subtask(), tdd.subtask_index,
                                tdd.number_of_subtasks))
        timed.prepare(chain)
        restore = tdd.task_restore
        if restore is not None:
            if restore.finished:  # it had ended before the checkpoint: nothing more to emit
                return self._finished_on_restore(writers, schemas)
            if source is not None and restore.source_offset is not None:
                source.restore(dict(restore.source_offset))
            timed.restore(restore.operators)
            log.info("%s: restored from checkpoint %s", tdd.task_name_with_subtask(),
                     tdd.restore_checkpoint_id)
        sent: tuple[int | None, bool] = (None, False)  # the last (watermark, idle) committed
        last_busy_s = 0.0  # how long the last epoch ran (a source's rate limiter counts it)
        while True:
            self._wait_for_credit([*writers, *self._collect_writers.values()])
            started = time.perf_counter()
            now_ms = int(time.time() * 1000)
            stopped = False  # ended by a stop-with-savepoint without drain: no flush
            if source is not None:
                stop = self._stop_with_savepoint(chain, source, timed, writers)
                epoch = (Epoch((), True, 0.0) if stop
                         else source.next_epoch(time.monotonic(), last_busy_s))
                splits, ended, wait_s = epoch.splits, epoch.ended, epoch.wait_s
                segments: list[list[ReadableSegment]] = []
                has_input, stopped = bool(splits), stop == "suspend"
                watermark = MAX_WATERMARK if ended and not stopped else None
                input_bytes = estimated_bytes(splits)
            else:
                splits, wait_s = (), _POLL_S
                segments = [r.poll(backlog, align, credits["max_bytes"]) for r in readers]
                ended = all(r.ended for r in readers)
                stopped = ended and any(r.stopped for r in readers)
                has_input = any(s.dirs for gate in segments for s in gate)
                watermark = combined_watermark(readers)
                input_bytes = sum(s.bytes * (1 if s.format == ARROW else FILE_EXPANSION)
                                  for gate in segments for s in gate)
            timed.begin_epoch(watermark, now_ms, end_of_input=ended and not stopped)
            self.stats.input_watermark = watermark
            run = not stopped and (has_input or timed.due(watermark, now_ms)
                                   or (ended and timed.has_state()))
            if input_bytes is not None:  # windows and timers may fire from their whole state
                input_bytes += timed.state_rows() * ESTIMATED_ROW_BYTES
            if run:
                self._epoch(spark, chain, splits, readers, segments, writers, schemas,
                            committables, collected, ended, timed,
                            segment_format(input_bytes, arrow_threshold))
                sent = (timed.output_watermark(ended), False)
                self.stats.output_watermark = sent[0]
            elif ended:
                self._commit_end(writers, schemas, stopped)
                if stopped:  # output after the savepoint is not published: a resume redoes it
                    committables.clear()
            else:
                mark = (timed.output_watermark(False), timed.idle(now_ms))
                if mark != sent and (mark[0] is not None or mark[1]):
                    for w, schema in zip(writers, schemas, strict=True):
                        w.commit(schema=schema, watermark=mark[0], idle=mark[1])
                    sent = mark
                    self.stats.output_watermark = mark[0]
            if ended:
                for w in self._collect_writers.values():
                    if not w.ended:
                        w.commit(end=True)
            self._take_checkpoints(chain, source, timed, writers)
            for reader, taken in zip(readers, segments, strict=False):
                if taken:
                    reader.acknowledge()
            busy_ms = (time.perf_counter() - started) * 1e3
            last_busy_s = busy_ms / 1e3 if run else 0.0
            if run:
                self.stats.busy_ms += busy_ms
            if ended:
                break
            if not run and not any(segments):
                self._pause(wait_s)
        self._check_cancelled()
        accumulators = {name: _ipc(tables) for name, tables in collected.items()}
        s = self.stats
        log.info("%s: %d epochs, %d records in, %d out, busy %.0f ms, back-pressured %.0f ms, "
                 "idle %.0f ms", tdd.task_name_with_subtask(), s.epochs, s.records_in,
                 s.records_out, s.busy_ms, s.back_pressured_ms, s.idle_ms)
        return TaskResult(partitions=(), committables=committables, accumulators=accumulators,
                          metrics=IOMetrics(records_in=s.records_in, records_out=s.records_out,
                                            bytes_in=s.bytes_in, bytes_out=s.bytes_out))

    def _take_checkpoints(self, chain: OperatorChain, source: EpochSource | None,
                          timed: TimedOperators, writers: list[PipelinedPartitionWriter]) -> None:
        """Snapshot every checkpoint due now, emit its barrier and acknowledge it (or decline
        when the snapshot cannot be written)."""
        tdd = self._tdd
        responder = self._env.checkpoint_responder
        for n, location in self.checkpoints.due():
            try:
                directory = f"{location}/{tdd.attempt_id.job_vertex_id}/{tdd.subtask_index}"
                operators = timed.snapshot(directory, {i: str(node.operator_id)
                                                       for i, node in enumerate(chain.nodes)})
                snapshot = TaskStateSnapshot(
                    source_offset=None if source is None else source.offset(),
                    operators=operators, sink_transactions=self.checkpoints.pre_commit(n),
                    source_operator="" if source is None else str(chain.nodes[0].operator_id))
            except Exception as exc:
                self._check_cancelled()
                log.warning("%s: checkpoint %d declined: %s", tdd.task_name_with_subtask(), n, exc)
                self.checkpoints.done(n)
                if responder is not None:
                    responder.decline(tdd.attempt_id, n, f"{type(exc).__name__}: {exc}")
                continue
            for w in writers:
                if not w.ended:
                    w.commit_barrier(n, location)
            self.checkpoints.done(n)
            log.debug("%s: snapshot of checkpoint %d taken (%d bytes of state)",
                      tdd.task_name_with_subtask(), n, snapshot.state_size)
            if responder is not None:
                responder.acknowledge(tdd.attempt_id, n, snapshot)

    def _finished_on_restore(self, writers: list[PipelinedPartitionWriter],
                             schemas: list[str]) -> TaskResult:
        self._commit_end(writers, schemas)
        for w in self._collect_writers.values():
            w.commit(end=True)
        log.info("%s: had finished at checkpoint %s; ends at once",
                 self._tdd.task_name_with_subtask(), self._tdd.restore_checkpoint_id)
        return TaskResult(partitions=(), committables={}, accumulators={}, metrics=IOMetrics())

    def _pause(self, seconds: float) -> None:
        """Idle wait that a cancel ends at once."""
        started = time.perf_counter()
        self._cancelled.wait(max(0.001, min(seconds, _POLL_S)))
        self.stats.idle_ms += (time.perf_counter() - started) * 1e3
        self._check_cancelled()

    def _wait_for_credit(self, writers: list[PipelinedPartitionWriter]) -> None:
        started = time.perf_counter()
        while True:
            self._check_cancelled()
            if all(w.has_credit() for w in writers):
                break
            self._cancelled.wait(_POLL_S)
        self.stats.back_pressured_ms += (time.perf_counter() - started) * 1e3

    def _commit_end(self, writers: list[PipelinedPartitionWriter], schemas: list[str],
                    stopped: bool = False) -> None:
        """End-of-partition records without data for the partitions not ended yet (stopped
        with a savepoint without drain: no MAX_WATERMARK, consumers do not flush)."""
        for w, schema in zip(writers, schemas, strict=True):
            if not w.ended:
                w.commit(schema=schema, end=True, watermark=None if stopped else MAX_WATERMARK,
                         stopped=stopped)

    def _stop_with_savepoint(self, chain: OperatorChain, source: EpochSource,
                             timed: TimedOperators, writers: list[PipelinedPartitionWriter]) -> str:
        """A source after a stop-with-savepoint's barrier (Flink's synchronous savepoint):
        emit nothing until the savepoint completed (returns ``"suspend"`` / ``"terminate"``:
        end now) or was aborted (returns ``""``: go on); later checkpoints are still taken."""
        cp = self.checkpoints
        while cp.stopping is not None and cp.stop_outcome is None:
            self._check_cancelled()
            self._pause(_POLL_S)
            self._take_checkpoints(chain, source, timed, writers)
        if cp.stopping is None:
            return ""
        log.info("%s: stopping with savepoint %d (%s)", self._tdd.task_name_with_subtask(),
                 *cp.stopping)
        return cp.stopping[1]

    def _epoch(self, spark: Any, chain: OperatorChain, splits: tuple[Any, ...],
               readers: list[PipelinedPartitionReader], segments: list[list[ReadableSegment]],
               writers: list[PipelinedPartitionWriter], schemas: list[str],
               committables: dict[int, object], collected: dict[str, list[pa.Table]],
               ended: bool, timed: TimedOperators, fmt: str) -> None:
        tdd = self._tdd
        adopted: list[tuple[list[str], int]] = []  # the segment files an adopting sink copies

        def read_gate(index: int) -> GateRead:
            reader, taken = readers[index], segments[index]
            rows = sum(s.rows for s in taken)
            size = sum(s.bytes for s in taken)
            parquet = [d for s in taken if s.format == PARQUET for d in s.dirs]
            arrow = [d for s in taken if s.format == ARROW for d in s.dirs]
            if self._adopting is not None and parquet and not arrow \
                    and adoptable_schema(reader.schema):
                adopted.append((parquet, rows))
            if not parquet and not arrow:
                if not reader.schema:
                    return GateRead(None, 0, 0, "")
                return GateRead(spark.createDataFrame([], schema=reader.schema), 0, 0, reader.schema)
            frames = ([read_parquet(spark, parquet, reader.schema)] if parquet else []) + (
                [read_arrow_segments(spark, arrow, reader.schema)] if arrow else [])
            df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
            return GateRead(df, rows, size, reader.schema)

        tc = translate_chain(spark, chain, vertex_name=tdd.vertex_name, source_splits=splits,
                             read_gate=read_gate, timed=timed)
        self.stats.epochs += 1
        self.stats.records_in += tc.records_in
        self.stats.bytes_in += tc.bytes_in
        written = self._write_outputs(chain, tc, writers, schemas, fmt)
        self._write_sinks(tc, committables, collected, adopted[0] if adopted else None)
        # after the outputs: fired windows reach them one Spark job sooner
        timed.write_state(small=fmt == ARROW)
        timed.end_epoch()  # what the watermark assigners saw in this epoch's rows
        watermark = timed.output_watermark(ended)
        for i, loc in written:
            writers[i].commit(loc.rows_per_subpartition, loc.bytes_per_subpartition,
                              schema=loc.schema, end=ended, watermark=watermark, format=fmt)
        if ended:
            done = {i for i, _ in written}
            self._commit_end([w for i, w in enumerate(writers) if i not in done],
                             [s for i, s in enumerate(schemas) if i not in done])
        elif watermark is not None:  # outputs without rows this epoch still pass the watermark
            done = {i for i, _ in written}
            for i, w in enumerate(writers):
                if i not in done:
                    w.commit(schema=schemas[i], watermark=watermark)

    def _write_outputs(self, chain: OperatorChain, tc: TranslatedChain,
                       writers: list[PipelinedPartitionWriter], schemas: list[str],
                       fmt: str) -> list[tuple[int, PartitionLocation]]:
        """Write every output's segment in format ``fmt`` (committed by the caller):
        (writer index, location)."""
        tdd = self._tdd
        written = []
        for out_index, node_index in sorted(tc.outputs):
            output = chain.outputs[out_index]
            rpdd = self._partition_for(out_index, output)
            i = tdd.produced_partitions.index(rpdd)
            writer = writers[i]
            uri = writer.segment_uri()
            write = write_arrow_segment if fmt == ARROW else functools.partial(
                write_partition, shadow_sp=i in self._shadow_sp)
            try:
                loc = self._run(functools.partial(write, tc.frames[node_index], rpdd, output, uri,
                                                  tdd.attempt_id))
            except Exception as exc:  # a user column named `sp`: stored under another name
                if fmt == ARROW or i in self._shadow_sp or not subpartition_column_clash(exc):
                    raise
                self._shadow_sp.add(i)
                loc = self._run(functools.partial(write_partition, tc.frames[node_index], rpdd,
                                                  output, uri, tdd.attempt_id, shadow_sp=True))
            schemas[i] = schemas[i] or loc.schema
            self.stats.records_out += sum(loc.rows_per_subpartition)
            self.stats.bytes_out += sum(loc.bytes_per_subpartition)
            written.append((i, loc))
        return written

    def _write_sinks(self, tc: TranslatedChain, committables: dict[int, object],
                     collected: dict[str, list[pa.Table]],
                     adopted: tuple[list[str], int] | None = None) -> None:
        """Write every sink's epoch; ``adopted``: the Parquet segment directories and rows of
        the gate an adopting sink (``segment_sink``) copies instead of writing with Spark."""
        tdd = self._tdd
        for sink_index, node_index, sink in tc.sinks:
            df = tc.frames[node_index]
            if isinstance(sink, CollectSink):
                table = self._run(functools.partial(to_arrow, df))  # no schema round trip
                self.stats.records_out += table.num_rows
                writer = self._collect_writers.get(sink.uid)
                if writer is None:  # no collect coordinator (a test harness): an accumulator
                    collected.setdefault(sink.accumulator_name(tdd.subtask_index), []).append(table)
                elif table.num_rows:
                    rows, size = write_arrow_file(table, f"{writer.segment_uri()}/sp=0.arrow")
                    writer.commit((rows,), (size,), format=ARROW)
                continue
            attempt = self.checkpoints.transaction_attempt(self._tag)
            if adopted is not None and isinstance(sink, FileSink) and sink is self._adopting:
                committable: object = sink.temporary_dir(str(tdd.job_id), attempt)
                copy_segment_files(adopted[0], str(committable))
                rows = adopted[1]
            else:
                started = time.time()
                committable, _, rows = write_sink(
                    df, sink, job_id=str(tdd.job_id), attempt=attempt,
                    subtask_index=tdd.subtask_index, parallelism=tdd.number_of_subtasks,
                    print_fn=self._env.print_fn, run=self._run, append=True,
                )
                if isinstance(sink, FileSink) and not rows:  # no part file without rows,
                    drop_empty_part_files(str(committable), sink, started)  # as in Flink
            if committable is not None and isinstance(sink, FileSink):
                # the attempt's transactions not published by a checkpoint go with the job
                self.checkpoints.wrote(sink_index, str(committable))
                committable = sink.temporary_dir(str(tdd.job_id), self._tag)
            if committable is not None:
                committables[sink_index] = committable
            self.stats.records_out += rows


def _ipc(tables: list[pa.Table]) -> bytes:
    """The collected tables as one Arrow IPC stream (what ``CollectSink`` accumulates)."""
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, table.schema) as writer:
        writer.write_table(table)
    return buf.getvalue()
