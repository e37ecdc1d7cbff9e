"""nycflights13 as an event-time stream: departures and mean departure delay per origin airport
in 1-hour tumbling windows; flights reported too late for their window go to a side output.

Flights are delivered in the order they actually departed (``FlightReplay(order="actual")``) but
windowed by scheduled departure, with watermarks ``--out-of-orderness`` (default 30 min) behind
the latest scheduled departure seen: a flight delayed by more than that, whose hour has already
been closed, is late.

    python -m examples.streaming.departures --data data [--rate 20000] [--limit N] [--output DIR]

Outputs (Parquet through ``FileSink``): ``<output>/hourly`` (origin, window_start, window_end,
departures, mean_dep_delay) and ``<output>/late`` (the late flights). Every departed flight is
counted once, in its window or in ``late``; ``REFERENCE_SQL`` is the batch answer over the same
flights.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from examples.streaming.flight_replay import add_replay_arguments, replay_source

# DuckDB over the replayed flights (relation ``flights``: ``flight_replay.replay_table``, times in
# UTC): departures and mean delay per origin and scheduled hour.
REFERENCE_SQL = """
SELECT origin, time_bucket(INTERVAL 1 HOUR, sched_dep) AS window_start,
       count(*) AS departures, avg(dep_delay) AS mean_dep_delay
FROM flights
GROUP BY ALL
"""


def build(env: Any, data_dir: str, *, rate: int | None = 20_000, limit: int | None = None,
          out_of_orderness: datetime.timedelta = datetime.timedelta(minutes=30),
          replayed: Callable[[Any], Any] | None = None) -> tuple[Any, Any]:
    """(hourly windows stream, late flights stream). ``replayed`` is applied to the replayed
    flights first (the fault-injection runs add a failing map there)."""
    from flintlock.api.watermarks import WatermarkStrategy
    from flintlock.api.windows import OutputTag, TumblingEventTimeWindows

    source = replay_source(data_dir, "actual", rate, limit)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(out_of_orderness)
                .with_timestamp_column("sched_dep"))
    late = OutputTag("late-flights")
    flights = env.from_source(source, "departures")
    if replayed is not None:
        flights = replayed(flights)
    hourly = (flights.assign_timestamps_and_watermarks(strategy)
              .key_by("origin")
              .window(TumblingEventTimeWindows.of(datetime.timedelta(hours=1)))
              .side_output_late_data(late)
              .agg(F.count(F.lit(1)).alias("departures"),
                   F.avg("dep_delay").alias("mean_dep_delay"))
              .name("hourly departures"))
    return hourly, hourly.get_side_output(late)


def main(argv: list[str] | None = None) -> int:
    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.connectors import FileSink

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_replay_arguments(parser, "output/departures")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    hourly, late = build(env, args.data, rate=args.rate or None, limit=args.limit)
    hourly.sink_to(FileSink.parquet(str(Path(args.output) / "hourly")))
    late.sink_to(FileSink.parquet(str(Path(args.output) / "late")))
    result = env.execute("nycflights13 hourly departures")
    if result.net_runtime_ms >= 0:  # not submitted detached (flintlock run -d)
        print(f"hourly departures written to {args.output} in {result.net_runtime_ms / 1000:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
