"""The jobs of the exactly-once fault-injection runs, and the check of their committed output.

Each job is a checkpointed STREAMING program whose correct output is known without running it,
with a ``fail_at_records`` map right after its source (each listed record fails its task once):

- ``running-counts``: a keyed ``RunningCount`` (``ValueState``) over generated rows
  ``(id, k = "k<id % 5>")`` from one in-order source subtask: exactly ``(k, 1..n_k)`` per key;
- ``windows``: generated rows ``(id, k = "k<id % 3>", ts = 10 * id)`` from two source subtasks,
  monotonous event time, 1 s tumbling windows per key with ``count`` and ``sum(id)``: one row per
  key and window, in closed form;
- ``carrier-alerts`` (``examples.streaming.carrier_alerts``, ``ListState`` and event-time
  timers): every alert ``(carrier, sched_dep, delayed_in_30_min)`` once, as DuckDB computes it;
- ``departures`` (``examples.streaming.departures``, event-time windows with a late side output,
  two source subtasks): every replayed flight counted once, in its hourly window or as late.

Submitted to a cluster as a program (``flintlock run ... fault_jobs.py JOB OUT --records N
--rate R --fail-at 12,345 --failures DIR [--data DIR]``; checkpointing and restart settings come as
``-D``); ``problems(job, out, records, data)`` lists what is wrong with the committed output
(empty: exactly once).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a program file by ``flintlock run``
    sys.path.insert(0, str(REPO))

JOBS = ("running-counts", "windows", "carrier-alerts", "departures")
COUNT_KEYS, WINDOW_KEYS, WINDOW_MS = 5, 3, 1000


def count_event(i: int) -> tuple[int, str]:
    return (i, f"k{i % COUNT_KEYS}")


def window_event(i: int) -> tuple[int, str, int]:
    return (i, f"k{i % WINDOW_KEYS}", 10 * i)


def _passthrough(row: Any) -> Any:
    return row


def _flight_ids(data: str, order: str, records: int, indices: list[int]) -> list[int]:
    from examples.flights import flights_path
    from examples.streaming.flight_replay import departed_flights

    ids = departed_flights(str(flights_path(data) / "flights"), order)["flight_id"]
    return [int(ids[i]) for i in indices if i < records]


def build(env: Any, job: str, out: Path, *, records: int, rate: int, fail_at: list[int],
          failures: str, data: str) -> None:
    """Add ``job``'s pipeline, with its failing map and FileSink(s) under ``out``, to ``env``."""
    from pyspark.sql import functions as F

    from flintlock.api.watermarks import WatermarkStrategy
    from flintlock.api.windows import TumblingEventTimeWindows
    from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy
    from flintlock.testing.faults import fail_at_records
    from flintlock.testing.state_functions import RunningCount

    per_second = RateLimiterStrategy.per_second(rate)
    if job == "running-counts":
        schema = "id long, k string"
        failing = fail_at_records(_passthrough, records=fail_at, directory=failures)
        (env.from_source(DataGeneratorSource(count_event, records, per_second, schema))
         .set_parallelism(1).uid("rows")
         .map(failing, schema).set_parallelism(1)
         .key_by("k").process(RunningCount(), "k string, n long").uid("counts")
         .sink_to(FileSink.parquet(str(out))))
    elif job == "windows":
        schema = "id long, k string, ts long"
        failing = fail_at_records(_passthrough, records=fail_at, directory=failures)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
        (env.from_source(DataGeneratorSource(window_event, records, per_second, schema)).uid("rows")
         .map(failing, schema).assign_timestamps_and_watermarks(strategy)
         .key_by("k").window(TumblingEventTimeWindows.of(WINDOW_MS))
         .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s")).uid("windows")
         .sink_to(FileSink.parquet(str(out))))
    elif job in ("carrier-alerts", "departures"):
        from examples.streaming import carrier_alerts, departures
        from examples.streaming.flight_replay import SCHEMA

        order = "scheduled" if job == "carrier-alerts" else "actual"
        failing = fail_at_records(_passthrough, directory=failures, field="flight_id",
                                  records=_flight_ids(data, order, records, fail_at))
        if job == "carrier-alerts":
            alerts = carrier_alerts.build(env, data, rate=rate, limit=records, replayed=lambda s: (
                s.map(failing, SCHEMA).set_parallelism(1)))
            alerts.sink_to(FileSink.parquet(str(out)))
        else:
            hourly, late = departures.build(env, data, rate=rate, limit=records,
                                            replayed=lambda s: s.map(failing, SCHEMA))
            hourly.sink_to(FileSink.parquet(str(out / "hourly")))
            late.sink_to(FileSink.parquet(str(out / "late")))
    else:
        raise ValueError(f"unknown job {job!r}; one of {JOBS}")


def _rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist() if any(path.glob("part-*")) else []


