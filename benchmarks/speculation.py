"""Speculative execution benchmark: TPC-H with one TaskManager made 5x slower, speculation off/on.

Three session clusters run side by side (2 TaskManagers x 2 slots each, embedded Spark servers
of ``local[2]`` each: a TaskManager left alone can use the machine's two cores): ``healthy`` with
two ordinary TaskManagers, and two clusters (one per mode, so that one mode's blocked node never
shapes the other's runs) whose second TaskManager was added with ``flintlock cluster
add-taskmanager -D $internal.fault.task-slowdown=5 -D $internal.fault.task-slowdown.mode=throttle``:
its Spark server (JVM and Python workers) runs 20 ms of every 100 ms and is stopped (SIGSTOP) for
the rest, as on a node whose CPUs are 5x slower (``--fault wait`` instead lets each task work at
full speed and then wait 4x its run time, the model of this page until 2026-12-02: a node that
competes for the CPU like a healthy one and only reports late). Every query runs at
parallelism ``P`` (auto-parallelism off, so both TaskManagers get subtasks) in three modes,
alternating run by run after one warm-up each: on ``healthy`` (the no-slow-node time), on a slow
cluster without speculation, and on the other with ``execution.batch.speculative.enabled``
(detector: check every 0.5 s at the latest, baseline lower bound 1 s, since the 1 min default
would never speculate queries of seconds, and baseline ratio 0.5, since with half the slots slow
Flink's 0.75 is never reached; multiplier 1.5 as in Flink; slow nodes blocked for ``--block``,
1 min by default as in Flink, longer than a job's remaining stages: with a 20 s block, queries
running longer got the slow node back mid-job; each run starts once the previous run's block ran
out). Reported per query (medians of the job durations the client prints): each mode's time and
slow / healthy with speculation off and on. Target (issue 15): with the slow TaskManager, speculation brings the job
within 1.3x of the no-slow-node time.

    python benchmarks/speculation.py --data data/tpch-sf1 --queries q1,q3,q6,q12,q18 --runs 2

prints the table, writes the raw figures to ``benchmarks/results/`` and the page
``docs/speculation-benchmark.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.failover import FLINTLOCK, QUERY_PROGRAM, REPO
from benchmarks.machine import write_page

MODES = ("healthy", "slow", "slow+speculation")
SLOWDOWN = 5
#: how the slow TaskManager is slow (``$internal.fault.task-slowdown.mode``)
FAULT = "throttle"
#: how long a slow node stays blocked (``--block``; Flink's default
#: ``execution.batch.speculative.block-slow-node-duration``)
BLOCK = "60 s"
SPECULATION = ("execution.batch.speculative.enabled=true",
               "slow-task-detector.execution-time.baseline-ratio=0.5",
               "slow-task-detector.check-interval=500 ms",
               "slow-task-detector.execution-time.baseline-lower-bound=1 s")
_FINISHED = re.compile(r"FINISHED in (\d+)\s*ms")  # rich may wrap the line


@dataclass
class Run:
    query: str
    mode: str
    run: int
    job_s: float


def _cli(*args: str, timeout: float = 300) -> None:
    proc = subprocess.run([*FLINTLOCK, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"flintlock {' '.join(args)}: {proc.stdout}\n{proc.stderr[-3000:]}")


@contextlib.contextmanager
def cluster(state: Path, slow: bool, fault: str = FAULT,
            keep_logs: Path | None = None) -> Iterator[Path]:
    """A session cluster of 2 TaskManagers x 2 slots; with ``slow``, the second is slowed
    (``fault``: ``$internal.fault.task-slowdown.mode``). With ``keep_logs``, its processes' logs
    are copied to ``keep_logs/<state dir name>`` once it stopped (jobs are named
    ``<query>-<mode>-<run>``, runs -1 being warm-ups)."""
    d = ["-D", f"cluster.state-dir={state}", "-D", "rest.port=0", "-D", "jobmanager.rpc.port=0",
         "-D", "taskmanager.numberOfTaskSlots=2", "-D", "taskmanager.cpu.cores=2"]
    try:
        _cli("cluster", "start", "--taskmanagers", "1" if slow else "2", *d)
        if slow:
            _cli("cluster", "add-taskmanager", *d, "-D",
                 f"$internal.fault.task-slowdown={SLOWDOWN}", "-D",
                 f"$internal.fault.task-slowdown.mode={fault}")
        yield state
    finally:
        subprocess.run([*FLINTLOCK, "cluster", "stop", *d], cwd=REPO, capture_output=True,
                       timeout=120)
        if keep_logs is not None and (state / "log").is_dir():
            shutil.copytree(state / "log", keep_logs / state.name, dirs_exist_ok=True)


def wait_unblocked(state: Path) -> None:
    """Until no TaskManager of the cluster is blocked (``/overview`` ``taskmanagers-blocked``)."""
    port = json.loads((state / "jobmanager.port").read_text())["rest_port"]
    deadline = time.monotonic() + 300
    while httpx.get(f"http://127.0.0.1:{port}/overview").json().get("taskmanagers-blocked"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"a TaskManager of {state} is still blocked after 300 s")
        time.sleep(0.2)


def one_run(mode: str, state: Path, query: str, data: Path, work: Path, run: int,
            parallelism: int, block: str = BLOCK) -> Run:
    out = work / f"out-{mode}-{query}-{run}"
    flags = ["-D", "execution.batch.adaptive.auto-parallelism.enabled=false"]
    if mode == "slow+speculation":
        flags += [a for option in (*SPECULATION, f"execution.batch.speculative."
                                   f"block-slow-node-duration={block}") for a in ("-D", option)]
        wait_unblocked(state)
    command = [*FLINTLOCK, "run", "--target", "remote", "-D", f"cluster.state-dir={state}",
               *flags, str(work / "query.py"), "--query", query, "--data", str(data),
               "--out", str(out), "--name", f"{query}-{mode}-{run}",
               "--parallelism", str(parallelism)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=REPO,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, "COLUMNS": "200"})
    found = _FINISHED.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{mode} {query} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return Run(query, mode, run, int(found.group(1)) / 1000)


def summarize(runs: list[Run]) -> list[dict[str, object]]:
    rows = []
    for query in dict.fromkeys(r.query for r in runs):
        row: dict[str, object] = {"query": query.upper()}
        for mode in MODES:
            mine = [r.job_s for r in runs if (r.query, r.mode) == (query, mode)]
            row[mode] = statistics.median(mine)
            row["runs"] = len(mine)
        row["off"] = float(row["slow"]) / float(row["healthy"])  # type: ignore[arg-type]
        row["on"] = float(row["slow+speculation"]) / float(row["healthy"])  # type: ignore[arg-type]
        rows.append(row)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    lines = ["| query | runs | healthy (s) | slow, speculation off (s) | slow, speculation on (s) "
             "| off / healthy | on / healthy |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['query']} | {r['runs']} | {r['healthy']:.2f} | {r['slow']:.2f} | "
                     f"{r['slow+speculation']:.2f} | {r['off']:.2f}x | {r['on']:.2f}x |")

    def geo(key: str) -> float:
        return math.exp(statistics.fmean(math.log(float(r[key])) for r in rows))  # type: ignore[arg-type]

    worst = max(rows, key=lambda r: float(r["on"]))  # type: ignore[arg-type]
    met = sum(float(r["on"]) <= 1.3 for r in rows)  # type: ignore[arg-type]
    lines += ["", f"Geometric mean slow / healthy: **{geo('off'):.2f}x** without speculation, "
              f"**{geo('on'):.2f}x** with it; {met} of {len(rows)} queries within the 1.3x "
              f"target; worst with speculation: {worst['query']} {float(worst['on']):.2f}x."]  # type: ignore[arg-type]
    return "\n".join(lines)


def measure(data: Path, queries: list[str], runs: int, parallelism: int,
            warm_up_every_query: bool = True, block: str = BLOCK,
            fault: str = FAULT, keep_logs: Path | None = None) -> list[Run]:
    """Run every query in the three modes on their own session clusters: a warm-up each (for
    every query, or only the first when ``warm_up_every_query`` is false), then ``runs`` runs
    alternating the order run by run; ``keep_logs``: see ``cluster``."""
    out: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="flintlock-speculation-") as tmp:
        work = Path(tmp)
        (work / "query.py").write_text(QUERY_PROGRAM.format(repo=str(REPO)))
        with cluster(work / "healthy", slow=False, keep_logs=keep_logs) as healthy, \
                cluster(work / "slow", slow=True, fault=fault, keep_logs=keep_logs) as slow, \
                cluster(work / "slow-speculation", slow=True, fault=fault,
                        keep_logs=keep_logs) as speculating:
            state = {"healthy": healthy, "slow": slow, "slow+speculation": speculating}
            for index, query in enumerate(queries):
                for mode in MODES if warm_up_every_query or index == 0 else ():
                    r = one_run(mode, state[mode], query, data, work, -1, parallelism, block)
                    print(f"{query} {mode} warm-up: job {r.job_s:.2f} s", file=sys.stderr)
                for run in range(runs):
                    for mode in (MODES if run % 2 == 0 else MODES[::-1]):
                        start = time.time()
                        r = one_run(mode, state[mode], query, data, work, run, parallelism,
                                    block)
                        print(f"{query} {mode} run {run}: job {r.job_s:.2f} s "
                              f"(wall {time.time() - start:.1f} s)", file=sys.stderr)
                        out.append(r)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/tpch-sf1")
    parser.add_argument("--queries", default=",".join(f"q{i}" for i in range(1, 23)))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--block", default=BLOCK,
                        help="execution.batch.speculative.block-slow-node-duration")
    parser.add_argument("--fault", default=FAULT, choices=("throttle", "wait"),
                        help="how the slow TaskManager is slow ($internal.fault.task-slowdown"
                             ".mode)")
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="copy the clusters' logs into this directory")
    args = parser.parse_args()
    data = Path(args.data).resolve()
    load = os.getloadavg()[0]
    runs = measure(data, args.queries.split(","), args.runs, args.parallelism, block=args.block,
                   fault=args.fault, keep_logs=args.keep_logs)
    rows = summarize(runs)
    body = table(rows)
    print(body)
    write_page("benchmarks/speculation.py", __doc__,
               "Speculative execution: TPC-H with a 5x slow TaskManager", body,
               {"runs": [asdict(r) for r in runs], "rows": rows}, "speculation", load,
               f", data {data.name}, parallelism {args.parallelism}, slow nodes blocked for "
               f"{args.block}, slow-node fault {args.fault}")


if __name__ == "__main__":
    main()
