"""nycflights13 replayed as a stream: a ``DataGeneratorSource`` function yielding departed flights.

``FlightReplay(flights_dir, order)`` is the generator function: position i -> the i-th departed
flight (cancelled ones, with no departure delay, are left out) as
``(flight_id, carrier, origin, dep_delay, sched_dep)`` (``SCHEMA``). Event time is the scheduled
departure (``time_hour`` + ``minute``, UTC). ``order="scheduled"`` delivers flights in event-time
order; ``order="actual"`` delivers each when it actually departed (scheduled + delay), so delayed
flights reach the stream out of order, as reports from the gates would.

The table is read once per Python worker process (Spark reuses its workers) and kept there.
"""

from __future__ import annotations

import datetime
import glob
import os
from typing import Any

SCHEMA = "flight_id long, carrier string, origin string, dep_delay double, sched_dep timestamp"
ORDERS = ("scheduled", "actual")

_tables: dict[tuple[str, str], dict[str, list[Any]]] = {}


def departed_flights(flights_dir: str, order: str = "scheduled") -> dict[str, list[Any]]:
    """The departed flights in delivery order, as columns (cached per process)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    key = (os.path.abspath(flights_dir), order)
    if key not in _tables:
        files = sorted(glob.glob(os.path.join(key[0], "*.parquet")))
        if not files:
            raise FileNotFoundError(f"no Parquet files in {flights_dir} (run python -m examples.data)")
        t = pa.concat_tables(pq.read_table(f, columns=["carrier", "origin", "dep_delay",
                                                       "time_hour", "minute"]) for f in files)
        t = t.append_column("flight_id", pa.array(range(t.num_rows), pa.int64()))
        t = t.filter(pc.is_valid(t.column("dep_delay")))
        hour_ms = pc.cast(pc.cast(t.column("time_hour"), pa.timestamp("ms", "UTC")), pa.int64())
        sched = pc.add(hour_ms, pc.multiply(t.column("minute"), 60_000))
        actual = pc.add(sched, pc.cast(pc.multiply(t.column("dep_delay"), 60_000), pa.int64()))
        t = t.append_column("sched_ms", sched).append_column("actual_ms", actual)
        t = t.sort_by([("sched_ms" if order == "scheduled" else "actual_ms", "ascending"),
                       ("flight_id", "ascending")])
        _tables[key] = {c: t.column(c).to_pylist() for c in
                        ("flight_id", "carrier", "origin", "dep_delay", "sched_ms")}
    return _tables[key]


def replay_table(flights_dir: str, order: str = "scheduled", limit: int | None = None) -> Any:
    """The first ``limit`` replayed flights as a pyarrow Table of ``SCHEMA`` (``sched_dep`` as a
    UTC timestamp): the input of the examples' ``REFERENCE_SQL`` (relation ``flights``)."""
    import pyarrow as pa

    c = departed_flights(flights_dir, order)
    n = len(c["flight_id"]) if limit is None else min(limit, len(c["flight_id"]))
    return pa.table({
        "flight_id": pa.array(c["flight_id"][:n], pa.int64()),
        "carrier": pa.array(c["carrier"][:n], pa.string()),
        "origin": pa.array(c["origin"][:n], pa.string()),
        "dep_delay": pa.array(c["dep_delay"][:n], pa.float64()),
        "sched_dep": pa.array(c["sched_ms"][:n], pa.timestamp("ms")),
    })


def replay_source(data_dir: str, order: str, rate: int | None, limit: int | None) -> Any:
    """A ``DataGeneratorSource`` replaying the first ``limit`` departed flights (all: None) of
    ``<data_dir>/nycflights13/flights`` in ``order`` at ``rate`` flights/s (None: unlimited)."""
    from examples.flights import flights_path
    from flintlock.connectors import DataGeneratorSource, RateLimiterStrategy

    replay = FlightReplay(str(flights_path(data_dir) / "flights"), order=order)
    count = replay.count() if limit is None else min(limit, replay.count())
    return DataGeneratorSource(replay, count,
                               RateLimiterStrategy.per_second(rate) if rate else None, SCHEMA)


def add_replay_arguments(parser: Any, output: str) -> None:
    """The examples' command-line options: ``--data``, ``--rate``, ``--limit``, ``--output``."""
    parser.add_argument("--data", default="data")
    parser.add_argument("--rate", type=int, default=20_000, help="flights per second (0: unlimited)")
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N flights")
    parser.add_argument("--output", default=output)


class FlightReplay:
    """``DataGeneratorSource`` function: index -> the index-th departed flight (``SCHEMA``)."""

    def __init__(self, flights_dir: str, order: str = "scheduled") -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        self.flights_dir = os.path.abspath(flights_dir)
        self.order = order

    def count(self) -> int:
        return len(departed_flights(self.flights_dir, self.order)["flight_id"])

    def __call__(self, i: int) -> tuple[Any, ...]:
        c = departed_flights(self.flights_dir, self.order)
        sched = datetime.datetime.fromtimestamp(c["sched_ms"][i] / 1000, tz=datetime.UTC)
        return (c["flight_id"][i], c["carrier"][i], c["origin"][i], c["dep_delay"][i], sched)