def _ms(ts: Any) -> int:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=datetime.UTC)
    return int(ts.timestamp() * 1000)


def _differences(what: str, got: Counter[Any], expected: Counter[Any]) -> list[str]:
    missing, extra = expected - got, got - expected
    out = []
    if missing:
        out.append(f"{what}: {sum(missing.values())} missing, e.g. {sorted(missing)[:3]}")
    if extra:
        out.append(f"{what}: {sum(extra.values())} extra (duplicated or wrong), "
                   f"e.g. {sorted(extra)[:3]}")
    return out


def expected_windows(records: int) -> Counter[tuple[str, int, int, int]]:
    acc: dict[tuple[str, int], list[int]] = {}
    for i in range(records):
        _, k, ts = window_event(i)
        n_s = acc.setdefault((k, ts - ts % WINDOW_MS), [0, 0])
        n_s[0] += 1
        n_s[1] += i
    return Counter((k, w, n, s) for (k, w), (n, s) in acc.items())


#: DuckDB over the replayed flights (``flights``): each delayed flight's alert as the function
#: emits it, counting the carrier's delayed flights within 30 minutes before it, up to itself in
#: replay order (scheduled time, then flight id)
ALERTS_SQL = """
WITH delayed AS (SELECT flight_id, carrier, sched_dep FROM flights WHERE dep_delay > 15)
SELECT a.carrier, a.sched_dep, count(*) AS n
FROM delayed a JOIN delayed b ON a.carrier = b.carrier
  AND b.sched_dep >= a.sched_dep - INTERVAL 30 MINUTE
  AND (b.sched_dep < a.sched_dep OR (b.sched_dep = a.sched_dep AND b.flight_id <= a.flight_id))
GROUP BY a.flight_id, a.carrier, a.sched_dep HAVING count(*) >= 3
"""


def problems(job: str, out: Path, records: int, data: str = "data") -> list[str]:
    """What is wrong with ``job``'s committed output under ``out`` (empty: exactly once)."""
    if job == "running-counts":
        got = Counter((r["k"], r["n"]) for r in _rows(out))
        per_key = Counter(count_event(i)[1] for i in range(records))
        return _differences("running counts", got, Counter(
            (k, n) for k, total in per_key.items() for n in range(1, total + 1)))
    if job == "windows":
        got = Counter((r["k"], _ms(r["window_start"]), r["n"], r["s"]) for r in _rows(out))
        return _differences("windows", got, expected_windows(records))
    import duckdb

    from examples.flights import flights_path
    from examples.streaming.flight_replay import replay_table

    order = "scheduled" if job == "carrier-alerts" else "actual"
    flights = replay_table(str(flights_path(data) / "flights"), order, records)
    con = duckdb.connect()
    con.register("flights", flights)
    if job == "carrier-alerts":
        expected = Counter((c, _ms(t), n) for c, t, n in con.execute(ALERTS_SQL).fetchall())
        got = Counter((r["carrier"], _ms(r["sched_dep"]), r["delayed_in_30_min"])
                      for r in _rows(out))
        return _differences("alerts", got, expected)
    if job == "departures":
        hour = 3_600_000
        expected = Counter((o, _ms(t) // hour * hour) for o, t in con.execute(
            "SELECT origin, sched_dep FROM flights").fetchall())
        hourly, late = _rows(out / "hourly"), _rows(out / "late")
        found = []
        windows = Counter((r["origin"], _ms(r["window_start"])) for r in hourly)
        if windows and max(windows.values()) > 1:
            found.append(f"windows written twice: {[w for w, n in windows.items() if n > 1][:3]}")
        late_ids = Counter(r["flight_id"] for r in late)
        if late_ids and max(late_ids.values()) > 1:
            found.append(f"late flights written twice: {[f for f, n in late_ids.items() if n > 1][:3]}")
        got: Counter[tuple[str, int]] = Counter()
        for r in hourly:
            got[(r["origin"], _ms(r["window_start"]))] += r["departures"]
        got.update((r["origin"], _ms(r["sched_dep"]) // hour * hour) for r in late)
        return found + _differences("departures per origin and hour (windows + late)", got, expected)
    raise ValueError(f"unknown job {job!r}; one of {JOBS}")


def main(argv: list[str] | None = None) -> int:
    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("job", choices=JOBS)
    parser.add_argument("out")
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--rate", type=int, required=True, help="records per second")
    parser.add_argument("--fail-at", default="", help="comma-separated record indices")
    parser.add_argument("--failures", required=True, help="directory of the failure markers")
    parser.add_argument("--data", default=str(REPO / "data"))
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(2)
    fail_at = [int(r) for r in args.fail_at.split(",") if r]
    build(env, args.job, Path(args.out), records=args.records, rate=args.rate, fail_at=fail_at,
          failures=args.failures, data=args.data)
    env.execute(f"exactly once under faults: {args.job}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
