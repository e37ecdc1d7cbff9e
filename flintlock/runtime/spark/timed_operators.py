"""The runtime of the event-time and keyed-state operators inside one task (``time_specs``).

``TimedOperators`` is what ``translate_chain`` calls for a ``WatermarkAssignerSpec``,
``WindowSpec``, ``StatefulProcessSpec`` or ``SideOutputSpec`` node. It holds, per node, the
operator's watermark, its state table and what it observed, across the epochs of a STREAMING
task; a BATCH task uses it for one epoch with no state and every watermark at its maximum.

Per STREAMING epoch (``streaming_task``): ``begin_epoch(input watermark, clock)`` ->
``translate_chain`` (a keyed-process node writes its new state version while the chain is
translated: its output is read from that write) -> the outputs and sinks are written ->
``write_state()`` writes the new state versions of the window nodes (after the outputs, so a
fired window reaches its sink one Spark job sooner; the output plans read the version before,
which is kept) -> ``end_epoch()`` reads the assigners' observations (max event time; Spark's
``observe``, no extra job) -> ``output_watermark()`` goes into the commit record of every output
segment. Either way a version is the state after a whole epoch. ``due()`` says whether a timer
or window is due although no input arrived (a timer epoch over empty input).

State tables: ``<state_uri>/<node index>/v-<n>`` (Parquet written by Spark); version n is the
state after the task's n-th stateful epoch. A window node's version from a small epoch (one whose
input and state are estimated below the Arrow segment threshold, as for its output segments) is
instead collected by one Spark job and written by the task as one Arrow IPC file,
``v-<n>/state.arrow``, read back as a local relation: a Parquet write of a few rows is mostly
fixed cost (the file commit protocol), as an Arrow segment's measurements showed
(``arrow_segments``). A checkpoint copies the current version of each
operator into the checkpoint directory (``snapshot``: files copied, no Spark job; Flink's full
snapshot of a ``HashMapStateBackend``); a restored attempt reads that copy as its version 0
(``restore``) and never deletes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flintlock.api.watermarks import ROWTIME_COLUMN
from flintlock.runtime.checkpoint.savepoint_restore import CHANGED_STATE_ADVICE
from flintlock.runtime.checkpoint.snapshots import OperatorStateHandle
from flintlock.runtime.operators import specs as S
from flintlock.runtime.operators.time_specs import (
    SideOutputSpec,
    StatefulProcessSpec,
    WatermarkAssignerSpec,
    WindowSpec,
    state_kind,
)
from flintlock.runtime.shuffle.layout import filesystem_and_path
from flintlock.runtime.spark import keyed_process as K
from flintlock.runtime.spark.arrow_segments import read_arrow_segments, write_arrow_file
from flintlock.runtime.spark.connect_plans import observe, select_except
from flintlock.runtime.spark.errors import OperatorException
from flintlock.runtime.spark.schema import ddl_field_types, to_arrow
from flintlock.runtime.spark.window_ops import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    NEXT,
    STATE_COLUMNS,
    EpochTimes,
    agg_output_names,
    event_time_millis,
    input_ddl_of,
    window_epoch,
)

__all__ = ["ARROW_STATE_FILE", "StateTable", "TimedOperators"]

#: the file of a state version kept as Arrow IPC (``StateTable``)
ARROW_STATE_FILE = "state.arrow"


class StateTable:
    """The versions ``v-<n>`` of one operator's state under ``uri`` (newest and previous kept)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")
        self.version = -1
        self.rows = 0
        self.ddl = ""
        #: the current version is one Arrow IPC file (``ARROW_STATE_FILE``), not Parquet
        self.arrow = False

    def path(self, version: int) -> str:
        return f"{self.uri}/v-{version}"

    def restore(self, checkpointed: str, rows: int, ddl: str) -> None:
        """Start from a copy of a checkpoint's state at ``checkpointed`` as version 0.

        A copy, not a reference: the checkpoint is discarded once ``state.checkpoints.
        num-retained`` newer ones completed, possibly while this attempt still holds the
        restored version (a subtask that received no rows since).

        Raises:
            FileNotFoundError: the checkpoint has rows but no files there.
        """
        if not _copy_tree(checkpointed, self.path(0)) and rows:
            raise FileNotFoundError(f"checkpointed state {checkpointed} of {rows} rows is missing")
        self.version, self.rows, self.ddl = 0, rows, ddl
        fs, path = filesystem_and_path(f"{self.path(0)}/{ARROW_STATE_FILE}")
        self.arrow = fs.get_file_info(path).is_file

    def read(self, spark: Any, sub: str = "") -> Any:
        """The newest version (None when empty)."""
        if self.rows == 0 or not self.ddl:
            return None
        if self.arrow:
            return read_arrow_segments(spark, [f"{self.path(self.version)}/{ARROW_STATE_FILE}"],
                                       self.ddl)
        return spark.read.schema(self.ddl).parquet(self.path(self.version) + sub)

    def committed(self, rows: int, ddl: str, arrow: bool = False) -> None:
        """Version ``version + 1`` was written with ``rows`` rows (as Arrow IPC with ``arrow``);
        drop the one before the previous (the previous may still be read by the epoch's
        outputs)."""
        self.version += 1
        self.rows, self.ddl, self.arrow = rows, ddl or self.ddl, arrow
        if self.version >= 2:
            fs, path = filesystem_and_path(self.path(self.version - 2))
            try:
                fs.delete_dir(path)
            except FileNotFoundError:
                pass


