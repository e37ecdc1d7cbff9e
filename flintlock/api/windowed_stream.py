"""``WindowedStream``: ``key_by(...).window(assigner)`` and what it computes per fired window.

Results (Flink ``WindowedStream``; columns as Flink SQL's window aggregations):

- ``agg(*cols)``: one row per key and fired window: the key columns, ``window_start``,
  ``window_end`` (TIMESTAMP) and the aggregates (Spark Columns or SQL strings).
- ``reduce(fn)``: ``fn(acc_row, row) -> row`` folds the window's rows (event-time order); the
  result row plus ``window_start`` / ``window_end``.
- ``process(ProcessWindowFunction | fn, output_schema)``: ``process(key, context, rows)`` yields
  rows of ``output_schema``; ``context.window()`` is the ``TimeWindow``.

``allowed_lateness(ms)`` keeps fired windows for late rows (each late row re-fires its window with
the updated result); ``side_output_late_data(tag)`` sends rows too late for every window to a side
output read with ``result.get_side_output(tag)``.

Raises ``InvalidProgramException`` for an event-time window on a stream without event time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flintlock.api.columns import to_column
from flintlock.api.durations import Duration, to_millis
from flintlock.api.exceptions import InvalidProgramException
from flintlock.api.functions import ProcessWindowFunction, ReduceFunction, as_callable
from flintlock.api.schema import to_ddl
from flintlock.api.windows import OutputTag, WindowAssigner
from flintlock.runtime.operators.time_specs import WindowSpec

if TYPE_CHECKING:
    from flintlock.api.datastream import DataStream, KeyedStream

__all__ = ["WindowedStream"]


class WindowedStream:
    def __init__(self, keyed: KeyedStream, assigner: WindowAssigner) -> None:
        if not isinstance(assigner, WindowAssigner):
            raise TypeError("window: expected a window assigner such as "
                            f"TumblingEventTimeWindows.of(60_000), got {type(assigner).__name__}")
        self._keyed = keyed
        self._assigner = assigner
        self._lateness_ms = 0
        self._late_tag: str | None = None
        self._time_column: str | None = None
        if assigner.event_time:
            self._time_column = keyed.time_column()
            if self._time_column is None:
                raise InvalidProgramException(
                    f"window({assigner.describe()}): an event-time window needs event time; call "
                    "assign_timestamps_and_watermarks(WatermarkStrategy...with_timestamp_column("
                    "'ts')) before key_by, or use a processing-time window")

    def allowed_lateness(self, lateness: Duration) -> WindowedStream:
        if not self._assigner.event_time:
            raise InvalidProgramException("allowed_lateness applies to event-time windows only")
        self._lateness_ms = to_millis("allowed_lateness", lateness)
        return self

    def side_output_late_data(self, tag: OutputTag) -> WindowedStream:
        if not isinstance(tag, OutputTag):
            raise TypeError(f"side_output_late_data: expected an OutputTag, got {type(tag).__name__}")
        self._late_tag = tag.tag_id
        return self

    def _spec(self, function: str, **kw: Any) -> WindowSpec:
        return WindowSpec(self._keyed.get_keys(), self._assigner, self._time_column, function,
                          allowed_lateness_ms=self._lateness_ms, late_tag=self._late_tag, **kw)

    def _name(self, what: str) -> str:
        return f"Window({self._assigner.describe()}, {what})"

    def agg(self, *cols: Any) -> DataStream:
        if not cols:
            raise ValueError("agg needs at least one aggregate column")
        spec = self._spec("agg", aggregates=tuple(to_column(c, "agg") for c in cols))
        return self._keyed._one_input(self._name("agg"), spec)

    def reduce(self, fn: Any) -> DataStream:
        from flintlock.api.datastream import _pending

        fn = as_callable(fn, ReduceFunction, "reduce")
        return self._keyed._one_input(self._name("reduce"), self._spec("reduce", fn=_pending(fn)),
                                      function=fn)

    def process(self, fn: Any, output_schema: Any) -> DataStream:
        from flintlock.api.datastream import _pending

        fn = as_callable(fn, ProcessWindowFunction, "process")
        spec = self._spec("process", fn=_pending(fn), output_schema=to_ddl(output_schema))
        return self._keyed._one_input(self._name("process"), spec, function=fn)
