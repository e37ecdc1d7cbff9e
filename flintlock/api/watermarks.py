"""Watermark strategies (PyFlink ``pyflink.common.WatermarkStrategy``), time as epoch milliseconds.

A strategy says where a record's event time comes from and how the watermark follows it:

- ``WatermarkStrategy.for_bounded_out_of_orderness(ms)``: watermark = highest event time seen
  - ``ms`` - 1 (Flink ``BoundedOutOfOrdernessWatermarks``).
- ``WatermarkStrategy.for_monotonous_timestamps()``: the same with 0 ms
  (``AscendingTimestampsWatermarks``).
- ``WatermarkStrategy.no_watermarks()``: event time is assigned but the watermark never advances
  before the input ends.
- ``.with_timestamp_column("ts")``: the event time is column ``ts`` (TIMESTAMP, or an integral
  count of epoch milliseconds). flintlock's addition: a column is what Spark code has.
- ``.with_timestamp_assigner(fn)``: ``fn(row, record_timestamp) -> epoch ms`` or a
  ``TimestampAssigner``; the operator adds the event time as a TIMESTAMP column ``rowtime``
  (``ROWTIME_COLUMN``), which later event-time operators read.
- ``.with_idleness(ms)``: a source subtask that produced no records for ``ms`` is marked idle and
  its channels stop holding back the watermark downstream (Flink ``WatermarksWithIdleness``).

Durations are int milliseconds or ``datetime.timedelta``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flintlock.api.durations import Duration, to_millis

__all__ = ["ROWTIME_COLUMN", "TimestampAssigner", "WatermarkStrategy"]

#: the column ``with_timestamp_assigner`` adds (TIMESTAMP)
ROWTIME_COLUMN = "rowtime"


class TimestampAssigner:
    """Extracts a record's event time (Flink ``TimestampAssigner``)."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """The event time of ``value`` in epoch milliseconds (``record_timestamp``: the
        previous assignment, ``-2**63`` when none)."""
        raise NotImplementedError


@dataclass(frozen=True)
class WatermarkStrategy:
    """How event time and watermarks are derived (immutable; ``with_*`` return copies).

    Attributes:
        out_of_orderness_ms: watermark lag behind the highest event time (None: no watermarks).
        timestamp_column: the event-time column, or None until one is given.
        timestamp_assigner: the ``fn(row, record_timestamp)`` callable, or None.
        idleness_ms: idle timeout, or None.
    """

    out_of_orderness_ms: int | None = 0
    timestamp_column: str | None = None
    timestamp_assigner: Any = None
    idleness_ms: int | None = None

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> WatermarkStrategy:
        return WatermarkStrategy(to_millis("max_out_of_orderness", max_out_of_orderness))

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        return WatermarkStrategy(0)

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        return WatermarkStrategy(None)

    def with_timestamp_column(self, column: str) -> WatermarkStrategy:
        if not isinstance(column, str) or not column:
            raise TypeError(f"with_timestamp_column: expected a column name, got {column!r}")
        return dataclasses.replace(self, timestamp_column=column, timestamp_assigner=None)

    def with_timestamp_assigner(self, assigner: Any) -> WatermarkStrategy:
        if isinstance(assigner, TimestampAssigner):
            assigner = assigner.extract_timestamp
        elif not callable(assigner):
            raise TypeError("with_timestamp_assigner: expected a callable(row, record_timestamp) "
                            f"or a TimestampAssigner, got {type(assigner).__name__}")
        return dataclasses.replace(self, timestamp_assigner=assigner, timestamp_column=None)

    def with_idleness(self, idle_timeout: Duration) -> WatermarkStrategy:
        return dataclasses.replace(self, idleness_ms=to_millis("idle_timeout", idle_timeout, 1))