@dataclass
class _Node:
    watermark: int = MIN_WATERMARK  # the operator's watermark after its last epoch
    table: StateTable | None = None
    input_ddl: str = ""
    time_column: Any = None
    next_event: int | None = None
    next_processing: int | None = None
    # assigners
    max_timestamp: int | None = None
    observation: Any = None
    last_rows_ms: int | None = None
    #: the DDL of restored state rows, checked against the program's once its input is known
    restored_ddl: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class TimedOperators:
    """See the module docstring.

    Args:
        spark: the task's Spark session.
        run: runs a Spark action interruptibly (the task's ``_run``).
        state_uri: directory of this attempt's state tables (STREAMING; "" in BATCH).
        task: (task name, subtask index, parallelism) for user functions' ``RuntimeContext``.
    """

    def __init__(self, spark: Any, run: Any, state_uri: str = "",
                 task: tuple[str, int, int] = ("", 0, 1), streaming: bool = True) -> None:
        self.spark, self.run, self.state_uri, self.task = spark, run, state_uri, task
        self.streaming = streaming
        self.nodes: dict[int, _Node] = {}
        self.kinds: dict[int, str] = {}  # node index -> state kind (``prepare``)
        self.names: dict[int, str] = {}
        self.side: dict[tuple[int, str], Any] = {}
        self.input_watermark = MIN_WATERMARK if streaming else MAX_WATERMARK
        self.processing_time = 0
        self.fire_processing_until = 0
        #: state writes of this epoch's window nodes, run by ``write_state``
        self._deferred: list[Callable[[bool], None]] = []

    def prepare(self, chain: S.OperatorChain) -> None:
        """Know the chain's watermark assigners before their first epoch (an idle source's
        assigner never runs, but its idle timeout counts from the start)."""
        for index, node in enumerate(chain.nodes):
            self.kinds[index], self.names[index] = state_kind(node.spec), node.name
            if isinstance(node.spec, WatermarkAssignerSpec) and index not in self.nodes:
                self.nodes[index] = _Node(extra=_assigner_settings(node.spec))

    # ---- epochs ---------------------------------------------------------------------------------

    def begin_epoch(self, input_watermark: int | None, processing_time_ms: int,
                    end_of_input: bool = False) -> None:
        """Start an epoch at ``input_watermark`` (None: none yet) and the clock (ms). At the end
        of input (and in BATCH) every window and timer fires, processing-time ones included,
        as Flink's BATCH execution does; rows are still assigned to windows by the clock."""
        self.processing_time = processing_time_ms or int(time.time() * 1000)
        if self.streaming and not end_of_input:
            self.input_watermark = MIN_WATERMARK if input_watermark is None else input_watermark
            self.fire_processing_until = self.processing_time
        else:
            self.input_watermark = self.fire_processing_until = MAX_WATERMARK
        self.side.clear()
        self._deferred.clear()

    def write_state(self, small: bool = False) -> None:
        """Write the new state versions of the epoch's window nodes (after the epoch's outputs
        and sinks were written: their plans read the version before, which ``StateTable``
        keeps until the next one is committed); ``small``: the epoch's input and state are
        estimated below the Arrow segment threshold, so the versions are Arrow IPC files."""
        pending, self._deferred = self._deferred, []
        for write in pending:
            write(small)

    def end_epoch(self) -> None:
        """After the epoch's outputs were written: read what the assigners observed."""
        for st in self.nodes.values():
            if st.observation is None:
                continue
            try:
                seen = st.observation.get
            except Exception:  # the plan was not run (no output consumed it)
                seen = {}
            st.observation = None
            if seen.get("n"):
                st.last_rows_ms = self.processing_time
                if seen.get("mx") is not None:
                    st.max_timestamp = max(st.max_timestamp or MIN_WATERMARK, int(seen["mx"]))

    def output_watermark(self, ended: bool) -> int | None:
        """The chain's output watermark: its assigners' (minimum), else the input's."""
        if ended:
            return MAX_WATERMARK
        marks = []
        for st in self.nodes.values():
            lag = st.extra.get("out_of_orderness")
            if "out_of_orderness" in st.extra:
                marks.append(None if lag is None or st.max_timestamp is None
                              else st.max_timestamp - lag - 1)
        if not marks:
            return None if self.input_watermark == MIN_WATERMARK else self.input_watermark
        known = [m for m in marks if m is not None]
        return min(known) if len(known) == len(marks) else None

    def idle(self, now_ms: int) -> bool:
        """Whether every assigner with an idle timeout saw no rows for that long."""
        timeouts = [(st, st.extra["idleness"]) for st in self.nodes.values()
                    if st.extra.get("idleness")]
        return bool(timeouts) and all(
            now_ms - (st.last_rows_ms if st.last_rows_ms is not None else st.extra["created"])
            >= ms for st, ms in timeouts)

    def has_state(self) -> bool:
        return any(st.table is not None and st.table.rows for st in self.nodes.values())

    def state_rows(self) -> int:
        """Rows held in the state tables (what a firing epoch may emit, at most)."""
        return sum(st.table.rows for st in self.nodes.values() if st.table is not None)

    def due(self, input_watermark: int | None, now_ms: int) -> bool:
        """Whether a window or timer is due without new input."""
        wm = MIN_WATERMARK if input_watermark is None else input_watermark
        for st in self.nodes.values():
            if st.next_event is not None and st.next_event <= wm and wm > st.watermark:
                return True
            if st.next_processing is not None and st.next_processing <= now_ms:
                return True
        return False

    # ---- checkpoints ----------------------------------------------------------------------------

    def snapshot(self, directory: str, operator_ids: dict[int, str]) -> tuple[OperatorStateHandle, ...]:
        """Copy every operator's current state version under ``directory/<node>`` and describe
        it (called between epochs, so each version is the state after a whole epoch).

        Raises:
            OSError: the checkpoint directory cannot be written.
        """
        handles = []
        for index, st in sorted(self.nodes.items()):
            state_dir, size, rows, ddl = "", 0, 0, ""
            if st.table is not None and st.table.version >= 0:
                rows, ddl = st.table.rows, st.table.ddl
                state_dir = f"{directory.rstrip('/')}/{index}"
                size = _copy_tree(st.table.path(st.table.version), state_dir)
                if not size and rows:  # never record state that is not there
                    raise FileNotFoundError(f"state version {st.table.path(st.table.version)} "
                                            f"of {rows} rows is missing")
            handles.append(OperatorStateHandle(
                index, operator_ids.get(index, ""), state_dir, rows, ddl, st.watermark,
                st.next_event, st.next_processing, st.max_timestamp, size,
                self.kinds.get(index, "")))
        return tuple(handles)

    def restore(self, handles: tuple[OperatorStateHandle, ...]) -> None:
        """Start from a checkpoint's operator states (after ``prepare``)."""
        for h in handles:
            st = self.nodes.setdefault(h.node, _Node())
            st.watermark = MIN_WATERMARK if h.watermark is None else h.watermark
            st.next_event, st.next_processing = h.next_event, h.next_processing
            st.max_timestamp = h.max_timestamp
            if h.state_dir:
                st.table = StateTable(f"{self.state_uri}/{h.node}")
                st.table.restore(h.state_dir, h.rows, h.ddl)
                st.restored_ddl = h.ddl if h.rows else ""

    # ---- nodes ----------------------------------------------------------------------------------

    def apply(self, index: int, node: S.ChainedNode, df: Any, where: str) -> Any:
        spec = node.spec
        st = self.nodes.get(index)
        if st is None:
            st = self.nodes[index] = _Node()
        if st.table is None and self.streaming and isinstance(spec, (WindowSpec,
                                                                     StatefulProcessSpec)):
            st.table = StateTable(f"{self.state_uri}/{index}")
        if isinstance(spec, WatermarkAssignerSpec):
            return self._assign(st, spec, df, where)
        if isinstance(spec, SideOutputSpec):
            late = self.side.get((node.chained_input or 0, spec.tag))
            if late is None:
                raise OperatorException(f"{where}: no side output '{spec.tag}' upstream",
                                        non_recoverable=True)
            return late
        if isinstance(spec, WindowSpec):
            return self._window(index, st, spec, df, where)
        if isinstance(spec, StatefulProcessSpec):
            return self._process(index, st, spec, df, where)
        raise OperatorException(f"{where}: not a timed operator: {type(spec).__name__}",
                                non_recoverable=True)

    def _assign(self, st: _Node, spec: WatermarkAssignerSpec, df: Any, where: str) -> Any:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        if not st.extra:
            st.extra = _assigner_settings(spec)
        if spec.fn is not None:
            st.input_ddl = st.input_ddl or input_ddl_of(df)
            df = _with_rowtime(self.spark, df, spec, where, st.input_ddl)
        if not self.streaming or spec.out_of_orderness_ms is None:
            return df
        if st.time_column is None:
            st.time_column = event_time_millis(df, spec.time_column or ROWTIME_COLUMN, where)
        st.observation = Observation()
        return observe(df, st.observation, F.max(st.time_column).alias("mx"),
                       F.count(F.lit(1)).alias("n"))

    def _window(self, index: int, st: _Node, spec: WindowSpec, df: Any, where: str) -> Any:
        from pyspark.sql import functions as F

        st.input_ddl = st.input_ddl or input_ddl_of(df)
        if spec.assigner.event_time:
            if st.time_column is None:  # the column's type is checked once, not every epoch
                st.time_column = event_time_millis(df, spec.time_column or "", where)
            times = EpochTimes(st.watermark, self.input_watermark, self.processing_time)
        else:
            times = EpochTimes(st.watermark, self.fire_processing_until, self.processing_time)
        state_ddl = f"{st.input_ddl}, {_WINDOW_STATE}"
        self._check_restored(index, st, state_ddl)
        state = st.table.read(self.spark) if st.table is not None else None
        if spec.function == "agg" and "agg_names" not in st.extra:
            st.extra["agg_names"] = agg_output_names(df, spec)  # once: a round trip
        result = window_epoch(self.spark, df, state, spec, times, st.input_ddl, st.time_column,
                              st.extra.get("agg_names"))
        if spec.late_tag and result.late is not None:
            self.side[(index, spec.late_tag)] = result.late
        st.watermark = max(st.watermark, times.now)
        table = st.table
        if table is not None:
            def write(small: bool) -> None:
                seen = self._write(table, result.state, F.count(F.lit(1)),
                                   F.min(NEXT).alias("next"), ddl=state_ddl, drop=(NEXT,),
                                   arrow=small)
                if spec.assigner.event_time:
                    st.next_event = seen.get("next")
                else:
                    st.next_processing = seen.get("next")

            self._deferred.append(write)
        return result.output

    def _process(self, index: int, st: _Node, spec: StatefulProcessSpec, df: Any,
                 where: str) -> Any:
        from pyspark.sql import functions as F

        st.input_ddl = st.input_ddl or input_ddl_of(df)
        self._check_restored(index, st, K.state_ddl(spec, st.input_ddl))
        if spec.time_column and st.time_column is None:
            st.time_column = event_time_millis(df, spec.time_column, where)
        state = st.table.read(self.spark, "/_kind=1") if st.table is not None else None
        combined = K.process_epoch(self.spark, df, state, spec, st.input_ddl, self.input_watermark,
                                   self.processing_time, self.task, st.time_column,
                                   self.fire_processing_until)
        st.watermark = max(st.watermark, self.input_watermark)
        out_struct = _struct(self.spark, spec.output_schema)
        names = out_struct.fieldNames()
        if st.table is None:
            return combined.filter(F.col(K.KIND) == 0).select(*names)
        is_state = F.col(K.KIND) == 1
        seen = self._write(st.table, combined, F.sum(is_state.cast("long")),
                           F.sum((~is_state).cast("long")).alias("out"),
                           F.min("__etimer").alias("event"), F.min("__ptimer").alias("processing"),
                           partition_by=K.KIND, ddl=K.state_ddl(spec, st.input_ddl))
        st.next_event, st.next_processing = seen.get("event"), seen.get("processing")
        if not seen.get("out"):
            return self.spark.createDataFrame([], schema=out_struct)
        return self.spark.read.schema(out_struct).parquet(st.table.path(st.table.version)
                                                          + "/_kind=0")

    def _check_restored(self, index: int, st: _Node, expected: str) -> None:
        """Fail (non-recoverably) when restored state rows do not have the columns the program's
        operator keeps: its key or input columns changed under the same uid."""
        restored, st.restored_ddl = st.restored_ddl, ""
        if not restored:
            return
        old, new = ddl_field_types(restored), ddl_field_types(expected)
        if old == new:
            return
        name = K.key_column_names  # a keyed process's internal "__k0" is "key 1" to the user
        changes = [f"{name(c)} {old[c]} -> {new[c]}" for c in old
                   if c in new and old[c] != new[c]]
        changes += [f"{name(c)} {old[c]} no longer present" for c in old if c not in new]
        changes += [f"new {name(c)} {new[c]}" for c in new if c not in old]
        raise OperatorException(
            f"Operator '{self.names.get(index, index)}' cannot use its restored state: the state "
            f"was written with other key or input columns than the program now has under the same "
            f"uid ({'; '.join(changes)}). {CHANGED_STATE_ADVICE}", non_recoverable=True,
            error_class="StateMigrationException")

    def _write(self, table: StateTable, df: Any, rows: Any, *marks: Any,
               partition_by: str | None = None, ddl: str = "",
               drop: tuple[str, ...] = (), arrow: bool = False) -> dict[str, Any]:
        """Write ``df`` without its ``drop`` columns as the next version of ``table``, observing
        ``rows`` (the state rows it holds) and ``marks`` (aliased aggregates) on the way;
        returns what was observed. With ``drop``, ``ddl`` names the columns written. With
        ``arrow`` (and no ``partition_by``), the version is collected and written as one Arrow
        IPC file (``ARROW_STATE_FILE``)."""
        from pyspark.sql import Observation

        obs = Observation()
        observed = observe(df, obs, rows.alias("rows"), *marks)
        if drop:
            observed = select_except(observed, ddl_field_types(ddl), drop)
        arrow = arrow and not partition_by
        target = table.path(table.version + 1)
        if arrow:
            collected = self.run(lambda: to_arrow(observed))
            write_arrow_file(collected, f"{target}/{ARROW_STATE_FILE}")
        else:
            writer = observed.write.mode("overwrite")
            if partition_by:
                writer = writer.partitionBy(partition_by)
            self.run(lambda: writer.parquet(target))
        seen = dict(obs.get)
        if not table.ddl and not ddl:
            ddl = input_ddl_of(df)
        table.committed(int(seen.get("rows") or 0), ddl, arrow)
        return seen


