"""``python -m benchmarks.streaming``: throughput, latency and memory of a streaming pipeline,
flintlock against Spark Structured Streaming on the same input and cores, in one run.

    python -m benchmarks.streaming [--seconds 60] [--rate 10000] [--max-rate 100000]
                                   [--warmup 10] [--out benchmarks/results/streaming-<time>.json]

Per system (``benchmarks.streaming.programs``; run one after the other on an idle machine):

- sustained: ``--rate`` events/s for ``--seconds``: achieved throughput (events written / time
  from the first event created to the last file written), latency p50 / p99 (file write time -
  event creation time, over the events created after the first ``--warmup`` seconds: both
  systems start cold JVMs and Python workers, whose first seconds say nothing about steady
  state), and the peak RSS of the process tree sampled every second (the series
  is kept, to see growth over the run);
- max: ``--max-rate`` events/s offered for ``--seconds``: the throughput reached.

The JSON holds every figure; the ratios (flintlock / Structured Streaming) are printed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq

SYSTEMS = ("flintlock", "structured-streaming")
REPO = Path(__file__).resolve().parents[2]


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _run(system: str, rate: int, seconds: float, work: Path, warmup_s: float) -> dict[str, Any]:
    out = work / f"{system}-{rate}"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.streaming.programs", system,
                             str(out), str(rate), str(seconds)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ps, rss = psutil.Process(proc.pid), []
    while proc.poll() is None:
        rss.append((round(time.time() - started, 1), _tree_rss(ps)))
        time.sleep(1.0)
    if proc.returncode != 0:
        raise RuntimeError(f"{system} failed: {proc.stderr.read()[-3000:] if proc.stderr else ''}")
    return {**_measure(out, warmup_s), "wall_s": round(time.time() - started, 1), "rss": rss,
            "peak_rss_bytes": max((r for _, r in rss), default=0)}


def _measure(out: Path, warmup_s: float = 0.0) -> dict[str, Any]:
    events: list[tuple[float, float]] = []  # (created, latency) in ms
    first_created, last_written, rows = float("inf"), 0.0, 0
    for f in out.rglob("*.parquet"):
        written = f.stat().st_mtime * 1000
        created = pq.read_table(f, columns=["created_ms"]).column("created_ms").to_pylist()
        if not created:
            continue
        rows += len(created)
        events += [(c, written - c) for c in created]
        first_created = min(first_created, min(created))
        last_written = max(last_written, written)
    latencies = sorted(lat for c, lat in events if c >= first_created + warmup_s * 1000)

    def pct(q: float) -> float | None:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1000, 3) \
            if latencies else None

    span_s = (last_written - first_created) / 1000 if rows else None
    return {"events": rows, "throughput_per_s": round(rows / span_s) if span_s else None,
            "latency_p50_s": pct(0.50), "latency_p99_s": pct(0.99)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--rate", type=int, default=10_000)
    p.add_argument("--max-rate", type=int, default=100_000)
    p.add_argument("--warmup", type=float, default=10.0,
                   help="seconds at the start left out of the latency percentiles")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or REPO / "benchmarks" / "results" / f"streaming-{stamp}.json")
    results: dict[str, Any] = {"host": socket.gethostname(), "cores": os.cpu_count(),
                               "seconds": args.seconds, "rate": args.rate,
                               "max_rate": args.max_rate, "warmup_s": args.warmup,
                               "systems": {}}
    with tempfile.TemporaryDirectory(prefix="flintlock-streaming-bench-") as tmp:
        for system in args.systems.split(","):
            sustained = _run(system, args.rate, args.seconds, Path(tmp), args.warmup)
            maximum = _run(system, args.max_rate, args.seconds, Path(tmp), args.warmup)
            results["systems"][system] = {"sustained": sustained, "max": maximum}
            print(f"{system}: sustained {sustained['throughput_per_s']}/s, latency p50 "
                  f"{sustained['latency_p50_s']} s p99 {sustained['latency_p99_s']} s, peak RSS "
                  f"{sustained['peak_rss_bytes'] / 2**20:.0f} MiB; max {maximum['throughput_per_s']}/s",
                  flush=True)
    systems = results["systems"]
    if set(SYSTEMS) <= set(systems):
        f, s = systems["flintlock"], systems["structured-streaming"]

        def ratio(a: Any, b: Any) -> float | None:
            return round(a / b, 2) if a and b else None

        results["ratios"] = {
            "max_throughput": ratio(f["max"]["throughput_per_s"], s["max"]["throughput_per_s"]),
            "latency_p50": ratio(f["sustained"]["latency_p50_s"], s["sustained"]["latency_p50_s"]),
            "latency_p99": ratio(f["sustained"]["latency_p99_s"], s["sustained"]["latency_p99_s"]),
        }
        print("flintlock / Structured Streaming:", results["ratios"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
