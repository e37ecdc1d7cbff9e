"""Scheduler benchmark: the TPC-H queries on the DefaultScheduler and the AdaptiveBatchScheduler.

One session cluster (2 TaskManagers x 2 slots, embedded Spark servers) runs every query with
``flintlock run --target remote -p P -D jobmanager.scheduler=<Default|AdaptiveBatch>``, the two
schedulers alternating run by run so drift hits both alike, after one warm-up run per query.
With the DefaultScheduler every vertex runs at ``P``; with the AdaptiveBatchScheduler vertices
whose parallelism the program does not set get ``1..P`` subtasks, ``ceil(input bytes /
16 MiB)`` balanced by subpartition volume (fact sheet 7.4), file sources ``ceil(file bytes /
16 MiB)`` up to ``P``. Reported per
query (medians): the job's duration as the client reports it (``FINISHED in N ms``), the
command's wall time, and AdaptiveBatch / Default. Results are written as Parquet with a FileSink
and not compared here (``tests/examples/test_tpch.py`` checks both schedulers against DuckDB).
Targets (issue 15): AdaptiveBatch no slower on any query, faster in the geometric mean.

    python benchmarks/schedulers.py --data data/tpch-sf1,data/tpch-sf0.1 --runs 3

prints the tables, writes the raw figures to ``benchmarks/results/`` and the page
``docs/schedulers-benchmark.md``.
"""

from __future__ import annotations

import argparse
import math
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

SCHEDULERS = ("Default", "AdaptiveBatch")
_FINISHED = re.compile(r"FINISHED in (\d+) ms")


@dataclass
class Run:
    data: str
    query: str
    scheduler: str
    run: int
    job_s: float
    wall_s: float


def one_run(scheduler: str, query: str, data: Path, work: Path, state: Path, run: int,
            parallelism: int) -> Run:
    out = work / f"out-{scheduler}-{query}-{run}"
    command = [*FLINTLOCK, "run", "--target", "remote", "-D", f"cluster.state-dir={state}",
               "-D", f"jobmanager.scheduler={scheduler}", str(work / "query.py"),
               "--query", query, "--data", str(data), "--out", str(out),
               "--name", f"{query}-{scheduler}-{run}", "--parallelism", str(parallelism)]
    start = time.time()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    wall = time.time() - start
    found = _FINISHED.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{scheduler} {query} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return Run(data.name, query, scheduler, run, int(found.group(1)) / 1000, wall)


def summarize(runs: list[Run]) -> list[dict[str, object]]:
    rows = []
    for data in dict.fromkeys(r.data for r in runs):
        for query in dict.fromkeys(r.query for r in runs if r.data == data):
            row: dict[str, object] = {"data": data, "query": query.upper()}
            for scheduler in SCHEDULERS:
                mine = [r for r in runs if (r.data, r.query, r.scheduler) == (data, query, scheduler)]
                row[f"{scheduler}_job_s"] = statistics.median(r.job_s for r in mine)
                row[f"{scheduler}_wall_s"] = statistics.median(r.wall_s for r in mine)
                row["runs"] = len(mine)
            row["ratio"] = float(row["AdaptiveBatch_job_s"]) / float(row["Default_job_s"])  # type: ignore[arg-type]
            rows.append(row)
    return rows


def table(rows: list[dict[str, object]], data: str) -> str:
    mine = [r for r in rows if r["data"] == data]
    lines = [f"### {data}", "",
             "| query | runs | Default job (s) | AdaptiveBatch job (s) | AdaptiveBatch / Default | "
             "Default wall (s) | AdaptiveBatch wall (s) |", "|---|---|---|---|---|---|---|"]
    for r in mine:
        lines.append(f"| {r['query']} | {r['runs']} | {r['Default_job_s']:.2f} | "
                     f"{r['AdaptiveBatch_job_s']:.2f} | {r['ratio']:.2f}x | "
                     f"{r['Default_wall_s']:.1f} | {r['AdaptiveBatch_wall_s']:.1f} |")
    geo = math.exp(statistics.fmean(math.log(float(r["ratio"])) for r in mine))  # type: ignore[arg-type]
    worst = max(mine, key=lambda r: float(r["ratio"]))  # type: ignore[arg-type]
    lines += ["", f"Geometric mean AdaptiveBatch / Default: **{geo:.2f}x**; slowest relative: "
              f"{worst['query']} {float(worst['ratio']):.2f}x."]  # type: ignore[arg-type]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/tpch-sf1,data/tpch-sf0.1",
                        help="comma-separated TPC-H directories")
    parser.add_argument("--queries", default=",".join(f"q{i}" for i in range(1, 23)))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=4)
    args = parser.parse_args()
    runs: list[Run] = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="flintlock-schedulers-") as tmp:
        work, state = Path(tmp), Path(tmp) / "state"
        (work / "query.py").write_text(QUERY_PROGRAM.format(repo=str(REPO)))
        subprocess.run([*FLINTLOCK, "cluster", "start", "--taskmanagers", "2",
                        "-D", f"cluster.state-dir={state}", "-D", "rest.port=0",
                        "-D", "jobmanager.rpc.port=0", "-D", "taskmanager.numberOfTaskSlots=2"],
                       check=True, cwd=REPO, capture_output=True, timeout=300)
        try:
            for data in (Path(d).resolve() for d in args.data.split(",") if d):
                for query in args.queries.split(","):
                    for scheduler in SCHEDULERS:  # warm-up
                        one_run(scheduler, query, data, work, state, -1, args.parallelism)
                    for run in range(args.runs):
                        order = SCHEDULERS if run % 2 == 0 else SCHEDULERS[::-1]
                        for scheduler in order:
                            r = one_run(scheduler, query, data, work, state, run, args.parallelism)
                            print(f"{data.name} {query} {scheduler} run {run}: job {r.job_s:.2f} s, "
                                  f"wall {r.wall_s:.1f} s", file=sys.stderr)
                            runs.append(r)
        finally:
            subprocess.run([*FLINTLOCK, "cluster", "stop", "-D", f"cluster.state-dir={state}"],
                           cwd=REPO, capture_output=True, timeout=120)
    rows = summarize(runs)
    tables = "\n\n".join(table(rows, d) for d in dict.fromkeys(str(r["data"]) for r in rows))
    print(tables)
    write_page("benchmarks/schedulers.py", __doc__,
               "Schedulers: DefaultScheduler vs AdaptiveBatchScheduler on TPC-H", tables,
               {"runs": [asdict(r) for r in runs], "rows": rows}, "schedulers", load,
               f", parallelism {args.parallelism}")

if __name__ == "__main__":
    main()