#: the columns a window's state rows add to its input's (``window_ops.STATE_COLUMNS``)
_WINDOW_STATE = ", ".join(f"`{c}` bigint" for c in STATE_COLUMNS)


def _copy_tree(source: str, target: str) -> int:
    """Copy the files under ``source`` to ``target`` (same layout); returns the bytes copied."""
    import pyarrow.fs as pafs

    src_fs, src = filesystem_and_path(source)
    dst_fs, dst = filesystem_and_path(target)
    infos = src_fs.get_file_info(pafs.FileSelector(src, recursive=True, allow_not_found=True))
    dst_fs.create_dir(dst, recursive=True)
    if infos:
        pafs.copy_files(src, dst, source_filesystem=src_fs, destination_filesystem=dst_fs)
    return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)


def _assigner_settings(spec: WatermarkAssignerSpec) -> dict[str, Any]:
    return {"out_of_orderness": spec.out_of_orderness_ms, "idleness": spec.idleness_ms,
            "created": int(time.time() * 1000)}


def _struct(spark: Any, ddl: str) -> Any:
    from flintlock.runtime.spark.schema import parse_ddl

    return parse_ddl(spark, ddl)


def _with_rowtime(spark: Any, df: Any, spec: WatermarkAssignerSpec, where: str,
                  input_ddl: str) -> Any:
    """``df`` (columns ``input_ddl``) plus ``rowtime`` (TIMESTAMP) from the assigner function."""
    from pyspark.sql import functions as F

    from flintlock.runtime.spark import python_ops as P
    from flintlock.runtime.spark.schema import arrow_schema

    assert spec.fn is not None
    P.check_loadable(spec.fn, where)
    ddl = f"{input_ddl}, `__rowtime_ms` bigint"
    struct = _struct(spark, ddl)
    return (df.mapInArrow(P.timestamp_fn(spec.fn, arrow_schema(struct)), struct)
            .withColumn(ROWTIME_COLUMN, F.timestamp_millis(F.col("__rowtime_ms")))
            .drop("__rowtime_ms"))
