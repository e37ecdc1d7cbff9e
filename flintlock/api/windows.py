"""Window assigners, ``TimeWindow`` and ``OutputTag`` (PyFlink ``pyflink.datastream.window``).

An assigner puts each record of a keyed stream into windows ``[start, end)`` (epoch ms):

- ``TumblingEventTimeWindows.of(size, offset=0)``: ``start = ts - (ts - offset) mod size``.
- ``SlidingEventTimeWindows.of(size, slide, offset=0)``: every window of ``size`` starting at a
  multiple of ``slide`` (+ offset) that contains ``ts`` (``size / slide`` windows per record).
- ``EventTimeSessionWindows.with_gap(gap)``: a key's records closer than ``gap`` form one window
  ``[first ts, last ts + gap)`` (merging windows).
- ``TumblingProcessingTimeWindows.of(size)``, ``SlidingProcessingTimeWindows.of(size, slide)``:
  the same over the time a record reaches the window operator.

A window fires when the watermark (event time) or the clock (processing time) reaches
``end - 1`` (Flink ``TimeWindow.maxTimestamp()``). Sizes are int ms or ``datetime.timedelta``.
"""

from __future__ import annotations

from dataclasses import dataclass

from flintlock.api.durations import Duration, to_millis

__all__ = [
    "EventTimeSessionWindows",
    "OutputTag",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeWindow",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "WindowAssigner",
]


@dataclass(frozen=True)
class WindowAssigner:
    """What a window operator groups by (see the module docstring).

    Attributes:
        kind: ``"tumbling"``, ``"sliding"`` or ``"session"``.
        size_ms: window size (tumbling, sliding) or gap (session).
        slide_ms: slide (sliding; equal to the size for tumbling).
        offset_ms: alignment offset.
        event_time: event time (True) or processing time.
    """

    kind: str
    size_ms: int
    slide_ms: int
    offset_ms: int = 0
    event_time: bool = True

    def describe(self) -> str:
        time = "EventTime" if self.event_time else "ProcessingTime"
        if self.kind == "session":
            return f"{time}SessionWindows(gap={self.size_ms} ms)"
        if self.kind == "sliding":
            return f"Sliding{time}Windows({self.size_ms} ms, {self.slide_ms} ms)"
        return f"Tumbling{time}Windows({self.size_ms} ms)"


def _tumbling(size: Duration, offset: Duration, event_time: bool) -> WindowAssigner:
    size_ms = to_millis("size", size, 1)
    offset_ms = to_millis("offset", offset) if offset else 0
    if not 0 <= offset_ms < size_ms:
        raise ValueError(f"the window offset must be in [0, size), got {offset_ms} ms for a "
                         f"size of {size_ms} ms")
    return WindowAssigner("tumbling", size_ms, size_ms, offset_ms, event_time)


def _sliding(size: Duration, slide: Duration, offset: Duration, event_time: bool) -> WindowAssigner:
    size_ms, slide_ms = to_millis("size", size, 1), to_millis("slide", slide, 1)
    offset_ms = to_millis("offset", offset) if offset else 0
    if not 0 <= offset_ms < slide_ms:
        raise ValueError(f"the window offset must be in [0, slide), got {offset_ms} ms for a "
                         f"slide of {slide_ms} ms")
    if size_ms % slide_ms:
        raise ValueError(f"a sliding window's size ({size_ms} ms) must be a multiple of its "
                         f"slide ({slide_ms} ms)")
    return WindowAssigner("sliding", size_ms, slide_ms, offset_ms, event_time)


class TumblingEventTimeWindows:
    @staticmethod
    def of(size: Duration, offset: Duration = 0) -> WindowAssigner:
        return _tumbling(size, offset, True)


class SlidingEventTimeWindows:
    @staticmethod
    def of(size: Duration, slide: Duration, offset: Duration = 0) -> WindowAssigner:
        return _sliding(size, slide, offset, True)


class EventTimeSessionWindows:
    @staticmethod
    def with_gap(gap: Duration) -> WindowAssigner:
        gap_ms = to_millis("gap", gap, 1)
        return WindowAssigner("session", gap_ms, gap_ms, 0, True)


class TumblingProcessingTimeWindows:
    @staticmethod
    def of(size: Duration, offset: Duration = 0) -> WindowAssigner:
        return _tumbling(size, offset, False)


class SlidingProcessingTimeWindows:
    @staticmethod
    def of(size: Duration, slide: Duration, offset: Duration = 0) -> WindowAssigner:
        return _sliding(size, slide, offset, False)


@dataclass(frozen=True)
class TimeWindow:
    """A window ``[start, end)`` in epoch ms (what ``ProcessWindowFunction`` sees)."""

    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1


@dataclass(frozen=True)
class OutputTag:
    """Names a side output (Flink ``OutputTag``); ``get_side_output(tag)`` reads it."""

    tag_id: str

    def __post_init__(self) -> None:
        if not isinstance(self.tag_id, str) or not self.tag_id:
            raise ValueError(f"OutputTag needs a non-empty name, got {self.tag_id!r}")
