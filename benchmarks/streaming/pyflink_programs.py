"""Apache Flink (PyFlink Table API / SQL, streaming mode) running the streaming workloads.

Runs in the PyFlink venv (``benchmarks.pyflink_env``), never in flintlock's: it imports only
pyflink, pyarrow, the standard library and ``benchmarks.streaming.flights``::

    <pyflink-venv>/bin/python benchmarks/streaming/pyflink_programs.py events|flights \\
        OUT RATE SECONDS [FLIGHTS_DIR]

A local Flink (the MiniCluster in the PyFlink gateway JVM) at parallelism 2, event rows
generated at ``RATE`` per second for ``SECONDS`` (the job ends when the bounded source has
generated ``RATE * SECONDS`` rows, as flintlock's does), output as JSON lines under ``OUT``.

**Source.** The SQL ``datagen`` connector: ``rows-per-second = RATE`` (shared by its 2
subtasks, interleaving the ids) and a ``sequence`` id ``0 .. RATE * SECONDS - 1``. It emits each
second's rows in a burst at the start of the second, so a run that keeps up spans about one
second less than the others' and its throughput (events / (last write - first event)) reads up
to ``SECONDS / (SECONDS - 1)`` times the offered rate. ``created_ms`` must be the wall
clock when an event is generated; datagen has no such field, so a Calc chained to the source
(same task, same thread) evaluates ``CURRENT_ROW_TIMESTAMP()`` once per row (in a Calc of its
own: Flink does not merge a non-deterministic expression that is used twice) and turns it into
epoch ms. A Python UDTF generating rows would have measured PyFlink's Python bridge, not the
pipeline: the events workload runs no Python at all.

**events**: datagen -> ``Calc`` (``word = 'w' || id % 7``, ``created_ms``, ``UPPER(word)``) ->
hash exchange by word -> filesystem sink. The hash exchange is the filesystem sink's
``sink.shuffle-by-partition.enable`` over a partition column holding the word (``part=W3/``
directories; the files hold ``id, word, created_ms``): SQL has no plain "repartition by", and this
keyed exchange does no work besides routing. Flink chains the Calcs into the source task (the
rebalance flintlock's program has between its source and ``with_column`` does not exist in SQL),
so the job graph is ``Source: events -> Calc -> Calc`` (parallelism 2) -HASH[word]->
``StreamingFileWriter`` (2) -> the sink's end (parallelism 1, which receives only the writers'
commit messages): three vertices, the hash exchange between the first two.

**flights**: ``benchmarks.streaming.flights``'s replay through a Python scalar UDF ``flight(id)``
(the same function of the index as flintlock's generator, holding the flights table in the Python
worker; ``created_ms`` is the wall clock when the UDF generates the row) in computed columns of
the datagen table, with ``WATERMARK FOR sched_dep AS sched_dep - INTERVAL '30' MINUTE`` -> the
``TUMBLE`` window TVF, ``GROUP BY origin, window_start, window_end`` (Flink's local/global window
aggregation, hash exchange by origin) -> filesystem sink. The UDF runs in ``thread`` mode
(embedded CPython in the task thread, called per row): ``process`` mode ships rows to a Python
process in bundles (``python.fn-execution.bundle.time``, 1 s by default); at 2,000 flights/s for
10 s window latency p50 was 0.06 s in thread mode and 0.14 s in process mode.

**Sink.** Flink's filesystem sink writes rows into in-progress part files as they arrive, rolls a
file after ``sink.rolling-policy.rollover-interval`` (checked every ``check-interval``) and
renames finished files into place when the next checkpoint completes (exactly-once): without
checkpointing nothing is ever committed, so checkpointing is on, every ``CHECKPOINT_INTERVAL``,
with files rolled every ``ROLLOVER``. A file's modification time is when its last row was
written, as for the other systems' files (flintlock also writes part files per epoch and
publishes them at the end), so latency is measured to it; the harness also records the commit
latency (to the rename, the file's ``st_ctime``), which adds up to a roll interval plus a
checkpoint interval. Rows written early in a file count from its last write: rolling every
``ROLLOVER`` bounds that overstatement (datagen's one burst a second mostly lands in one file).
At 2,000 events/s: write latency p50 0.01 s, commit latency p50 1.06 s. The PyFlink pip
package has the ``json`` and ``csv`` formats but not Parquet; JSON lines keep the column names.
"""

from __future__ import annotations

import os
import site
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

WORDS = 7
CHECKPOINT_INTERVAL = "1 s"
ROLLOVER = "500 ms"
PYTHON_MODE = "thread"

#: epoch ms of the TIMESTAMP_LTZ column ``now`` (Flink SQL has no direct cast to BIGINT ms)
_EPOCH_MS = ("CAST(TIMESTAMPDIFF(SECOND, TO_TIMESTAMP_LTZ(0, 3), now) AS BIGINT) * 1000 "
             "+ EXTRACT(MILLISECOND FROM now)")


def _sink_options(out: str) -> str:
    return (f"'connector' = 'filesystem', 'path' = '{Path(out).resolve().as_uri()}', "
            "'format' = 'json', 'json.timestamp-format.standard' = 'ISO-8601', "
            f"'sink.rolling-policy.rollover-interval' = '{ROLLOVER}', "
            "'sink.rolling-policy.check-interval' = '100 ms'")


