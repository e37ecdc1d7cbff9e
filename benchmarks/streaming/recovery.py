"""Recovery to output after a killed process: flintlock against Spark Structured Streaming.

    python -m benchmarks.streaming.recovery [--runs 3] [--rate 300] [--seconds 40]

Both run the fault runs' ``windows`` pipeline (``benchmarks/streaming/fault_jobs.py``): rows
``(id, k = "k<id % 3>", ts = 10 * id)`` from a generator function at ``--rate`` rows/s, 1 s
tumbling event-time windows per key with ``count`` and ``sum(id)``, Parquet files.

- flintlock: a session cluster of processes (``fault_runs.CLUSTER``), checkpoints every second
  (EXACTLY_ONCE). Once the job is running with a completed checkpoint, the TaskManager running
  its subtasks is SIGKILLed (its process group, Spark JVM included) and a replacement started.
  Recovery to output: from the kill to the first file published after the job restored its
  checkpoint. The job then runs to its end and its output is checked (exactly once).
- Structured Streaming: the same generator function through a Python streaming data source
  (rows due at ``--rate`` per second since the first start, so a restart finds a backlog, not a
  gap), ``withWatermark("ts", "0 seconds")``, ``groupBy(window(ts, "1 second"), k)`` in append
  mode, the Parquet file sink with a ``checkpointLocation``, micro-batches as fast as possible,
  ``local[2]`` in one process (driver and executors). Once it wrote files, the process is
  SIGKILLed and started again at once, as a supervisor (Kubernetes, systemd) would; the query
  resumes from its checkpoint. Recovery to output: from the kill to its first new file.

Both lose everything on the killed process; Structured Streaming in local mode must also start a
new JVM and SparkSession, which a flintlock TaskManager loss does not (the JobManager and the
other TaskManager keep running). Writes ``benchmarks/results/recovery-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.failover import _wait  # noqa: E402
from benchmarks.systems import _clean_env  # noqa: E402


def structured_streaming_worker(out: str, rate: int, started: float, total: int) -> None:
    """The Structured Streaming query (run in its own process until killed or done)."""
    from pyspark.sql import functions as F

    from benchmarks.streaming.fault_jobs import window_event
    from benchmarks.streaming.programs import _spark, python_rate_source

    rows = python_rate_source(_spark(), window_event, rate, total, "id long, k string, ts long",
                              started)
    windows = (rows.withColumn("ts", F.timestamp_millis("ts"))
               .withWatermark("ts", "0 seconds")
               .groupBy(F.window("ts", "1 second"), "k")
               .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s")))
    query = (windows.writeStream.format("parquet").outputMode("append")
             .option("checkpointLocation", out + "-checkpoint")
             .trigger(processingTime="0 seconds").start(out))
    query.awaitTermination()


def _files(out: Path) -> set[str]:
    return {p.name for p in out.glob("part-*")} if out.exists() else set()


def structured_streaming_recovery(work: Path, rate: int, seconds: float) -> float:
    """One kill and restart of the Structured Streaming process; seconds to its next file."""
    out = work / "out"
    started = time.time()
    argv = [sys.executable, "-m", "benchmarks.streaming.recovery", "--ss-worker", str(out),
            str(rate), repr(started), str(int(rate * seconds))]
    env = _clean_env(PYSPARK_PYTHON=sys.executable)  # classic local[2], not Spark Connect

    log = work / "structured-streaming.log"
    work.mkdir(parents=True, exist_ok=True)

    def start() -> subprocess.Popen[bytes]:
        with open(log, "ab") as f:
            return subprocess.Popen(argv, cwd=REPO, env=env, start_new_session=True,
                                    stdout=f, stderr=subprocess.STDOUT)

    proc = start()
    try:
        _wait(lambda: len(_files(out)) >= 3 or proc.poll() is not None, 180,
              "Structured Streaming's first files")
        if proc.poll() is not None:
            raise RuntimeError(f"Structured Streaming exited: {log.read_text()[-3000:]}")
        time.sleep(2.0)  # a few micro-batches into the run, not at a batch boundary on purpose
        before = _files(out)
        os.killpg(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        proc.wait()
        proc = start()
        _wait(lambda: _files(out) - before, 180, "Structured Streaming's output after restart")
        return round(time.monotonic() - killed, 2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def flintlock_recovery(work: Path, rate: int, seconds: float, seed: int) -> dict[str, Any]:
    """One TaskManager kill in the ``windows`` job on a fresh session cluster."""
    from benchmarks.streaming.fault_runs import FaultRun, fault_cluster
    from flintlock.testing.fault_plan import FaultKind, FaultPlan, TimedFault

    plan = FaultPlan(seed, (), (TimedFault(FaultKind.KILL_TASK_MANAGER, 2.0, seed),))
    with fault_cluster(work / "cluster") as cluster:
        result = FaultRun(cluster, "windows", plan, work / "run", records=int(rate * seconds),
                          rate=rate, data=str(REPO / "data")).run()
    (kill,) = result.injected
    return {"recovery_to_output_s": kill.recovery_to_output_s,
            "exactly_once": result.exactly_once, "problems": result.problems}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--ss-worker"]:
        out, rate, started, total = argv[1:5]
        structured_streaming_worker(out, int(rate), float(started), int(total))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args(argv)
    runs: dict[str, list[Any]] = {"flintlock": [], "structured-streaming": []}
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="recovery-") as tmp:
            runs["flintlock"].append(flintlock_recovery(Path(tmp) / "f", args.rate,
                                                        args.seconds, i + 1))
            runs["structured-streaming"].append(
                {"recovery_to_output_s": structured_streaming_recovery(Path(tmp) / "s", args.rate,
                                                                       args.seconds)})
        print(json.dumps({k: v[-1] for k, v in runs.items()}), flush=True)
    medians = {k: statistics.median(r["recovery_to_output_s"] for r in v) for k, v in runs.items()}
    print(f"recovery to output, median of {args.runs}: flintlock {medians['flintlock']:.1f} s, "
          f"Structured Streaming {medians['structured-streaming']:.1f} s")
    out = REPO / "benchmarks" / "results" / f"recovery-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps({"rate": args.rate, "seconds": args.seconds, "runs": runs,
                               "median_s": medians}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
