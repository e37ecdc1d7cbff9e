"""DataStream, KeyedStream and DataStreamSink: the program API (PyFlink names).

Each call records a ``Transformation`` in the environment and returns a new stream; nothing runs
until ``env.execute()``. Expressions are PySpark Columns (``F.col("x") > 3``) or SQL strings.
Per-operator settings (``name``, ``uid``, ``set_parallelism``, ``slot_sharing_group``,
``start_new_chain``, ``disable_chaining``) change the last operator in place and return ``self``.

Follows Flink ``streaming/api/datastream/{DataStream,KeyedStream,DataStreamSink}`` and PyFlink's
``pyflink.datastream.data_stream``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from flintlock.api.columns import column_name, is_column, sort_column, to_column
from flintlock.api.exceptions import InvalidProgramException
from flintlock.api.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ReduceFunction,
    as_callable,
    function_name,
)
from flintlock.api.schema import ipc_to_table, table_to_rows, to_ddl
from flintlock.api.slot_sharing_group import SlotSharingGroup
from flintlock.api.transformations import (
    LimitTransformation,
    MultiInputTransformation,
    OneInputTransformation,
    PartitionTransformation,
    SinkTransformation,
    Transformation,
)
from flintlock.graph.stream_graph import ChainingStrategy
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators.specs import (
    BROADCAST_LEFT_JOINS,
    BROADCAST_RIGHT_JOINS,
    DistinctSpec,
    DropSpec,
    FilterFunctionSpec,
    FilterSpec,
    FlatMapSpec,
    GlobalAggregateSpec,
    JoinSpec,
    KeyedAggregateSpec,
    KeyedProcessSpec,
    KeyedReduceSpec,
    MapBatchesSpec,
    MapSpec,
    SelectSpec,
    SerializedFunction,
    SortSpec,
    UnionSpec,
    WithColumnSpec,
)

if TYPE_CHECKING:
    from flintlock.api.environment import StreamExecutionEnvironment

__all__ = ["JOIN_TYPES", "DataStream", "DataStreamSink", "KeyedStream"]

#: Accepted ``how`` values of ``join`` and the JoinSpec value each means.
JOIN_TYPES: dict[str, str] = {
    "inner": "inner",
    "left": "left", "left_outer": "left", "leftouter": "left",
    "right": "right", "right_outer": "right", "rightouter": "right",
    "full": "full", "outer": "full", "full_outer": "full", "fullouter": "full",
    "semi": "semi", "left_semi": "semi", "leftsemi": "semi",
    "anti": "anti", "left_anti": "anti", "leftanti": "anti",
}


class _OperatorSettings:
    """The per-operator setters shared by DataStream and DataStreamSink."""

    _transformation: Transformation

    def _target(self, what: str) -> Transformation:
        t = self._transformation
        if t.is_virtual:
            raise InvalidProgramException(
                f"Cannot set {what} on a partitioning ({t.name}); set it on an operator."
            )
        return t

    def name(self, name: str) -> Any:
        """Set the operator's display name."""
        self._target("a name").name = str(name)
        return self

    def get_name(self) -> str:
        return self._transformation.name

    def uid(self, uid: str) -> Any:
        """Set a stable id; the OperatorID is derived from it. Must be unique in the job."""
        if not uid:
            raise ValueError("uid must be a non-empty string")
        self._target("a uid").uid = str(uid)
        return self

    def set_parallelism(self, parallelism: int) -> Any:
        """Run this operator with ``parallelism`` subtasks.

        Raises:
            ValueError: not >= 1, or not 1 for a non-parallel operator (sort, global agg, limit).
        """
        t = self._target("the parallelism")
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"parallelism must be an int >= 1, got {parallelism!r}")
        if t.non_parallel and parallelism != 1:
            raise ValueError(f"The parallelism of non parallel operator '{t.name}' must be 1.")
        t.parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> Any:
        """Set the operator's max parallelism (number of key groups), 1..32768."""
        if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in [1, 32768], got {max_parallelism!r}")
        self._target("the max parallelism").max_parallelism = max_parallelism
        return self

    def slot_sharing_group(self, slot_sharing_group: str | SlotSharingGroup) -> Any:
        """Put the operator into a slot sharing group: a name, or a ``SlotSharingGroup`` whose
        resources (``SlotSharingGroup.builder(name).set_cpu_cores(..)...``) size its slots."""
        t = self._target("a slot sharing group")
        if isinstance(slot_sharing_group, SlotSharingGroup):
            t.slot_sharing_group = slot_sharing_group.name
            if not slot_sharing_group.resource_profile.is_unknown:
                t.slot_sharing_group_resources = slot_sharing_group.resource_profile
        else:
            t.slot_sharing_group = str(slot_sharing_group)
        return self

    def start_new_chain(self) -> Any:
        """Start a new chain at this operator (chaining strategy HEAD)."""
        self._target("the chaining strategy").chaining_strategy = ChainingStrategy.HEAD
        return self

    def disable_chaining(self) -> Any:
        """Never chain this operator to its predecessor or successors (NEVER)."""
        self._target("the chaining strategy").chaining_strategy = ChainingStrategy.NEVER
        return self


