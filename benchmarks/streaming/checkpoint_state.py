"""Checkpoint duration and size against keyed state size (issue 12's benchmark item).

    python -m benchmarks.streaming.checkpoint_state [KEYS ...] [--out FILE]

For each ``KEYS`` (default 10,000 / 100,000 / 1,000,000), a STREAMING job on the local cluster
(parallelism 2, two slots) reads rows with distinct keys from a generator at ``KEYS / 10`` rows/s,
assigns monotonous event times, and keys them into a one-hour tumbling event-time window that
cannot fire while the job runs: its state holds every row. Checkpoints are taken every second
(EXACTLY_ONCE). Once ``KEYS`` rows reached the window, the job is stopped with a savepoint (the
full state is checkpointed once more; a few more rows may have arrived), and the statistics
(``GET /jobs/:id/checkpoints``' shapes, read through the JobClient) give, per completed
checkpoint, its state size (bytes) and end-to-end duration (ms).

Prints one JSON line per KEYS and writes them all to ``--out`` (default
``benchmarks/results/checkpoint-state-<time>.json``): the largest checkpoint's size and duration,
the median duration over the checkpoints that held at least half of the final state, and the
savepoint's. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SECONDS = 10


def _event(i: int) -> tuple[str, int, int]:
    return (f"key-{i:09d}", i, i // 1000)


def _status(client: Any) -> Any:
    status = client.get_job_status()
    return status.result() if hasattr(status, "result") else status


def measure(keys: int, work: Path) -> dict[str, Any]:
    """Run the job for ``keys`` distinct keys; its checkpoint figures."""
    from pyspark.sql import functions as F

    from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.api.watermarks import WatermarkStrategy
    from flintlock.api.windows import TumblingEventTimeWindows
    from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy
    
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "local.number-taskmanager": 1, "taskmanager.numberOfTaskSlots": 2,
        "state.checkpoints.dir": str(work / "checkpoints")}))
    env.set_parallelism(2).set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.enable_checkpointing(1000)
    # unbounded: a savepoint needs a running source to send its barrier
    source = DataGeneratorSource(_event, None, RateLimiterStrategy.per_second(keys // SECONDS),
                                 "k string, v long, ts long")
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    (env.from_source(source).uid("rows").assign_timestamps_and_watermarks(strategy)
     .key_by("k").window(TumblingEventTimeWindows.of(3_600_000))
     .agg(F.count(F.lit(1)).alias("n")).uid("window")
     .sink_to(FileSink.parquet(str(work / "out"))))
    started = time.monotonic()
    client = env.execute_async(f"checkpoint state {keys}")

    def rows_in() -> int:
        graph = client.get_job_details()
        return sum(s.live.records_in for v in graph.vertices if "Window" in v.name
                   for s in v.subtasks if s.live is not None)

    while rows_in() < keys:  # the source paces itself; a bounded wait keeps a stall visible
        if time.monotonic() - started > 60 * SECONDS:
            raise TimeoutError(f"{keys} keys: only {rows_in()} rows reached the window")
        time.sleep(0.5)
    savepoint = client.stop_with_savepoint(str(work / "savepoints"))
    stopped = time.monotonic()
    while not _status(client).is_globally_terminal():  # FINISHED after its savepoint
        if time.monotonic() - stopped > 10 * SECONDS:
            raise TimeoutError(f"{keys} keys: still {_status(client).name} after the savepoint")
        time.sleep(0.2)
    stats = client.get_job_details().checkpoint_stats
    done = [c for c in stats.history if c.status == "COMPLETED"]
    checkpoints = [c for c in done if not c.savepoint]
    biggest = max(checkpoints, key=lambda c: c.state_size)
    full = [c for c in checkpoints if c.state_size >= biggest.state_size / 2]
    (sp,) = [c for c in done if c.savepoint]
    return {"keys": keys, "checkpoints": len(checkpoints),
            "largest_state_bytes": biggest.state_size,
            "largest_duration_ms": biggest.end_to_end_duration_ms,
            "median_duration_ms_at_half_state_or_more": statistics.median(
                c.end_to_end_duration_ms for c in full),
            "savepoint_state_bytes": sp.state_size, "savepoint_duration_ms":
                sp.end_to_end_duration_ms, "savepoint": savepoint,
            "wall_s": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("keys", nargs="*", type=int, default=[10_000, 100_000, 1_000_000])
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or REPO / "benchmarks" / "results" / f"checkpoint-state-{stamp}.json")
    results = []
    for keys in args.keys:
        with tempfile.TemporaryDirectory(prefix="flintlock-checkpoint-state-") as tmp:
            result = measure(keys, Path(tmp))
        print(json.dumps(result), flush=True)
        results.append(result)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"results": results}, indent=1) + "\n")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