def _datagen(name: str, columns: str, rate: int, seconds: float) -> str:
    n = int(rate * seconds)
    return (f"CREATE TABLE {name} ({columns}) WITH ('connector' = 'datagen', "
            f"'rows-per-second' = '{rate}', 'fields.id.kind' = 'sequence', "
            f"'fields.id.start' = '0', 'fields.id.end' = '{n - 1}')")


def table_environment() -> Any:
    """A streaming ``TableEnvironment``: parallelism 2, UTC, checkpoints, Python UDFs in this
    interpreter."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    for key, value in {
        "parallelism.default": "2",
        "table.local-time-zone": "UTC",
        "execution.checkpointing.interval": CHECKPOINT_INTERVAL,
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "python.execution-mode": PYTHON_MODE,
    }.items():
        config.set(key, value)
    return t_env


def events_statements(out: str, rate: int, seconds: float) -> list[str]:
    """The DDL and the ``INSERT`` of the events workload."""
    return [
        _datagen("events", "id BIGINT", rate, seconds),
        "CREATE TABLE events_out (id BIGINT, word STRING, created_ms BIGINT, part STRING) "
        f"PARTITIONED BY (part) WITH ({_sink_options(out)}, "
        "'sink.shuffle-by-partition.enable' = 'true')",
        f"""INSERT INTO events_out
            SELECT id, word, created_ms, word FROM (
                SELECT id, UPPER(CONCAT('w', CAST(id % {WORDS} AS STRING))) AS word,
                       {_EPOCH_MS} AS created_ms
                FROM (SELECT id, CURRENT_ROW_TIMESTAMP() AS now FROM events))""",
    ]


def flights_statements(out: str, rate: int, seconds: float) -> list[str]:
    """The DDL and the ``INSERT`` of the flights workload (needs the ``flight`` function)."""
    from benchmarks.streaming.flights import OUT_OF_ORDERNESS_MS

    minutes = OUT_OF_ORDERNESS_MS // 60_000
    return [
        _datagen("flights", "id BIGINT, f AS flight(id), "
                 "sched_dep AS TO_TIMESTAMP_LTZ(flight(id).sched_ms, 3), "
                 f"WATERMARK FOR sched_dep AS sched_dep - INTERVAL '{minutes}' MINUTE",
                 rate, seconds),
        "CREATE TABLE windows_out (origin STRING, window_start TIMESTAMP(3), "
        "window_end TIMESTAMP(3), departures BIGINT, mean_dep_delay DOUBLE, "
        f"max_created_ms BIGINT, min_created_ms BIGINT) WITH ({_sink_options(out)})",
        """INSERT INTO windows_out
            SELECT origin, window_start, window_end, COUNT(*), AVG(dep_delay),
                   MAX(created_ms), MIN(created_ms)
            FROM (SELECT f.origin AS origin, f.dep_delay AS dep_delay, f.created_ms AS created_ms,
                         window_start, window_end
                  FROM TABLE(TUMBLE(TABLE flights, DESCRIPTOR(sched_dep), INTERVAL '1' HOUR)))
            GROUP BY origin, window_start, window_end""",
    ]


def flight_function(flights_dir: str) -> Any:
    """The ``flight(id)`` UDF: ``ROW(origin, dep_delay, sched_ms, created_ms)`` of event ``id``
    (``benchmarks.streaming.flights.flight_at``; ``created_ms``: the wall clock at the call)."""
    from pyflink.table import DataTypes
    from pyflink.table.udf import ScalarFunction, udf

    class Flight(ScalarFunction):
        def open(self, function_context: Any) -> None:
            from pyflink.common import Row

            from benchmarks.streaming.flights import flight_at
            from examples.streaming.flight_replay import departed_flights

            self.columns = departed_flights(flights_dir, "scheduled")
            self.flight_at, self.row = flight_at, Row

        def eval(self, i: int) -> Any:
            origin, dep_delay, sched_ms = self.flight_at(self.columns, i)
            return self.row(origin, dep_delay, sched_ms, int(time.time() * 1000))

    return udf(Flight(), result_type=DataTypes.ROW([
        DataTypes.FIELD("origin", DataTypes.STRING()),
        DataTypes.FIELD("dep_delay", DataTypes.DOUBLE()),
        DataTypes.FIELD("sched_ms", DataTypes.BIGINT()),
        DataTypes.FIELD("created_ms", DataTypes.BIGINT())]))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 4 or argv[0] not in ("events", "flights") \
            or (argv[0] == "flights" and len(argv) < 5):
        print("usage:" + __doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    workload, out, rate, seconds = argv[0], argv[1], int(argv[2]), float(argv[3])
    # the Python UDF runs in CPython embedded in the JVM (thread mode), which finds neither this
    # venv's packages nor the repository unless told
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *site.getsitepackages()])
    t_env = table_environment()
    if workload == "events":
        statements = events_statements(out, rate, seconds)
    else:
        t_env.create_temporary_system_function("flight", flight_function(argv[4]))
        statements = flights_statements(out, rate, seconds)
    for ddl in statements[:-1]:
        t_env.execute_sql(ddl)
    if os.environ.get("FLINTLOCK_BENCH_EXPLAIN"):
        print(t_env.explain_sql(statements[-1]), file=sys.stderr)
    t_env.execute_sql(statements[-1]).wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