class DataStream(_OperatorSettings):
    """A stream of rows produced by one operator (or a partitioning of it)."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        self._env = env
        self._transformation = transformation

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    def get_transformation(self) -> Transformation:
        return self._transformation

    # ---- building blocks ------------------------------------------------------------------------

    def _one_input(self, name: str, spec: Any, *, non_parallel: bool = False,
                   partition: ShipStrategy | None = None, key_columns: tuple[str, ...] = (),
                   function: Any = None) -> DataStream:
        source: Transformation = self._transformation
        if partition is not None:
            source = self._partition(partition, key_columns, implicit=True, source=source)
        t = OneInputTransformation(
            id=self._env._next_id(), name=name, inputs=(source,), spec=spec,
            non_parallel=non_parallel, function=function,
        )
        return DataStream(self._env, t)

    def _partition(self, strategy: ShipStrategy, keys: tuple[str, ...] = (), *,
                   implicit: bool = False, source: Transformation | None = None) -> Transformation:
        return PartitionTransformation(
            id=self._env._next_id(), name=strategy.value.title(),
            inputs=(source or self._transformation,), ship_strategy=strategy, key_columns=keys,
            implicit=implicit,
        )

    def _check_same_env(self, other: DataStream) -> None:
        if not isinstance(other, DataStream):
            raise TypeError(f"expected a DataStream, got {type(other).__name__}")
        if other._env is not self._env:
            raise InvalidProgramException("Cannot combine streams of different environments.")

    # ---- column operators -----------------------------------------------------------------------

    def select(self, *cols: Any) -> DataStream:
        """Project to ``cols`` (Columns or SQL expression strings such as ``"a + 1 AS b"``)."""
        cols = _flatten(cols)
        if not cols:
            raise ValueError("select needs at least one column")
        columns = tuple(to_column(c, "select") for c in cols)
        return self._one_input("Select", SelectSpec(columns))

    def filter(self, condition: Any) -> DataStream:
        """Keep rows matching a Column / SQL string, or rows for which ``fn(row)`` is truthy."""
        if is_column(condition) or isinstance(condition, str):
            return self._one_input("Filter", FilterSpec(to_column(condition, "filter")))
        fn = as_callable(condition, FilterFunction, "filter")
        return self._one_input("Filter", FilterFunctionSpec(_pending(fn)), function=fn)

    def with_column(self, name: str, col: Any) -> DataStream:
        """Add or replace column ``name``."""
        return self._one_input("WithColumn", WithColumnSpec(str(name), to_column(col, "with_column")))

    def drop(self, *names: str) -> DataStream:
        """Drop the named columns."""
        return self._one_input("Drop", DropSpec(tuple(str(n) for n in _flatten(names))))

    # ---- Python-function operators --------------------------------------------------------------

    def map(self, fn: Any, output_schema: Any) -> DataStream:
        """``fn(row) -> tuple | dict | Row`` per row; ``output_schema`` a DDL string or StructType."""
        fn = as_callable(fn, MapFunction, "map")
        return self._one_input("Map", MapSpec(_pending(fn), to_ddl(output_schema)), function=fn)

    def flat_map(self, fn: Any, output_schema: Any) -> DataStream:
        """``fn(row) -> iterable of rows``."""
        fn = as_callable(fn, FlatMapFunction, "flat_map")
        spec = FlatMapSpec(_pending(fn), to_ddl(output_schema))
        return self._one_input("FlatMap", spec, function=fn)

    def map_batches(self, fn: Any, output_schema: Any,
                    batch_format: Literal["arrow", "pandas"] = "arrow") -> DataStream:
        """``fn(batch) -> batch`` on pyarrow RecordBatches or pandas DataFrames."""
        if batch_format not in ("arrow", "pandas"):
            raise ValueError(f"batch_format must be 'arrow' or 'pandas', got {batch_format!r}")
        if not callable(fn):
            raise TypeError(f"map_batches: expected a callable, got {type(fn).__name__}")
        spec = MapBatchesSpec(_pending(fn), to_ddl(output_schema), batch_format)
        return self._one_input("MapBatches", spec, function=fn)

    # ---- event time ---------------------------------------------------------------------------

    def assign_timestamps_and_watermarks(self, strategy: Any) -> DataStream:
        """Event time and watermarks from a ``WatermarkStrategy`` (``flintlock.api.watermarks``).

        Raises:
            TypeError: not a WatermarkStrategy.
            InvalidProgramException: the strategy names neither a timestamp column nor an
                assigner function.
        """
        from flintlock.api.watermarks import WatermarkStrategy
        from flintlock.runtime.operators.time_specs import WatermarkAssignerSpec

        if not isinstance(strategy, WatermarkStrategy):
            raise TypeError("assign_timestamps_and_watermarks: expected a WatermarkStrategy, got "
                            f"{type(strategy).__name__}")
        fn = strategy.timestamp_assigner
        if strategy.timestamp_column is None and fn is None:
            raise InvalidProgramException(
                "assign_timestamps_and_watermarks: the WatermarkStrategy has no event time; add "
                ".with_timestamp_column('ts') or .with_timestamp_assigner(fn)")
        spec = WatermarkAssignerSpec(strategy.timestamp_column, strategy.out_of_orderness_ms,
                                     strategy.idleness_ms, _pending(fn) if fn else None)
        return self._one_input("Timestamps/Watermarks", spec, function=fn)

    def get_side_output(self, tag: Any) -> DataStream:
        """The rows this operator sent to side output ``tag`` (an ``OutputTag``)."""
        from flintlock.api.windows import OutputTag
        from flintlock.runtime.operators.time_specs import SideOutputSpec

        if not isinstance(tag, OutputTag):
            raise TypeError(f"get_side_output: expected an OutputTag, got {type(tag).__name__}")
        if getattr(getattr(self._transformation, "spec", None), "late_tag", None) != tag.tag_id:
            raise InvalidProgramException(
                f"get_side_output: operator '{self._transformation.name}' has no side output "
                f"'{tag.tag_id}' (late data goes to a side output with "
                "window(...).side_output_late_data(tag))")
        t = OneInputTransformation(id=self._env._next_id(), name=f"SideOutput: {tag.tag_id}",
                                   inputs=(self._transformation,), spec=SideOutputSpec(tag.tag_id))
        return DataStream(self._env, t)

    def time_column(self) -> str | None:
        """The event-time column set by the nearest upstream ``assign_timestamps_and_watermarks``
        (following first inputs), or None."""
        from flintlock.api.watermarks import ROWTIME_COLUMN
        from flintlock.runtime.operators.time_specs import WatermarkAssignerSpec

        t: Transformation | None = self._transformation
        while t is not None:
            spec = getattr(t, "spec", None)
            if isinstance(spec, WatermarkAssignerSpec):
                return spec.time_column or ROWTIME_COLUMN
            t = t.inputs[0] if t.inputs else None
        return None

    # ---- keyed and global operators -------------------------------------------------------------

    def key_by(self, *keys: Any) -> KeyedStream:
        """Partition by key columns (names, or Columns with a name: ``(F.col("a") % 10).alias("k")``).

        Names are read as PySpark reads them: a column whose name holds a dot is named in
        backquotes (``key_by("`a.b`")``; ``"a.b"`` is field ``b`` of a struct ``a``).

        Raises:
            ValueError: no keys, or a Column without a name.
        """
        keys = _flatten(keys)
        if not keys:
            raise ValueError("key_by needs at least one key")
        stream: DataStream = self
        names: list[str] = []
        for k in keys:
            if isinstance(k, str):
                names.append(k)
                continue
            if not is_column(k):
                raise TypeError(f"key_by: expected a column name or a Column, got {type(k).__name__}")
            name = column_name(k)
            if name is None:
                raise ValueError(
                    f"key_by: the Column {k!r} has no name; give it one with .alias('k')"
                )
            if type(getattr(k, "_expr", None)).__name__ != "ColumnReference":
                stream = stream.with_column(name, k)
            names.append(name)
        partition = stream._partition(ShipStrategy.HASH, tuple(names))
        return KeyedStream(self._env, partition, tuple(names))

    def agg(self, *cols: Any) -> DataStream:
        """Global aggregate (one row) at parallelism 1 after a GLOBAL edge."""
        if not cols:
            raise ValueError("agg needs at least one aggregate column")
        aggs = tuple(to_column(c, "agg") for c in cols)
        return self._one_input("Aggregate", GlobalAggregateSpec(aggs), non_parallel=True,
                               partition=ShipStrategy.GLOBAL)

    def distinct(self) -> DataStream:
        """Drop duplicate rows (HASH on all columns, then Distinct)."""
        return self._one_input("Distinct", DistinctSpec(), partition=ShipStrategy.HASH)

    def sort(self, *cols: Any) -> DataStream:
        """Order all rows at parallelism 1 (names or Columns such as ``F.col("n").desc()``)."""
        cols = _flatten(cols)
        if not cols:
            raise ValueError("sort needs at least one column")
        return self._one_input("Sort", SortSpec(tuple(sort_column(c) for c in cols)),
                               non_parallel=True, partition=ShipStrategy.GLOBAL)

    def limit(self, n: int) -> DataStream:
        """Keep ``n`` rows: a chained local limit, then a parallelism-1 global limit."""
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"limit must be an int >= 0, got {n!r}")
        t = LimitTransformation(id=self._env._next_id(), name="Limit",
                                inputs=(self._transformation,), n=n)
        return DataStream(self._env, t)

    # ---- multi-input operators ------------------------------------------------------------------

    def join(self, other: DataStream, on: str | Sequence[str] | None = None, *,
             left_on: str | Sequence[str] | None = None,
             right_on: str | Sequence[str] | None = None, how: str = "inner") -> DataStream:
        """Join with ``other``; both sides are HASH-partitioned on their keys (a hash join).

        Broadcast join: ``left.join(small.broadcast(), ...)`` sends every row of ``small`` to
        every join subtask and leaves ``left`` where it is, so the join chains to ``left``'s
        operators and ``left`` crosses no exchange (``small.join(...)`` on a broadcast ``self``
        broadcasts the left side). A side whose files are at most
        ``table.optimizer.join.broadcast-threshold`` bytes is broadcast automatically.

        Raises:
            ValueError: unknown ``how``, or keys given both / neither ways or of unequal length.
            InvalidProgramException: both sides broadcast, or a broadcast side whose unmatched
                rows the join type keeps (right side of a right/full join, left side of a
                left/full/semi/anti join).
        """
        self._check_same_env(other)
        kind = JOIN_TYPES.get(str(how).lower())
        if kind is None:
            raise ValueError(f"join: unknown how={how!r}; use one of {sorted(set(JOIN_TYPES.values()))}")
        if on is not None:
            if left_on is not None or right_on is not None:
                raise ValueError("join: give either on= or left_on=/right_on=, not both")
            left = right = _names(on)
        elif left_on is not None and right_on is not None:
            left, right = _names(left_on), _names(right_on)
        else:
            raise ValueError("join: give on= or both left_on= and right_on= "
                             "(cross_join(other) pairs all rows)")
        if not left or len(left) != len(right):
            raise ValueError(f"join: key lists must be non-empty and of equal length: {left} vs {right}")
        side = _broadcast_side(self, other, kind)
        if side:  # the broadcast side carries its BROADCAST partitioning; the other none
            inputs: tuple[Transformation, ...] = (self._transformation, other._transformation)
        else:
            inputs = (self._partition(ShipStrategy.HASH, left),
                      other._partition(ShipStrategy.HASH, right))
        t = MultiInputTransformation(id=self._env._next_id(), name="Join", inputs=inputs,
                                     spec=JoinSpec(kind, left, right, side))
        return DataStream(self._env, t)

    def cross_join(self, other: DataStream) -> DataStream:
        """Pair every row with every row of ``other`` (PySpark's ``crossJoin``).

        A broadcast join without keys: ``other`` goes to every join subtask and ``self`` stays
        where it is, so the join chains to ``self``'s operators. Meant for a small ``other``, such
        as the one row of a global ``agg``:
        ``per_part.cross_join(total).filter(F.col("value") > F.col("threshold"))``.
        ``small.broadcast().cross_join(big)`` broadcasts the left side instead.

        Raises:
            InvalidProgramException: both sides broadcast.
        """
        self._check_same_env(other)
        if not _is_broadcast(self) and not _is_broadcast(other):
            other = other.broadcast()
        side = _broadcast_side(self, other, "cross")
        t = MultiInputTransformation(id=self._env._next_id(), name="CrossJoin",
                                     inputs=(self._transformation, other._transformation),
                                     spec=JoinSpec("cross", (), (), side))
        return DataStream(self._env, t)

    def union(self, *others: DataStream) -> DataStream:
        """Union by column name with ``others`` (one input gate per stream)."""
        if not others:
            raise ValueError("union needs at least one other stream")
        for o in others:
            self._check_same_env(o)
        inputs = (self._transformation, *(o._transformation for o in others))
        t = MultiInputTransformation(id=self._env._next_id(), name="Union", inputs=inputs,
                                     spec=UnionSpec())
        return DataStream(self._env, t)

    # ---- partitionings (apply to the next edge) ------------------------------------------------

    def rebalance(self) -> DataStream:
        return DataStream(self._env, self._partition(ShipStrategy.REBALANCE))

    def rescale(self) -> DataStream:
        return DataStream(self._env, self._partition(ShipStrategy.RESCALE))

    def broadcast(self) -> DataStream:
        return DataStream(self._env, self._partition(ShipStrategy.BROADCAST))

    def forward(self) -> DataStream:
        return DataStream(self._env, self._partition(ShipStrategy.FORWARD))

    def global_(self) -> DataStream:
        return DataStream(self._env, self._partition(ShipStrategy.GLOBAL))

    # ---- sinks --------------------------------------------------------------------------------------

    def sink_to(self, sink: Any) -> DataStreamSink:
        """Write to a ``flintlock.connectors`` sink (runs with its input's parallelism by default)."""
        describe = getattr(sink, "describe", None)
        if not callable(describe):
            raise TypeError(f"sink_to: expected a flintlock.connectors sink, got {type(sink).__name__}")
        t = SinkTransformation(id=self._env._next_id(), name=f"Sink: {describe()}",
                               inputs=(self._transformation,), sink=sink)
        self._env._add_sink(t)
        return DataStreamSink(t)

    def print(self, prefix: str | None = None) -> DataStreamSink:
        """Print every row to the TaskManagers' stdout (``PrintSink``)."""
        from flintlock.connectors.sinks import PrintSink

        return self.sink_to(PrintSink(prefix))

    def execute_and_collect(self, limit: int | None = None, *,
                            job_execution_name: str | None = None) -> Any:
        """Run the job with a collect sink on this stream and return its rows (``pyspark.sql.Row``).

        BATCH: a list, once the job finished; the subtasks' rows concatenated in subtask order;
        ``limit`` keeps the first ``limit`` rows (a limit operator is added so less data travels).
        STREAMING: a ``flintlock.client.collect.CollectResultIterator`` (Flink's
        ``CloseableIterator``) yielding rows as they are produced; closing it (or reaching
        ``limit``) cancels the job if it still runs: ``with s.execute_and_collect() as rows:``.
        """
        from flintlock.connectors.sinks import CollectSink
        from flintlock.runtime.jobgraph.types import JobType

        uid = f"collect-sink-{uuid.uuid4().hex[:16]}"
        name = job_execution_name or "DataStream Collect"
        if self._env.job_type() is JobType.STREAMING:
            from flintlock.client.collect import CollectResultIterator

            self.sink_to(CollectSink(uid)).uid(uid).name("Sink: Collect")
            return CollectResultIterator(self._env.execute_async(name), uid, limit)
        stream = self if limit is None else self.limit(limit)
        stream.sink_to(CollectSink(uid)).uid(uid).name("Sink: Collect")
        result = self._env.execute(name)
        accumulators = getattr(result, "accumulators", None)
        if accumulators is None:
            accumulators = result.get_all_accumulator_results()
        from flintlock.client.collect import collected_payloads

        rows = table_to_rows(ipc_to_table(collected_payloads(accumulators, uid)))
        return rows if limit is None else rows[:limit]


def _flatten(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Accept ``f(a, b)`` and ``f([a, b])`` alike (as PySpark does)."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(args[0])
    return args


def _pending(fn: Any) -> SerializedFunction:
    """A placeholder until the generator pickles the function (payload filled in there)."""
    return SerializedFunction(function_name(fn), b"")


def _is_broadcast(stream: DataStream) -> bool:
    t = stream._transformation
    return isinstance(t, PartitionTransformation) and t.ship_strategy is ShipStrategy.BROADCAST


def _broadcast_side(left: DataStream, right: DataStream, kind: str) -> str:
    """``"right"``/``"left"`` when that input is a ``broadcast()`` partitioning, else ``""``."""
    lb, rb = _is_broadcast(left), _is_broadcast(right)
    if lb and rb:
        raise InvalidProgramException(
            "join: both inputs are broadcast; broadcast only the smaller side.")
    if rb and kind not in BROADCAST_RIGHT_JOINS:
        raise InvalidProgramException(
            f"join: a {kind} join cannot broadcast its right side (each subtask would emit the "
            f"right side's unmatched rows); broadcast the left side or use a hash join. Joins "
            f"that broadcast their right side: {', '.join(sorted(BROADCAST_RIGHT_JOINS))}.")
    if lb and kind not in BROADCAST_LEFT_JOINS:
        raise InvalidProgramException(
            f"join: a {kind} join cannot broadcast its left side (each subtask would emit the "
            f"left side's unmatched rows); broadcast the right side or use a hash join. Joins "
            f"that broadcast their left side: {', '.join(sorted(BROADCAST_LEFT_JOINS))}.")
    return "right" if rb else "left" if lb else ""


def _names(keys: str | Sequence[str]) -> tuple[str, ...]:
    return (keys,) if isinstance(keys, str) else tuple(str(k) for k in keys)


class KeyedStream(DataStream):
    """A stream HASH-partitioned by ``keys``; keyed operators see all rows of a key together."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation,
                 keys: tuple[str, ...]) -> None:
        super().__init__(env, transformation)
        self._keys = keys

    def get_keys(self) -> tuple[str, ...]:
        return self._keys

    def agg(self, *cols: Any) -> DataStream:
        """``groupBy(keys).agg(*cols)`` (Columns or SQL strings such as ``"sum(x) AS x"``)."""
        if not cols:
            raise ValueError("agg needs at least one aggregate column")
        aggs = tuple(to_column(c, "agg") for c in cols)
        return self._one_input("KeyedAggregate", KeyedAggregateSpec(self._keys, aggs))

    def _named_agg(self, fn_name: str, col: str) -> DataStream:
        from pyspark.sql import functions as F

        if not isinstance(col, str):
            raise TypeError(f"{fn_name}: expected a column name, got {type(col).__name__}")
        return self.agg(getattr(F, fn_name)(col).alias(col))

    def sum(self, col: str) -> DataStream:
        """Per-key sum of ``col``; the result keeps the name ``col``."""
        return self._named_agg("sum", col)

    def min(self, col: str) -> DataStream:
        return self._named_agg("min", col)

    def max(self, col: str) -> DataStream:
        return self._named_agg("max", col)

    def count(self) -> DataStream:
        """Rows per key in a column ``count``."""
        from pyspark.sql import functions as F

        return self.agg(F.count(F.lit(1)).alias("count"))

    def reduce(self, fn: Any) -> DataStream:
        """Fold each key's rows with ``fn(acc_row, row) -> row`` (same schema)."""
        fn = as_callable(fn, ReduceFunction, "reduce")
        return self._one_input("Reduce", KeyedReduceSpec(self._keys, _pending(fn)), function=fn)

    def window(self, assigner: Any) -> Any:
        """A ``WindowedStream`` (``flintlock.api.windowed_stream``) over ``assigner``'s windows."""
        from flintlock.api.windowed_stream import WindowedStream

        return WindowedStream(self, assigner)

    def process(self, fn: Any, output_schema: Any) -> DataStream:
        """A ``KeyedProcessFunction`` with Flink's ``process_element`` / ``on_timer`` (keyed state
        and timers, STREAMING and BATCH), or ``fn(key, rows) -> iterable of rows`` over all rows
        of one key (BATCH)."""
        if isinstance(fn, KeyedProcessFunction) and fn.is_stateful:
            from flintlock.runtime.operators.time_specs import StatefulProcessSpec

            stateful = StatefulProcessSpec(self._keys, _pending(fn), to_ddl(output_schema),
                                           self.time_column())
            return self._one_input("KeyedProcess", stateful, function=fn)
        fn = as_callable(fn, KeyedProcessFunction, "process")
        spec = KeyedProcessSpec(self._keys, _pending(fn), to_ddl(output_schema))
        return self._one_input("KeyedProcess", spec, function=fn)


class DataStreamSink(_OperatorSettings):
    """The end of a stream (returned by ``sink_to`` / ``print``) with per-operator settings."""

    def __init__(self, transformation: SinkTransformation) -> None:
        self._transformation = transformation

    def get_transformation(self) -> SinkTransformation:
        return self._transformation  # type: ignore[return-value]
