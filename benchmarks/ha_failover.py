"""High-availability benchmark: the leading JobManager killed in the middle of a TPC-H query.

For each mode, a session cluster of two JobManagers (FILE high availability under the state
directory) and two TaskManagers is started with ``flintlock cluster start --jobmanagers 2``;
result partitions live in one shared directory (``shuffle.storage-dir``) in both modes, so the
only difference is ``execution.batch.job-recovery.enabled``:

- ``restart``: off (Flink's default): the new leader runs the whole job again;
- ``recovery``: on: the new leader keeps the subtasks that had finished (their partitions and
  staged sink output are still there) and runs the rest (FLIP-383).

Each run submits the query once undisturbed, then again and SIGKILLs the leader once
``--kill-at`` (default 0.5) of the undisturbed job time has passed; a replacement JobManager is
started afterwards (``flintlock cluster add-jobmanager``). Reported per mode (medians over the
runs): the undisturbed job time, the job time with the kill (both wall clock from the job
RUNNING to FINISHED, as REST shows them), their ratio, the time from the kill to the new leader
serving REST and to the job RUNNING again, how many subtasks ran again, and whether the output
equals the undisturbed one. The issue's targets: takeover within the ZooKeeper session timeout +
5 s (with FILE, within one 0.1 s poll), and with recovery a mid-way kill costs <= 1.3x.

    python benchmarks/ha_failover.py --data data/tpch-sf1 --queries q3,q18 --runs 10 --seed 13

(``--seed``: each run's kill point is drawn from 10%-90% of the undisturbed time, the same points
in both modes; without it every run kills at ``--kill-at``.)

writes the raw figures under ``benchmarks/results/`` and the table to ``docs/ha-benchmark.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.failover import (
    FLINTLOCK,
    QUERY_PROGRAM,
    REPO,
    _wait,
    read_rows,
    submitted_job_id,
)
from flintlock.config import Configuration
from flintlock.runtime.highavailability.services import create_ha_services
from flintlock.runtime.processes import pid_alive

MODES = {"restart": "false", "recovery": "true"}


@dataclass
class Run:
    query: str
    mode: str
    run: int
    undisturbed_s: float
    with_kill_s: float
    killed_after_s: float
    kill_to_rest_s: float
    kill_to_running_s: float
    subtasks: int
    rerun: int
    output_matches: bool
    #: both outputs (undisturbed and with the kill) are DuckDB's answer
    duckdb_answer: bool = False

    @property
    def ratio(self) -> float:
        return self.with_kill_s / self.undisturbed_s


class HaCluster:
    """``flintlock cluster start --jobmanagers 2`` on ephemeral ports (with ``zookeeper``:
    ``--zookeeper``, a local ZooKeeper and a 6 s session timeout); REST calls go to the leader
    of the moment, found through the cluster's HA settings (``<state>/ha.json``)."""

    def __init__(self, state: Path, settings: dict[str, str], zookeeper: bool = False) -> None:
        self.state = state
        self.zookeeper = zookeeper
        if zookeeper:
            settings = {"high-availability.zookeeper.client.session-timeout": "6 s", **settings}
        self.dynamic = [f"{k}={v}" for k, v in {
            "rest.port": "0", "cluster.state-dir": str(state), "heartbeat.interval": "500 ms",
            "heartbeat.timeout": "5 s", **settings}.items()]
        self.http = httpx.Client(timeout=10)
        self._ha: Any = None

    def _d(self) -> list[str]:
        return [a for item in self.dynamic for a in ("-D", item)]

    def __enter__(self) -> HaCluster:
        proc = subprocess.run([*FLINTLOCK, "cluster", "start", "--jobmanagers", "2",
                               *(["--zookeeper"] if self.zookeeper else []),
                               "--taskmanagers", "2", *self._d()], capture_output=True,
                              text=True, timeout=300, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"cluster start failed:\n{proc.stdout}\n{proc.stderr}")
        self._ha = create_ha_services(Configuration(
            json.loads((self.state / "ha.json").read_text())))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ha is not None:
            self._ha.close()
        subprocess.run([*FLINTLOCK, "cluster", "stop", *self._d()], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
        self.http.close()

    def leader(self) -> Any:
        return self._ha.current_leader()

    def job(self, job_id: str) -> dict[str, Any] | None:
        """The job as the current leader shows it (None while no leader answers)."""
        leader = self.leader()
        if leader is None:
            return None
        try:
            response = self.http.get(f"{leader.addresses['rest']}/v1/jobs/{job_id}")
        except httpx.HTTPError:
            return None
        return dict(response.json()) if response.status_code == 200 else None

    def state_of(self, job_id: str) -> str:
        job = self.job(job_id)
        return str(job["state"]) if job else "?"

    def submit(self, program: Path, *args: str) -> str:
        proc = subprocess.run([*FLINTLOCK, "run", "--target", "remote", "-d",
                               "-D", f"cluster.state-dir={self.state}", str(program), *args],
                              capture_output=True, text=True, timeout=300, cwd=REPO)
        return submitted_job_id(proc.stderr)

    def leader_pid(self) -> int:
        for port_file in self.state.glob("jobmanager*.port"):
            data = json.loads(port_file.read_text())
            if data.get("leader") and pid_alive(int(data["pid"])):
                return int(data["pid"])
        raise RuntimeError("no live JobManager leads")

    def add_job_manager(self) -> None:
        proc = subprocess.run([*FLINTLOCK, "cluster", "add-jobmanager", *self._d()],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"add-jobmanager failed:\n{proc.stdout}\n{proc.stderr}")

    def job_manager_logs(self) -> str:
        return "".join(p.read_text(errors="replace")
                       for p in (self.state / "log").glob("flintlock-jobmanager-*.log"))


def _until(cluster: HaCluster, job_id: str, states: tuple[str, ...], timeout_s: float) -> str:
    _wait(lambda: cluster.state_of(job_id) in states, timeout_s, f"job {job_id} in {states}",
          0.05, lambda: cluster.state_of(job_id))
    return cluster.state_of(job_id)


def _run_to_end(cluster: HaCluster, program: Path, args: list[str], name: str) -> tuple[str, float]:
    """Submit and wait; returns the job id and its time from RUNNING to FINISHED (wall s)."""
    job_id = cluster.submit(program, *args, "--name", name)
    _until(cluster, job_id, ("RUNNING", "FINISHED"), 300)
    running = time.monotonic()
    if _until(cluster, job_id, ("FINISHED", "FAILED", "CANCELED"), 1800) != "FINISHED":
        raise RuntimeError(f"job {name} ended {cluster.state_of(job_id)}")
    return job_id, time.monotonic() - running


def reference_answer(query: str, data: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """DuckDB's answer to TPC-H ``query`` over ``data`` (``examples/tpch/reference.py``)."""
    from examples.tpch import reference

    con = reference.connect(data)
    try:
        result = con.execute(reference.QUERIES[query])
        return [d[0] for d in result.description], result.fetchall()
    finally:
        con.close()


def is_answer(out: Path, answer: tuple[list[str], list[tuple[Any, ...]]]) -> bool:
    """Whether the Parquet files under ``out`` hold ``answer`` (as a multiset; numbers within
    1e-6 relative, ``benchmarks/verify.check_answer``)."""
    import pyarrow.parquet as pq

    from benchmarks.verify import WrongAnswer, check_answer

    table = pq.read_table(str(out))
    columns = [table.column(c).to_pylist() for c in table.column_names]
    rows = list(zip(*columns, strict=True))
    try:
        check_answer(str(out), table.column_names, rows, *answer, sort_keys=[])
    except WrongAnswer as exc:
        print(f"wrong answer: {exc}", file=sys.stderr)
        return False
    return True


def one_run(cluster: HaCluster, program: Path, query: str, data: str, parallelism: int,
            work: Path, mode: str, run: int, kill_at: float,
            answer: tuple[list[str], list[tuple[Any, ...]]] | None = None) -> Run:
    args = ["--query", query, "--data", data, "--parallelism", str(parallelism)]
    clean_out, out = work / f"{mode}-{run}-clean", work / f"{mode}-{run}-kill"
    clean_id, undisturbed_s = _run_to_end(cluster, program, [*args, "--out", str(clean_out)],
                                          f"{query} undisturbed")
    subtasks = sum(int(v["parallelism"]) for v in (cluster.job(clean_id) or {})["vertices"])
    job_id = cluster.submit(program, *args, "--out", str(out), "--name", f"{query} leader kill")
    _until(cluster, job_id, ("RUNNING", "FINISHED"), 300)
    started = time.monotonic()
    old = cluster.leader()
    time.sleep(max(0.0, started + kill_at * undisturbed_s - time.monotonic()))  # the kill point
    if cluster.state_of(job_id) != "RUNNING":
        raise RuntimeError(f"the job was {cluster.state_of(job_id)} at the kill point; "
                           "use a smaller --kill-at")
    killed = time.monotonic()
    os.kill(cluster.leader_pid(), signal.SIGKILL)

    def serving() -> bool:
        leader = cluster.leader()
        if leader is None or leader.session_id == old.session_id:
            return False
        try:
            return cluster.http.get(f"{leader.addresses['rest']}/v1/overview").status_code == 200
        except httpx.HTTPError:
            return False

    _wait(serving, 120, "a new leader serving REST", 0.02)
    to_rest = time.monotonic() - killed
    _until(cluster, job_id, ("RUNNING", "FINISHED"), 300)
    to_running = time.monotonic() - killed
    if _until(cluster, job_id, ("FINISHED", "FAILED", "CANCELED"), 1800) != "FINISHED":
        raise RuntimeError(f"job {job_id} ended {cluster.state_of(job_id)} after the kill")
    with_kill_s = time.monotonic() - started
    kept = re.findall(rf"job {job_id}: batch job recovery keeps (\d+) of its (\d+) subtasks",
                      cluster.job_manager_logs())
    rerun = subtasks - int(kept[-1][0]) if kept else subtasks
    cluster.add_job_manager()
    return Run(query, mode, run, undisturbed_s, with_kill_s, killed - started, to_rest, to_running,
               subtasks, rerun, read_rows(out) == read_rows(clean_out),
               answer is not None and is_answer(clean_out, answer) and is_answer(out, answer))


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for query, mode in sorted({(r.query, r.mode) for r in runs},
                              key=lambda qm: (qm[0], list(MODES).index(qm[1]))):
        mine = [r for r in runs if (r.query, r.mode) == (query, mode)]

        def med(f: Any, mine: list[Run] = mine) -> float:
            return statistics.median(f(r) for r in mine)

        rows.append({"query": query, "mode": mode, "runs": len(mine), "undisturbed_s": med(lambda r: r.undisturbed_s),
                     "with_kill_s": med(lambda r: r.with_kill_s), "ratio": med(lambda r: r.ratio),
                     "kill_to_rest_s": med(lambda r: r.kill_to_rest_s),
                     "kill_to_running_s": med(lambda r: r.kill_to_running_s),
                     "rerun": med(lambda r: r.rerun), "subtasks": mine[0].subtasks,
                     "max_ratio": max(r.ratio for r in mine),
                     "outputs_match": all(r.output_matches for r in mine),
                     "duckdb": sum(r.duckdb_answer for r in mine)})
    return rows


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# High-availability benchmark: the leader killed during TPC-H queries",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}).",
        "",
        f"TPC-H {meta['queries'].upper()} ({meta['data']}), parallelism {meta['parallelism']}, on a "
        f"session cluster of two JobManagers ({meta.get('ha', 'FILE high availability')}) and "
        "two TaskManagers, result "
        "partitions in one shared directory. Each run executes the query undisturbed, then again "
        f"with SIGKILL to the leading JobManager at {meta['kill_text']} of the undisturbed time; "
        "the standby takes over and a replacement JobManager is started afterwards. Times are "
        "wall clock from the job RUNNING to FINISHED as REST shows them, medians over the runs.",
        "",
        "| query | mode | runs | undisturbed (s) | leader killed (s) | relative time (max) "
        "| kill -> REST (s) | kill -> running (s) | subtasks run again | output equal "
        "| DuckDB's answer |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['query'].upper()} | {r['mode']} | {r['runs']} | {r['undisturbed_s']:.1f} | "
            f"{r['with_kill_s']:.1f} | {r['ratio']:.2f}x ({r['max_ratio']:.2f}x) | "
            f"{r['kill_to_rest_s']:.2f} | {r['kill_to_running_s']:.2f} | "
            f"{r['rerun']:.0f} of {r['subtasks']} | {'yes' if r['outputs_match'] else 'NO'} | "
            f"{r['duckdb']} of {r['runs']} |")
    lines += ["", "`restart`: `execution.batch.job-recovery.enabled: false` (Flink's default): the "
              "new leader runs the job from the start. `recovery`: `true`: it keeps the finished "
              "subtasks whose partitions and staged output are still there. Raw figures: "
              f"`{meta['json']}`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="data/tpch-sf1", help="TPC-H directory (default data/tpch-sf1)")
    p.add_argument("--queries", default="q3", help="comma-separated TPC-H queries")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--kill-at", type=float, default=0.5,
                   help="kill the leader at this share of the undisturbed job time")
    p.add_argument("--seed", type=int, default=None,
                   help="instead of --kill-at, draw each run's kill point from [0.1, 0.9] with "
                        "this seed (the same points in every mode)")
    p.add_argument("--modes", default="restart,recovery")
    p.add_argument("--zookeeper", action="store_true",
                   help="ZooKeeper high availability (a local ZooKeeper, 6 s session timeout) "
                        "instead of FILE")
    p.add_argument("--results", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--doc", default=str(REPO / "docs" / "ha-benchmark.md"))
    args = p.parse_args(argv)
    data = str(Path(args.data).resolve())
    load_at_start = os.getloadavg()[0]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="flintlock-ha-bench-") as tmp:
        work = Path(tmp)
        program = work / "query.py"
        program.write_text(QUERY_PROGRAM.format(repo=str(REPO)))
        queries = args.queries.split(",")
        answers = {q: reference_answer(q, data) for q in queries}
        for mode in args.modes.split(","):
            settings = {"shuffle.storage-dir": str(work / f"shuffle-{mode}"),
                        "execution.batch.job-recovery.enabled": MODES[mode]}
            points = random.Random(args.seed)
            with HaCluster(work / f"cluster-{mode}", settings, args.zookeeper) as cluster:
                _run_to_end(cluster, program, ["--query", queries[0], "--data", data,
                                               "--parallelism", str(args.parallelism), "--out",
                                               str(work / f"{mode}-warm-up")], "warm-up")
                for query, run in ((q, n) for q in queries for n in range(args.runs)):
                    kill_at = args.kill_at if args.seed is None else points.uniform(0.1, 0.9)
                    r = one_run(cluster, program, query, data, args.parallelism,
                                work / f"{query}-", mode, run, kill_at, answers[query])
                    print(f"{query} {mode} run {run} (kill at {kill_at:.0%}): "
                          f"{r.undisturbed_s:.1f} s -> {r.with_kill_s:.1f} s "
                          f"({r.ratio:.2f}x), REST after {r.kill_to_rest_s:.2f} s, running after "
                          f"{r.kill_to_running_s:.2f} s, {r.rerun}/{r.subtasks} run again, "
                          f"output equal: {r.output_matches}, DuckDB's answer: "
                          f"{r.duckdb_answer}", file=sys.stderr)
                    runs.append(r)
    rows = summarize(runs)
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    json_path = results / f"ha-{args.queries.replace(',', '-')}-{stamp}.json"
    meta = {"queries": args.queries, "data": args.data, "parallelism": args.parallelism,
            "kill_at": args.kill_at, "seed": args.seed, "runs": args.runs,
            "ha": ("ZooKeeper high availability (a local ZooKeeper, 6 s session timeout)"
                   if args.zookeeper else "FILE high availability"),
            "kill_text": (f"{args.kill_at:.0%}" if args.seed is None else
                          f"a point drawn from 10%-90% (seed {args.seed}; the same points in "
                          "both modes)"), "date": dt.date.today().isoformat(),
            "machine": (f"{platform.platform()}, {os.cpu_count()} cores, Python "
                        f"{platform.python_version()}, load average {load_at_start:.1f} at the "
                        "start"),
            "command": "python benchmarks/ha_failover.py " + " ".join(
                argv if argv is not None else sys.argv[1:]),
            "json": os.path.relpath(json_path, REPO)}
    json_path.write_text(json.dumps({"meta": meta, "summary": rows,
                                     "runs": [asdict(r) for r in runs]}, indent=2))
    Path(args.doc).write_text(markdown(rows, meta))
    print(markdown(rows, meta))
    return 0 if all(r["outputs_match"] and r["duckdb"] == r["runs"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
