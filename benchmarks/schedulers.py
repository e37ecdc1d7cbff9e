"""Scheduler benchmark: the TPC-H queries on the DefaultScheduler and the AdaptiveBatchScheduler.

One session cluster (2 TaskManagers x 2 slots, embedded Spark servers) runs every query with
``flintlock run --target remote -p P`` in three configurations: ``jobmanager.scheduler:
Default``, ``AdaptiveBatch``, and ``AdaptiveBatch`` with its run-time join decisions off
(``table.optimizer.adaptive-broadcast-join.strategy`` and
``table.optimizer.skewed-join-optimization.strategy`` ``NONE``; compile-time broadcast joins stay,
as under Default). The configurations alternate run by run so drift hits all alike, after one
warm-up run each per query. With the DefaultScheduler every vertex runs at ``P``; with the
AdaptiveBatchScheduler vertices whose parallelism the program does not set get ``1..P``
subtasks, ``ceil(input bytes / 16 MiB)`` balanced by subpartition volume (fact sheet 7.4), file
sources ``ceil(file bytes / 16 MiB)`` up to ``P``, and a hash join whose finished side stored at
most ``table.optimizer.join.broadcast-threshold`` (1 MiB) becomes a broadcast join. Reported per
query: the median job duration the client reports (``FINISHED in N ms``) of each configuration,
the ratios, and the joins the AdaptiveBatchScheduler changed at run time (from the job's plan at
``/jobs/:jobid``). Results are written as Parquet with a FileSink and not compared here
(``tests/examples/test_tpch.py`` checks the schedulers and the adaptive joins against DuckDB).
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
from flintlock.client.remote import rest_client_for
from flintlock.config.configuration import Configuration

NO_JOINS = "AdaptiveBatch without adaptive joins"
#: what each compared configuration adds to ``flintlock run``
CONFIGS: dict[str, tuple[str, ...]] = {
    "Default": ("-D", "jobmanager.scheduler=Default"),
    "AdaptiveBatch": ("-D", "jobmanager.scheduler=AdaptiveBatch"),
    # the run-time join decisions off (compile-time broadcast joins stay, as under Default)
    NO_JOINS: (
        "-D", "jobmanager.scheduler=AdaptiveBatch",
        "-D", "table.optimizer.adaptive-broadcast-join.strategy=NONE",
        "-D", "table.optimizer.skewed-join-optimization.strategy=NONE"),
}
_FINISHED = re.compile(r"Job (\w+)\s+\(.*?\)\s+FINISHED in\s+(\d+)\s*ms", re.S)  # rich may wrap


@dataclass
class Run:
    data: str
    query: str
    scheduler: str
    run: int
    job_s: float
    wall_s: float
    #: the joins the AdaptiveBatchScheduler changed at run time (the plan's operator_strategy)
    adaptive_joins: tuple[str, ...] = ()


def one_run(scheduler: str, query: str, data: Path, work: Path, state: Path, run: int,
            parallelism: int) -> Run:
    out = work / f"out-{scheduler}-{query}-{run}"
    command = [*FLINTLOCK, "run", "--target", "remote", "-D", f"cluster.state-dir={state}",
               *CONFIGS[scheduler], str(work / "query.py"),
               "--query", query, "--data", str(data), "--out", str(out),
               "--name", f"{query}-{scheduler.replace(' ', '-')}-{run}",
               "--parallelism", str(parallelism)]
    start = time.time()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, "COLUMNS": "200"})
    wall = time.time() - start
    found = _FINISHED.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{scheduler} {query} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return Run(data.name, query, scheduler, run, int(found.group(2)) / 1000, wall,
               adaptive_joins(state, found.group(1)))


def adaptive_joins(state: Path, job_id: str) -> tuple[str, ...]:
    """The plan's run-time join decisions of a finished job (``operator_strategy``)."""
    with rest_client_for(Configuration({"cluster.state-dir": str(state)})) as client:
        nodes = client.job_details(job_id)["plan"]["nodes"]
    return tuple(n["operator_strategy"] for n in nodes if n.get("operator_strategy"))


#: the run-time join decisions among a plan's operator strategies (``adaptive_batch_scheduler``,
#: ``adaptive_join``), as (label, what its strategy text holds); the probe side
#: of a broadcast join ("joins for ...") and runtime chaining ("chained into ...", made with or
#: without adaptive joins) are not decisions of their own
_JOIN_DECISIONS = (("broadcast", "BROADCAST"), ("runtime filter", "keeps the rows whose keys"),
                   ("skew split", "skewed subpartitions split"))


def _joins_text(decisions: tuple[str, ...]) -> str:
    """How many of each run-time join decision a plan's operator strategies hold ("-": none)."""
    counts = [(label, sum(mark in d for d in decisions))
              for label, mark in _JOIN_DECISIONS]
    return ", ".join(f"{n} {label}" for label, n in counts if n) or "-"


