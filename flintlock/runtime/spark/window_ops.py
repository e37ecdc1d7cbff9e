"""Window operators as Spark plans over an epoch's rows plus the operator's state table.

A window operator keeps, as keyed state, the rows of every window that has not fired yet or is
still within its allowed lateness (Flink's ``WindowOperator`` with a ``ListState`` of elements).
One epoch (``window_epoch``) sees the rows that arrived (``new``), the state table (``state``) and
its times (``EpochTimes``: the operator's watermark before the epoch, the watermark now, both ms;
processing-time windows use the clock for both). The times enter the plans as a one-row relation
(``_epoch_times``), not as literals, so every epoch runs the classes Spark compiled for the first:

1. Event time ``__t`` per row (``event_time_millis``: TIMESTAMP -> epoch ms, integral -> as is);
   windows ``[__ws, __we)``: tumbling ``start = t - (t - offset) mod size``; sliding: the
   ``size / slide`` windows containing t; sessions: per key, rows sorted by time split where the
   gap to the previous row is >= gap (merging windows), ``[first t, last t + gap)``.
2. Late rows (Flink ``isElementLate`` / ``isWindowLate``): a row whose last window satisfies
   ``end - 1 + allowed_lateness <= watermark before`` belongs to no window any more; it goes to
   the late side output (or is dropped).
3. A window fires when ``end - 1 <= watermark`` and it either had not fired before
   (``end - 1 > watermark before``) or got new rows (a late firing within allowed lateness).
4. The new state keeps the rows whose window satisfies ``end - 1 + allowed_lateness >
   watermark``.

Results: ``agg`` -> keys, ``window_start``, ``window_end`` (TIMESTAMP), the aggregates;
``reduce`` -> the folded row + ``window_start``/``window_end``; ``process`` -> the user's rows.
The BATCH runtime calls the same plans with no state and ``watermark = MAX_WATERMARK`` (every
window fires once, as Flink's batch execution does at the end of input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flintlock.runtime.operators.time_specs import WindowSpec
from flintlock.runtime.shuffle.pipelined import MAX_WATERMARK
from flintlock.runtime.spark.connect_plans import col, select_except, with_columns
from flintlock.runtime.spark.errors import OperatorException
from flintlock.runtime.spark.python_ops import _load, _rows, _to_batch, _values
from flintlock.runtime.spark.schema import arrow_schema, ddl_field_types, parse_ddl, struct_to_ddl

__all__ = ["MAX_WATERMARK", "MIN_WATERMARK", "NEXT", "STATE_COLUMNS", "AggNames", "EpochTimes",
           "WindowEpoch", "agg_output_names", "event_time_millis", "input_ddl_of", "window_epoch"]

MIN_WATERMARK = -(2**63)
#: internal columns: event time, window start and end (ms), "arrived in this epoch"
T, WS, WE, NEW = "__t", "__ws", "__we", "__new"
STATE_COLUMNS = (T, WS, WE)
#: the epoch's times as columns (``_epoch_times``)
BEFORE, NOW, CLOCK = "__before", "__now", "__clock"
TIME_COLUMNS = (BEFORE, NOW, CLOCK)
#: a kept row's next firing or cleanup time (``WindowEpoch.state``; not part of the state table)
NEXT = "__next"


@dataclass(frozen=True)
class EpochTimes:
    """The operator's watermark before this epoch and now (ms), and the clock (ms)."""

    before: int
    now: int
    processing_time: int


@dataclass
class WindowEpoch:
    """``output``: fired results; ``state``: rows to keep (``STATE_COLUMNS``), plus ``NEXT``: the
    watermark at which the row next matters (firing or cleanup; not stored); ``late``: the late
    rows (None without a side output)."""

    output: Any
    state: Any
    late: Any


def event_time_millis(df: Any, column: str, where: str) -> Any:
    """Column of ``column`` as epoch ms (one analysis round trip for its type).

    Raises:
        OperatorException (non-recoverable): the column is missing or not a timestamp / integer.
    """
    from pyspark.sql import functions as F

    fields = {f.name: f.dataType for f in df.schema.fields}
    if column not in fields:
        raise OperatorException(
            f"{where}: the event-time column '{column}' is not in the input (columns: "
            f"{', '.join(fields)}); keep it in every select between "
            "assign_timestamps_and_watermarks and this operator", non_recoverable=True)
    kind = fields[column].typeName()
    if kind in ("timestamp", "timestamp_ntz"):
        return F.unix_millis(F.col(column).cast("timestamp"))
    if kind in ("long", "integer", "short", "byte"):
        return F.col(column).cast("long")
    raise OperatorException(
        f"{where}: the event-time column '{column}' is a {fields[column].simpleString()}; event "
        "time needs a TIMESTAMP column or an integral count of epoch milliseconds",
        non_recoverable=True)


