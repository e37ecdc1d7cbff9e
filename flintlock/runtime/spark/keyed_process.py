"""``KeyedProcessFunction`` with keyed state and timers, one epoch at a time on Spark.

The operator's state table holds one row per key that has state or timers: the key columns
(``__k0``, ``__k1``, ...), ``__state`` (the key's state values and timers, cloudpickled by the
operator's own Spark worker), ``__etimer`` / ``__ptimer`` (its earliest event-time and
processing-time timer, ms). One epoch (``process_epoch``) is one
``groupBy(keys).cogroup(state.groupBy(keys)).applyInArrow`` over the epoch's rows and the state:
per key, in Spark's Python worker, ``process_element`` runs for each new row in event-time order
(when the stream has event time), and every event-time timer ``<= watermark`` fires
(``on_timer``) after the rows at or before its time and before the rows after it, as in an
in-order stream; then every processing-time timer ``<= processing time`` fires. Timers
registered while firing fire in the same epoch when due. The result has a ``_kind`` column:
0 = an output row (the user's columns), 1 = the key's new state row.

Follows Flink's ``KeyedProcessOperator`` with a ``HeapKeyedStateBackend`` per epoch; the BATCH
runtime runs the same function with no state, watermark and processing time at the maximum
(Flink fires all timers at the end of input in BATCH execution).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cloudpickle
import pyarrow as pa

from flintlock.api.state import RuntimeContext, TimeDomain, TimerService, _KeyScope
from flintlock.runtime.operators.time_specs import StatefulProcessSpec
from flintlock.runtime.spark.connect_plans import field_name
from flintlock.runtime.spark.python_ops import UserFunctionError, _rows, _values
from flintlock.runtime.spark.schema import ddl_field_types

__all__ = ["KIND", "combined_ddl", "key_column_names", "process_epoch", "state_ddl"]

KIND = "_kind"
T = "__t"


def _key_columns(n: int) -> list[str]:
    return [f"__k{i}" for i in range(n)]


def key_column_names(column: str) -> str:
    """A state table column as a user knows it: ``__k0`` -> ``key 1``; others unchanged."""
    if column.startswith("__k") and column[3:].isdigit():
        return f"key {int(column[3:]) + 1}"
    return column


def state_ddl(spec: StatefulProcessSpec, input_ddl: str) -> str:
    """DDL of the state table: key columns, ``__state``, ``__etimer``, ``__ptimer``."""
    types = ddl_field_types(input_ddl)
    keys = [f"`{c}` {types[field_name(k)]}" for c, k in zip(_key_columns(len(spec.keys)),
                                                              spec.keys, strict=True)]
    return ", ".join([*keys, "`__state` binary", "`__etimer` bigint", "`__ptimer` bigint"])


def combined_ddl(spec: StatefulProcessSpec, input_ddl: str) -> str:
    return f"`{KIND}` int, {spec.output_schema}, {state_ddl(spec, input_ddl)}"


class _Context:
    """``ctx`` of ``process_element`` / ``on_timer``."""

    def __init__(self, timers: TimerService) -> None:
        self._timers = timers
        self.key: Any = None
        self.ts: int | None = None
        self.domain: str | None = None

    def get_current_key(self) -> Any:
        return self.key

    def timestamp(self) -> int | None:
        return self.ts

    def timer_service(self) -> TimerService:
        return self._timers

    def time_domain(self) -> str | None:
        return self.domain


def _process_fn(spec: StatefulProcessSpec, out: pa.Schema, watermark: int, now: int,
                n_user: int, task: tuple[str, int, int], fire_until: int) -> Any:
    name, payload = spec.fn.name, spec.fn.payload
    n_keys = len(spec.keys)
    user_names = out.names[1:1 + n_user]
    loaded: dict[str, Any] = {}

    def call(what: str, method: Any, *args: Any) -> list[Any]:
        try:
            result = method(*args)
            return list(result) if result is not None else []
        except Exception as exc:
            raise UserFunctionError(
                f"user function '{name}' failed in {what}: {type(exc).__name__}: {exc}") from exc

    def setup() -> tuple[Any, _KeyScope, TimerService]:
        if not loaded:
            try:
                fn = cloudpickle.loads(payload)
            except Exception as exc:
                raise UserFunctionError(f"user function '{name}' cannot be unpickled in the Spark "
                                        f"Python worker: {exc}") from exc
            scope, timers = _KeyScope(), TimerService(watermark, now)
            call("open", fn.open, RuntimeContext(scope, *task))
            loaded.update(fn=fn, scope=scope, timers=timers)
        return loaded["fn"], loaded["scope"], loaded["timers"]

    def run(key: tuple[Any, ...], new: pa.Table, state: pa.Table) -> pa.Table:
        fn, scope, timers = setup()
        values = [k.as_py() if hasattr(k, "as_py") else k for k in key]
        ctx = _Context(timers)
        ctx.key = values[0] if n_keys == 1 else tuple(values)
        saved = cloudpickle.loads(state.column("__state")[0].as_py()) if state.num_rows else {}
        scope.load(saved.get("values", {}), saved.get("kinds", {}))
        timers.event_timers = set(saved.get("event", ()))
        timers.processing_timers = set(saved.get("processing", ()))
        results: list[Any] = []
        try:
            if T in new.column_names:
                new = new.sort_by(T)
                times = new.column(T).to_pylist()
                new = new.drop_columns([T])
            else:
                times = [None] * new.num_rows
            def fire(domain: str, pending: set[int], limit: int) -> None:
                while pending and min(pending) <= limit:
                    t = min(pending)
                    pending.discard(t)
                    ctx.ts, ctx.domain = t, domain
                    results.extend(call("on_timer", fn.on_timer, t, ctx))

            for row, t in zip(_rows(new), times, strict=True):
                if t is not None:  # timers before the first row after them (event-time order)
                    fire(TimeDomain.EVENT_TIME, timers.event_timers, min(watermark, t - 1))
                ctx.ts, ctx.domain = t, None
                results.extend(call("process_element", fn.process_element, row, ctx))
            fire(TimeDomain.EVENT_TIME, timers.event_timers, watermark)
            fire(TimeDomain.PROCESSING_TIME, timers.processing_timers, fire_until)
            rows = [[0, *_values(r, user_names), *([None] * (n_keys + 3))] for r in results]
            assert scope.values is not None  # scope.load() set it; only the finally clears it
            if scope.values or timers.event_timers or timers.processing_timers:
                blob = cloudpickle.dumps({"values": scope.values, "kinds": {
                                              n: scope.kinds.get(n) or scope.restored_kinds.get(n, "")
                                              for n in scope.values},
                                          "event": sorted(timers.event_timers),
                                          "processing": sorted(timers.processing_timers)})
                rows.append([1, *([None] * n_user), *values, blob,
                             min(timers.event_timers, default=None),
                             min(timers.processing_timers, default=None)])
        finally:
            scope.values = None
            timers.event_timers = timers.processing_timers = None
        columns: list[Sequence[Any]] = (list(zip(*rows, strict=True)) if rows
                                         else [[] for _ in out.names])
        arrays = [pa.array(list(c), type=f.type) for c, f in zip(columns, out, strict=True)]
        return pa.Table.from_arrays(arrays, schema=out)

    return run


def process_epoch(spark: Any, new: Any, state: Any, spec: StatefulProcessSpec, input_ddl: str,
                  watermark: int, processing_time: int, task: tuple[str, int, int],
                  time_millis: Any = None, fire_processing_until: int | None = None) -> Any:
    """The combined result DataFrame (``_kind`` 0 = output rows, 1 = new state rows).

    Args:
        new: the epoch's rows; ``time_millis`` their event time in ms (a Column) or None.
        state: the state table (``state_ddl``) or None.
        input_ddl: DDL of ``new``'s columns.
        task: (task name, subtask index, parallelism) for ``RuntimeContext``.
        fire_processing_until: processing-time timers up to this fire (default: the clock;
            the maximum at the end of input).
    """
    from flintlock.runtime.spark.schema import arrow_schema, parse_ddl

    struct = parse_ddl(spark, combined_ddl(spec, input_ddl))
    n_user = len(parse_ddl(spark, spec.output_schema).fields)
    if state is None:
        state = spark.createDataFrame([], schema=state_ddl(spec, input_ddl))
    if time_millis is not None:
        new = new.withColumn(T, time_millis)
    until = processing_time if fire_processing_until is None else fire_processing_until
    fn = _process_fn(spec, arrow_schema(struct), watermark, processing_time, n_user, task, until)
    keys = _key_columns(len(spec.keys))
    return new.groupBy(*spec.keys).cogroup(state.groupBy(*keys)).applyInArrow(fn, struct)