def summarize(runs: list[Run]) -> list[dict[str, object]]:
    """Per (data, query): each configuration's median job and wall time, the ratios and the
    AdaptiveBatchScheduler's run-time join decisions."""
    rows = []
    for data in dict.fromkeys(r.data for r in runs):
        for query in dict.fromkeys(r.query for r in runs if r.data == data):
            row: dict[str, object] = {"data": data, "query": query.upper()}
            for scheduler in CONFIGS:
                mine = [r for r in runs if (r.data, r.query, r.scheduler) == (data, query, scheduler)]
                if mine:
                    row[f"{scheduler}_job_s"] = statistics.median(r.job_s for r in mine)
                    row[f"{scheduler}_wall_s"] = statistics.median(r.wall_s for r in mine)
                    row["runs"] = len(mine)
            row["ratio"] = float(row["AdaptiveBatch_job_s"]) / float(row["Default_job_s"])  # type: ignore[arg-type]
            if f"{NO_JOINS}_job_s" in row:
                row["joins_ratio"] = (float(row["AdaptiveBatch_job_s"])  # type: ignore[arg-type]
                                      / float(row[f"{NO_JOINS}_job_s"]))  # type: ignore[arg-type]
            adaptive = [r for r in runs if (r.data, r.query, r.scheduler) == (data, query, "AdaptiveBatch")]
            row["adaptive_joins"] = _joins_text(adaptive[-1].adaptive_joins) if adaptive else "-"
            rows.append(row)
    return rows


def _geo(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def table(rows: list[dict[str, object]], data: str) -> str:
    """One data set's table and its summary lines (targets of issue 15)."""
    mine = [r for r in rows if r["data"] == data]
    joins = all("joins_ratio" in r for r in mine)
    head = ["query", "runs", "Default (s)", "AdaptiveBatch (s)", "AdaptiveBatch / Default"]
    if joins:
        head += ["without adaptive joins (s)", "with / without adaptive joins"]
    lines = [f"### {data}", "", "| " + " | ".join(head + ["adaptive joins"]) + " |",
             "|" + "---|" * (len(head) + 1)]
    for r in mine:
        cells = [str(r["query"]), str(r["runs"]), f"{r['Default_job_s']:.2f}",
                 f"{r['AdaptiveBatch_job_s']:.2f}", f"{r['ratio']:.2f}x"]
        if joins:
            cells += [f"{r[f'{NO_JOINS}_job_s']:.2f}", f"{r['joins_ratio']:.2f}x"]
        lines.append("| " + " | ".join([*cells, str(r.get("adaptive_joins", "-"))]) + " |")
    ratios = [float(r["ratio"]) for r in mine]  # type: ignore[arg-type]
    worst = max(mine, key=lambda r: float(r["ratio"]))  # type: ignore[arg-type]
    slower = [str(r["query"]) for r in mine if float(r["ratio"]) > 1.0]  # type: ignore[arg-type]
    lines += ["", f"Geometric mean AdaptiveBatch / Default: **{_geo(ratios):.2f}x** (target: below "
              f"1x); slowest relative: {worst['query']} {float(worst['ratio']):.2f}x; slower than "  # type: ignore[arg-type]
              f"Default (target: none): {', '.join(slower) or 'none'}."]
    if joins:
        changed = [r for r in mine if r.get("adaptive_joins", "-") != "-"]
        joined = [float(r["joins_ratio"]) for r in changed]  # type: ignore[arg-type]
        lines += ["",
            f"Run-time join decisions in {len(changed)} of {len(mine)} queries"
            + (f"; with / without them on those: **{_geo(joined):.2f}x** (geometric mean)."
               if joined else ".")]
    return "\n".join(lines)


def measure(data_dirs: list[Path], queries: list[str], runs: int, parallelism: int,
            configs: tuple[str, ...] = tuple(CONFIGS)) -> list[Run]:
    """Run every query on one session cluster under each configuration: a warm-up each, then
    ``runs`` runs alternating the order run by run."""
    out: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="flintlock-schedulers-") as tmp:
        work, state = Path(tmp), Path(tmp) / "state"
        (work / "query.py").write_text(QUERY_PROGRAM.format(repo=str(REPO)))
        subprocess.run([*FLINTLOCK, "cluster", "start", "--taskmanagers", "2",
                        "-D", f"cluster.state-dir={state}", "-D", "rest.port=0",
                        "-D", "jobmanager.rpc.port=0", "-D", "taskmanager.numberOfTaskSlots=2"],
                       check=True, cwd=REPO, capture_output=True, timeout=300)
        try:
            for data in data_dirs:
                for query in queries:
                    for scheduler in configs:  # warm-up
                        one_run(scheduler, query, data, work, state, -1, parallelism)
                    for run in range(runs):
                        for scheduler in (configs if run % 2 == 0 else configs[::-1]):
                            r = one_run(scheduler, query, data, work, state, run, parallelism)
                            print(f"{data.name} {query} {scheduler} run {run}: job {r.job_s:.2f} s, "
                                  f"wall {r.wall_s:.1f} s", file=sys.stderr)
                            out.append(r)
        finally:
            subprocess.run([*FLINTLOCK, "cluster", "stop", "-D", f"cluster.state-dir={state}"],
                           cwd=REPO, capture_output=True, timeout=120)
    return out


def tables(runs: list[Run]) -> tuple[list[dict[str, object]], str]:
    rows = summarize(runs)
    return rows, "\n\n".join(table(rows, d) for d in dict.fromkeys(str(r["data"]) for r in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/tpch-sf1,data/tpch-sf0.1",
                        help="comma-separated TPC-H directories")
    parser.add_argument("--queries", default=",".join(f"q{i}" for i in range(1, 23)))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=4)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    runs = measure([Path(d).resolve() for d in args.data.split(",") if d],
                   args.queries.split(","), args.runs, args.parallelism)
    rows, body = tables(runs)
    print(body)
    write_page("benchmarks/schedulers.py", __doc__,
               "Schedulers: DefaultScheduler vs AdaptiveBatchScheduler on TPC-H", body,
               {"runs": [asdict(r) for r in runs], "rows": rows}, "schedulers", load,
               f", parallelism {args.parallelism}")


if __name__ == "__main__":
    main()
