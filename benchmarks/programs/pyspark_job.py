"""Plain PySpark (classic ``local[N]``, or Connect) running a benchmark workload: cold or warm.

Cold, as users run a job (a fresh ``python job.py``: interpreter, JVM and session start included)::

    python benchmarks/programs/pyspark_job.py --workload q1 --tpch DIR --text DIR --flights DIR \
        --result answer.arrow --meta meta.json [--cores 2]

Warm (``--serve``): starts one session, prints ``{"ready": ...}`` and then answers one JSON line
per request read from stdin (``{"workload", "result", "meta"}``) with ``{"ok", "job_s"}`` or
``{"ok": false, "error"}``. The protocol uses the process's original stdout; everything else that
writes to fd 1 (the JVM included) is sent to stderr.

With ``--remote sc://host:port`` (the harness's ``--spark-remote``) the session is a PySpark
Connect client of that server (``SparkSession.builder.remote(url)``) instead of a classic
``local[N]`` Spark in this process.

``job_s`` is the query including ``collect()``; the answer is written as Arrow IPC. Only pyspark,
pyarrow and ``benchmarks.pyspark_queries`` are imported: no flintlock.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def session(cores: int, remote: str | None = None):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    if remote:
        return SparkSession.builder.remote(remote).getOrCreate()
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("pyspark-benchmark")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_one(spark, workload: str, paths, result: str, meta: str) -> float:  # type: ignore[no-untyped-def]
    from benchmarks.programs._answer import write_answer, write_meta
    from benchmarks.pyspark_queries import QUERIES

    t0 = time.perf_counter()
    df = QUERIES[workload](spark, paths)
    rows = df.collect()
    job_s = time.perf_counter() - t0
    write_answer(result, df.columns, [tuple(r) for r in rows])
    write_meta(meta, job_s=job_s)
    return job_s


def serve(spark, paths, out) -> None:  # type: ignore[no-untyped-def]
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            job_s = run_one(spark, req["workload"], paths, req["result"], req["meta"])
            reply = {"ok": True, "job_s": job_s}
        except Exception as exc:  # reported to the harness, which fails the run loudly
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()[-4000:]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="plain PySpark benchmark job")
    p.add_argument("--workload")
    p.add_argument("--tpch", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--flights", required=True)
    p.add_argument("--result")
    p.add_argument("--meta")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--remote", default=None, metavar="URL",
                   help="a Spark Connect server (sc://host:port) instead of local[--cores]")
    p.add_argument("--serve", action="store_true", help="answer workload requests from stdin")
    args = p.parse_args(argv)

    from benchmarks.pyspark_queries import Paths

    paths = Paths(args.tpch, args.text, args.flights)
    if args.serve:
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)  # the JVM and any print() go to stderr; fd `out` carries the protocol
        sys.stdout = sys.stderr
        serve(session(args.cores, args.remote), paths, out)
        return 0
    if not (args.workload and args.result and args.meta):
        p.error("--workload, --result and --meta are needed unless --serve")
    spark = session(args.cores, args.remote)
    run_one(spark, args.workload, paths, args.result, args.meta)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
