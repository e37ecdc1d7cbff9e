"""Deployment-modes benchmark: one TPC-H query end to end, as a user runs it in each mode.

Each run is one command, timed from its start to its exit (wall clock), on the same data:

- ``pyspark``: plain PySpark (``local[2]``) in a fresh process: the query written as Parquet;
- ``local``: ``flintlock run --target local`` (MiniCluster and Spark session in the process);
- ``session``: ``flintlock run --target remote`` on a session cluster started (and warmed up with
  one run) beforehand: one TaskManager of two slots;
- ``per-job``: ``flintlock run --target per-job``: a JobManager and the job's TaskManagers are
  started for the job;
- ``application``: ``flintlock run --target application``: the JobManager runs main() and starts
  the TaskManagers.

Reported per query and mode (medians over the runs): the total time; the time to the first
subtask RUNNING (from the command's start, by the INFO log lines of the JobManager, or of the
client in local mode; a running subtask reads its first records right away, except in local
mode, whose Spark session is still starting then, ~5 s more); and for the dedicated clusters the
TaskManager start-up (``Starting TaskManager`` to ``Registered TaskExecutor`` in the JobManager's
log: the process and its Spark session). Ratios are against the session run. The issue's target:
application <= session + one TaskManager start.

With ``--spark-remote`` (``standalone``: a Spark standalone cluster and Spark Connect server
started for the run, or an ``sc://host:port`` URL) every mode runs on that one Spark, as a
deployment whose TaskManagers share a Spark cluster does (``-D spark.remote=<url>`` for every
flintlock command, ``SparkSession.builder.remote`` for plain PySpark): a TaskManager's start is
then its process and a Spark Connect session, and no mode starts a Spark JVM of its own. The
session run's warm-up also warms that Spark for the others. Such a run writes
``docs/deployment-modes-remote-benchmark.md``.

    python benchmarks/deployment_modes.py --data data/tpch-sf1 --queries q6,q18 --runs 3

prints the table, writes raw figures to ``benchmarks/results/`` and the table to
``docs/deployment-modes-benchmark.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.failover import FLINTLOCK, QUERY_PROGRAM, REPO
from benchmarks.machine import write_page
from benchmarks.spark_target import check_spec, start_spark

MODES = ("pyspark", "local", "session", "per-job", "application")

#: argv: <query> <tpch dir> <out> [<Spark Connect URL>]; plain PySpark, the same DataFrame code
#: as the other benchmarks
PYSPARK_PROGRAM = """
import sys
sys.path.insert(0, {repo!r})
from pyspark.sql import SparkSession
from benchmarks.pyspark_queries import QUERIES, Paths
remote = sys.argv[4] if len(sys.argv) > 4 else ""
builder = SparkSession.builder
spark = (builder.remote(remote) if remote else builder.master("local[2]")).getOrCreate()
QUERIES[sys.argv[1]](spark, Paths(tpch=sys.argv[2], text="", flights="")).write.parquet(sys.argv[3])
spark.stop()
"""

_LOG_TIME = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_RUNNING = re.compile(_LOG_TIME + r" INFO .* switched from \w+ to RUNNING")
_START = re.compile(_LOG_TIME + r" INFO .*Starting TaskManager (\S+) ")
_REGISTERED = re.compile(_LOG_TIME + r" INFO .*Registered TaskExecutor (\S+) at")


@dataclass
class Run:
    query: str
    mode: str
    run: int
    total_s: float
    first_record_s: float | None
    task_manager_start_s: list[float]


def _epoch(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _first_running(text: str, after: float) -> float | None:
    times = [_epoch(m.group(1)) for m in _RUNNING.finditer(text)]
    later = [t for t in times if t >= after - 0.001]
    return min(later) - after if later else None


def _task_manager_starts(text: str) -> list[float]:
    started = {m.group(2): _epoch(m.group(1)) for m in _START.finditer(text)}
    return [_epoch(m.group(1)) - started[m.group(2)] for m in _REGISTERED.finditer(text)
            if m.group(2) in started]


def _logs(directory: Path) -> str:
    return "\n".join(p.read_text(errors="replace")
                     for p in directory.rglob("flintlock-jobmanager-*.log"))


def one_run(mode: str, query: str, data: Path, work: Path, state: Path, run: int,
            remote: str | None = None) -> Run:
    """One command of ``mode``; ``remote``: the Spark Connect URL every mode uses, if any."""
    out = work / f"out-{mode}-{query}-{run}"
    program = work / ("pyspark_query.py" if mode == "pyspark" else "query.py")
    if mode == "pyspark":
        # a TPC-H directory itself, or a data root holding one (as the examples accept)
        tpch = data if (data / "lineitem").is_dir() else next(data.glob("tpch-sf*"))
        command = [sys.executable, str(program), query, str(tpch), str(out),
                   *([remote] if remote else [])]
    else:
        target = {"session": "remote"}.get(mode, mode)
        command = [*FLINTLOCK, *(["-v"] if mode == "local" else []), "run", "--target", target,
                   "-D", f"cluster.state-dir={state}", *_remote_options(remote), str(program),
                   "--query", query, "--data", str(data), "--out", str(out),
                   "--name", f"{query}-{mode}-{run}"]
    dedicated = state / {"per-job": "job-clusters", "application": "applications"}.get(mode, "-")
    before = set(dedicated.iterdir()) if dedicated.exists() else set()
    start = time.time()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    total = time.time() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} {query} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    if mode == "local":
        text = proc.stderr
    elif mode == "session":
        text = _logs(state / "log")
    elif mode == "pyspark":
        text = ""
    else:
        [new] = set(dedicated.iterdir()) - before
        text = _logs(new)
    starts = _task_manager_starts(text) if mode in ("per-job", "application") else []
    shutil.rmtree(out, ignore_errors=True)
    return Run(query, mode, run, total, _first_running(text, start), starts)


def _remote_options(remote: str | None) -> list[str]:
    return ["-D", f"spark.remote={remote}"] if remote else []


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(runs: list[Run]) -> list[dict[str, object]]:
    rows = []
    for query in dict.fromkeys(r.query for r in runs):
        session = _median([r.total_s for r in runs if r.query == query and r.mode == "session"])
        for mode in MODES:
            mine = [r for r in runs if r.query == query and r.mode == mode]
            if not mine:
                continue
            total = _median([r.total_s for r in mine])
            first = _median([r.first_record_s for r in mine if r.first_record_s is not None])
            tm = _median([s for r in mine for s in r.task_manager_start_s])
            rows.append({"query": query.upper(), "mode": mode, "runs": len(mine), "total_s": total,
                         "vs_session": total / session if session else None,
                         "first_record_s": first, "task_manager_start_s": tm,
                         "session_plus_tm_start_s": (session + tm) if session and tm else None})
    return rows


def _fmt(value: object, suffix: str = "", digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def table(rows: list[dict[str, object]]) -> str:
    lines = ["| query | mode | runs | total (s) | vs session | to first subtask running (s) | "
             "TaskManager start (s) | target: session + one TM start (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['query']} | {r['mode']} | {r['runs']} | {_fmt(r['total_s'])} | "
                     f"{_fmt(r['vs_session'], 'x', 2)} | {_fmt(r['first_record_s'])} | "
                     f"{_fmt(r['task_manager_start_s'])} | {_fmt(r['session_plus_tm_start_s'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/tpch-sf1")
    parser.add_argument("--queries", default="q6,q18")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--spark-remote", type=check_spec, default=None,
                        help="'standalone' or sc://host:port: every mode runs on that Spark")
    args = parser.parse_args()
    data = Path(args.data).resolve()
    modes = [m for m in args.modes.split(",") if m]
    runs: list[Run] = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="flintlock-modes-") as tmp:
        work, state = Path(tmp), Path(tmp) / "state"
        spark = start_spark(args.spark_remote, work, cores=os.cpu_count() or 2,
                            log=lambda m: print(m, file=sys.stderr))
        remote = spark.remote
        (work / "query.py").write_text(QUERY_PROGRAM.format(repo=str(REPO)))
        (work / "pyspark_query.py").write_text(PYSPARK_PROGRAM.format(repo=str(REPO)))
        cluster = [*FLINTLOCK, "cluster", "start", "--taskmanagers", "1", "-D",
                   f"cluster.state-dir={state}", "-D", "rest.port=0",
                   "-D", "jobmanager.rpc.port=0", "-D", "taskmanager.numberOfTaskSlots=2",
                   *_remote_options(remote)]
        try:
            if "session" in modes:
                subprocess.run(cluster, check=True, cwd=REPO, capture_output=True, timeout=300)
            for query in args.queries.split(","):
                if "session" in modes:  # warm-up: the session cluster has run a query before
                    one_run("session", query, data, work, state, -1, remote)
                for run in range(args.runs):
                    for mode in modes:  # interleaved, so drift hits every mode alike
                        r = one_run(mode, query, data, work, state, run, remote)
                        print(f"{query} {mode} run {run}: {r.total_s:.1f} s, first subtask "
                              f"{_fmt(r.first_record_s)} s, TaskManager start "
                              f"{[round(s, 1) for s in r.task_manager_start_s]}", file=sys.stderr)
                        runs.append(r)
        finally:
            if "session" in modes:
                subprocess.run([*FLINTLOCK, "cluster", "stop", "-D", f"cluster.state-dir={state}"],
                               cwd=REPO, capture_output=True, timeout=120)
            spark.stop()
    rows = summarize(runs)
    print(table(rows))
    write_page("benchmarks/deployment_modes.py", __doc__,
               "Deployment modes: one TPC-H query end to end"
               + (f" on one shared Spark ({spark.mode})" if remote else ""), table(rows),
               {"runs": [asdict(r) for r in runs], "rows": rows, "spark": spark.describe()},
               "deployment-modes-remote" if remote else "deployment-modes", load)


if __name__ == "__main__":
    main()