def _assign(df: Any, spec: WindowSpec, columns: list[str]) -> Any:
    """Rows (``df``'s ``columns``) with ``__ws``/``__we`` (tumbling, sliding) or both null
    (sessions get them in ``_sessions``)."""
    from pyspark.sql import functions as F

    a = spec.assigner
    if a.kind == "session":
        return with_columns(df, columns, {WS: F.lit(None).cast("long"),
                                          WE: F.lit(None).cast("long")})
    last_start = F.col(T) - F.pmod(F.col(T) - F.lit(a.offset_ms), F.lit(a.slide_ms))
    if a.kind == "sliding" and a.size_ms > a.slide_ms:
        n = a.size_ms // a.slide_ms
        df = with_columns(df, columns, {"__i": F.explode(F.sequence(F.lit(0), F.lit(n - 1)))})
        start = last_start - F.col("__i") * F.lit(a.slide_ms)  # "__i" is not kept
        return with_columns(df, columns, {WS: start, WE: start + F.lit(a.size_ms)})
    return with_columns(df, columns, {WS: last_start, WE: last_start + F.lit(a.size_ms)})


def _last_end(spec: WindowSpec) -> Any:
    """A row's last window end (its own window for sessions)."""
    from pyspark.sql import functions as F

    a = spec.assigner
    if a.kind == "session":
        return F.col(T) + F.lit(a.size_ms)
    return F.col(T) - F.pmod(F.col(T) - F.lit(a.offset_ms), F.lit(a.slide_ms)) + F.lit(a.size_ms)


