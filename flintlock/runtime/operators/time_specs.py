"""Operator descriptors of event time, windows and keyed state (pure data, like ``specs``).

- ``WatermarkAssignerSpec``: ``assign_timestamps_and_watermarks``; passes rows through (adding
  ``rowtime`` when a timestamp assigner function is used) and makes the chain's output watermark
  ``max event time seen - out_of_orderness_ms - 1``.
- ``WindowSpec``: ``key_by(...).window(assigner)`` + ``agg`` / ``reduce`` / ``process``; keeps the
  rows of windows not yet fired (and within allowed lateness) as keyed state.
- ``SideOutputSpec``: the rows a chained predecessor sent to side output ``tag`` (late data).
- ``StatefulProcessSpec``: ``key_by(...).process(KeyedProcessFunction)`` with keyed state and
  timers.

Times are epoch milliseconds; ``time_column`` is the event-time column (TIMESTAMP or BIGINT ms)
set by the upstream watermark assigner, None when the stream has no event time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flintlock.runtime.operators.specs import SerializedFunction

__all__ = ["TIME_SPECS", "SideOutputSpec", "StatefulProcessSpec", "WatermarkAssignerSpec",
           "WindowSpec", "state_kind"]


@dataclass(frozen=True)
class WatermarkAssignerSpec:
    """Attributes: ``time_column`` (or None with ``fn``: ``fn(row, previous) -> ms`` adds
    ``rowtime``), ``out_of_orderness_ms`` (None: no watermarks), ``idleness_ms``."""

    time_column: str | None
    out_of_orderness_ms: int | None
    idleness_ms: int | None = None
    fn: SerializedFunction | None = None


@dataclass(frozen=True)
class WindowSpec:
    """A keyed window operator.

    Attributes:
        keys: key columns.
        assigner: a ``flintlock.api.windows.WindowAssigner``.
        time_column: event-time column (event-time assigners), None for processing time.
        function: ``"agg"`` (``aggregates``), ``"reduce"`` or ``"process"`` (``fn``).
        aggregates: Spark aggregate Columns (``agg``).
        fn: the reduce function or ``ProcessWindowFunction``.
        output_schema: DDL of ``process`` results ("" otherwise).
        allowed_lateness_ms: how long fired windows keep their rows for late records.
        late_tag: side output tag of records too late for every window, or None (dropped).
    """

    keys: tuple[str, ...]
    assigner: Any
    time_column: str | None
    function: str
    aggregates: tuple[Any, ...] = ()
    fn: SerializedFunction | None = None
    output_schema: str = ""
    allowed_lateness_ms: int = 0
    late_tag: str | None = None


@dataclass(frozen=True)
class SideOutputSpec:
    """The side output ``tag`` of the chained input operator."""

    tag: str


@dataclass(frozen=True)
class StatefulProcessSpec:
    """``KeyedProcessFunction`` with state and timers (``fn`` pickles the function object)."""

    keys: tuple[str, ...]
    fn: SerializedFunction
    output_schema: str
    time_column: str | None = None


TIME_SPECS = (WatermarkAssignerSpec, WindowSpec, SideOutputSpec, StatefulProcessSpec)


def state_kind(spec: Any) -> str:
    """What kind of state an operator keeps in checkpoints ("" for none): ``"window"`` (the rows
    of unfired windows), ``"keyed-process"`` (a ``KeyedProcessFunction``'s keyed state and
    timers) or ``"watermarks"`` (an assigner's highest event time). A savepoint's state is only
    restored into an operator of the same kind (Flink checks the state's type and serializers
    when a restored operator registers it)."""
    if isinstance(spec, WindowSpec):
        return "window"
    if isinstance(spec, StatefulProcessSpec):
        return "keyed-process"
    if isinstance(spec, WatermarkAssignerSpec):
        return "watermarks"
    return ""