def _sessions(df: Any, spec: WindowSpec) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    gap = spec.assigner.size_ms
    by_time = Window.partitionBy(*spec.keys).orderBy(T)
    starts = df.withColumn("__prev", F.lag(T).over(by_time)).withColumn(
        "__start", (F.col("__prev").isNull() | (F.col(T) - F.col("__prev") >= F.lit(gap)))
        .cast("long"))
    sid = starts.withColumn("__sid", F.sum("__start").over(
        by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    session = Window.partitionBy(*spec.keys, "__sid")
    return (sid.withColumn(WS, F.min(T).over(session))
            .withColumn(WE, F.max(T).over(session) + F.lit(gap))
            .drop("__prev", "__start", "__sid"))


def _epoch_times(spark: Any, times: EpochTimes) -> Any:
    """A one-row relation of the epoch's times (``__before``, ``__now``, ``__clock``: ms).

    The plans of every epoch read their times from it instead of literals: Spark's generated
    code inlines a BIGINT literal, so a literal watermark would make each epoch's filters and
    aggregation a new Java class to compile (Janino) and JIT-compile, tens of them a minute for
    a busy window operator; with the times as data, every epoch reuses the classes compiled for
    the first.
    """
    table = pa.table({BEFORE: pa.array([times.before], pa.int64()),
                      NOW: pa.array([times.now], pa.int64()),
                      CLOCK: pa.array([times.processing_time], pa.int64())})
    return spark.createDataFrame(table)


def window_epoch(spark: Any, new: Any, state: Any, spec: WindowSpec, times: EpochTimes,
                 input_ddl: str, time_millis: Any = None,
                 agg_names: AggNames | None = None) -> WindowEpoch:
    """One epoch of a window operator (see the module docstring).

    Args:
        new: the epoch's rows (the operator's input columns).
        state: the state table (input columns + ``STATE_COLUMNS``) or None.
        input_ddl: DDL of the input columns (reduce results keep them).
        time_millis: the rows' event time in ms (``event_time_millis``, resolved once by the
            caller); None for processing-time windows.
        agg_names: an ``agg`` window's key and aggregate column names (``agg_output_names``).

    Every column is named in ``select`` projections (``connect_plans``): no plan step makes the
    Spark Connect server analyze its input again.

    Raises:
        ValueError: an ``agg`` window without ``aggregate_names``.
    """
    from pyspark.sql import functions as F

    names = list(ddl_field_types(input_ddl))
    lateness = F.lit(spec.allowed_lateness_ms).cast("long")
    epoch = F.broadcast(_epoch_times(spark, times))
    before, now = F.col(BEFORE), F.col(NOW)
    columns = [*names, *TIME_COLUMNS]
    rows = with_columns(new.crossJoin(epoch), columns,
                        {T: time_millis if spec.assigner.event_time else F.col(CLOCK)})
    columns.append(T)
    is_late = _last_end(spec) - 1 + lateness <= before
    late = select_except(rows.filter(is_late), names, ()) if spec.late_tag else None
    rows = _assign(rows.filter(~is_late), spec, columns)
    columns += [WS, WE]
    rows = with_columns(rows, columns, {NEW: F.lit(True)})
    columns.append(NEW)
    if spec.assigner.kind == "sliding":  # drop the late windows of a row that has on-time ones
        rows = rows.filter(F.col(WE) - 1 + lateness > before)
    if state is not None:
        state_rows = with_columns(state, [*names, *STATE_COLUMNS], {NEW: F.lit(False)})
        rows = rows.unionByName(state_rows.crossJoin(epoch))
    if spec.assigner.kind == "session":
        rows = _sessions(select_except(rows, columns, (WS, WE)), spec)
    fires = (F.col(WE) - 1 <= now) & ((F.col(WE) - 1 > before) | F.col("__has_new"))
    next_time = F.when(F.col(WE) - 1 > now, F.col(WE) - 1).otherwise(F.col(WE) - 1 + lateness)
    keep = with_columns(rows.filter(F.col(WE) - 1 + lateness > now),
                        [*names, *STATE_COLUMNS], {NEXT: next_time})
    group = [*spec.keys, WS, WE, *TIME_COLUMNS]  # the times are one value per epoch
    if spec.function == "agg":
        if agg_names is None:
            raise ValueError("an agg window needs its agg_output_names")
        fired = (rows.groupBy(*group).agg(*spec.aggregates, F.max(NEW).alias("__has_new"))
                 .filter(fires))
        output = _window_columns(fired, [*agg_names.keys, WS, WE, *agg_names.aggregates])
    else:
        windows = rows.groupBy(*group).agg(F.max(NEW).alias("__has_new")).filter(fires)
        members = select_except(rows.join(windows.select(*group), on=group, how="left_semi"),
                                [*names, T, WS, WE, NEW], ())
        output = _apply_function(spark, members, spec, input_ddl, times)
    return WindowEpoch(output, keep, late)


@dataclass(frozen=True)
class AggNames:
    """The output column names of an ``agg`` window's keys and aggregates, as Spark names them
    (a key given as ```a.b``` is the column ``a.b``)."""

    keys: tuple[str, ...]
    aggregates: tuple[str, ...]


def agg_output_names(df: Any, spec: WindowSpec) -> AggNames:
    """The names of an ``agg`` window's key and aggregate columns over input ``df`` (one analysis
    round trip; the caller keeps them for the operator's later epochs)."""
    columns = df.groupBy(*spec.keys).agg(*spec.aggregates).columns
    return AggNames(tuple(columns[:len(spec.keys)]), tuple(columns[len(spec.keys):]))


def _window_columns(df: Any, columns: list[str]) -> Any:
    """``df`` (``columns``) with ``__ws``/``__we`` as TIMESTAMP ``window_start``/``window_end``
    in their place, in one projection."""
    from pyspark.sql import functions as F

    renamed = {WS: "window_start", WE: "window_end"}
    return df.select(*[F.timestamp_millis(F.col(c)).alias(renamed[c]) if c in renamed
                       else col(c) for c in columns])


def _apply_function(spark: Any, members: Any, spec: WindowSpec, input_ddl: str,
                    times: EpochTimes) -> Any:
    assert spec.fn is not None
    group = [*spec.keys, WS, WE]
    if spec.function == "reduce":
        ddl = f"{input_ddl}, `{WS}` bigint, `{WE}` bigint"
        struct = parse_ddl(spark, ddl)
        fn = _reduce_window(spec.fn.name, spec.fn.payload, arrow_schema(struct))
        return _window_columns(members.groupBy(*group).applyInArrow(fn, struct),
                               [*ddl_field_types(input_ddl), WS, WE])
    struct = parse_ddl(spark, spec.output_schema)
    fn = _process_window(spec.fn.name, spec.fn.payload, arrow_schema(struct), len(spec.keys),
                         times.now)
    return members.groupBy(*group).applyInArrow(fn, struct)


def _data_rows(table: pa.Table) -> list[Any]:
    """The window's rows in event-time order, without the internal columns."""
    table = table.sort_by(T)
    return _rows(table.drop_columns([c for c in (T, WS, WE, NEW) if c in table.column_names]))


def _reduce_window(name: str, payload: bytes, out: pa.Schema) -> Any:
    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        from pyspark.sql import Row

        user = _load(name, payload)
        rows = _data_rows(table)
        data_names = out.names[:-2]
        row_cls = Row(*data_names)
        acc = rows[0]
        for row in rows[1:]:
            acc = row_cls(*_values(user(acc, row), data_names))
        ws, we = (k.as_py() if hasattr(k, "as_py") else k for k in key[-2:])
        return pa.Table.from_batches([_to_batch([[*_values(acc, data_names), ws, we]], out)])

    return run


class _WindowContext:
    def __init__(self, start: int, end: int, watermark: int) -> None:
        self._window = (start, end)
        self._watermark = watermark

    def window(self) -> Any:
        from flintlock.api.windows import TimeWindow

        return TimeWindow(*self._window)

    def current_watermark(self) -> int:
        return self._watermark


def _process_window(name: str, payload: bytes, out: pa.Schema, n_keys: int, watermark: int) -> Any:
    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        user = _load(name, payload, iterate=True)
        values = [k.as_py() if hasattr(k, "as_py") else k for k in key]
        user_key = values[0] if n_keys == 1 else tuple(values[:n_keys])
        context = _WindowContext(values[-2], values[-1], watermark)
        return pa.Table.from_batches([_to_batch(user(user_key, context, _data_rows(table)), out)])

    return run


def input_ddl_of(df: Any) -> str:
    """The DDL of ``df``'s columns (one analysis round trip)."""
    return struct_to_ddl(df.schema)
