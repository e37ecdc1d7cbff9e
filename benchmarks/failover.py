"""Failover benchmark: a TaskManager killed during a TPC-H query, ``region`` versus ``full``.

For each failover strategy (``jobmanager.execution.failover-strategy``) a two-TaskManager session
cluster is started (separate processes, as ``flintlock cluster start`` does). Each run submits the
query twice: once without a failure, and once killing (SIGKILL, its whole process group with its
Spark JVM) the TaskManager that runs a subtask of the query's last stage while that subtask runs.
A replacement TaskManager is started after the job ended, so every run starts with two. Reported:

- job time (the JobManager's ``duration`` of the job, submission to FINISHED) with the failure
  relative to the failure-free run;
- the share of subtasks re-executed (subtasks whose final attempt number is > 0, over all
  subtasks) and the extra attempts (sum of attempt numbers over all subtasks);
- whether the output with the failure equals the failure-free output exactly.

The TaskManager loss is detected by the heartbeat timeout or the broken RPC connection
(``heartbeat.interval`` 500 ms, ``heartbeat.timeout`` 3 s here); the restart strategy is
fixed-delay with no delay, so the job time measures detection and recomputation only. Result
partitions live on each TaskManager's local disk (``--storage local``, the default: a killed
TaskManager's finished partitions are lost and their producers re-run) or in one shared directory
(``--storage shared``, like a remote shuffle service).

    python benchmarks/failover.py --sf 1 --data data --runs 3

prints a table, writes the raw figures as JSON under ``benchmarks/results/`` and the table as
markdown to ``docs/failover-benchmark.md``. ``SessionCluster`` (start/stop a cluster, find and
kill a TaskManager's processes, start a replacement) is also used by the process tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
FLINTLOCK = [sys.executable, "-m", "flintlock"]
TERMINAL = {"FINISHED", "FAILED", "CANCELED"}

#: argv: --query --data --out --parallelism --name; the query's result written by a FileSink
QUERY_PROGRAM = """
import argparse, sys
sys.path.insert(0, {repo!r})
from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink
from examples.tpch import builder

p = argparse.ArgumentParser()
for a in ("--query", "--data", "--out", "--name"):
    p.add_argument(a, required=True)
p.add_argument("--parallelism", type=int, default=2)
args = p.parse_args()
env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(args.parallelism)
builder(args.query)(env, args.data).sink_to(FileSink.parquet(args.out))
env.execute(args.name)
"""


def _wait(predicate: Callable[[], Any], timeout_s: float, what: str,
          interval_s: float = 0.05, describe: Callable[[], Any] | None = None) -> Any:
    """Poll ``predicate`` until truthy; TimeoutError naming ``what`` and what was seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; seen: {describe()}" if describe is not None else ""
            raise TimeoutError(f"{what} not within {timeout_s:.0f} s{seen}")
        time.sleep(interval_s)


class SessionCluster:
    """A standalone session cluster of separate processes, driven through CLI and REST.

    Args:
        state_dir: the cluster's state directory (pid and port files, logs, secret).
        dynamic: ``-D`` settings for every process (``cluster.state-dir`` and ephemeral ports are
            added).
        task_managers: TaskManagers started with the cluster.
    """

    def __init__(self, state_dir: Path, dynamic: dict[str, str], task_managers: int = 2) -> None:
        self.state_dir = state_dir
        self.dynamic = {"rest.port": "0", "jobmanager.rpc.port": "0", **dynamic,
                        "cluster.state-dir": str(state_dir)}
        self.task_managers = task_managers
        self.rest = ""
        self.rpc_port = 0
        self._http = httpx.Client(timeout=30)
        #: TaskManagers started by ``start_task_manager`` (children of this process)
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def _d(self, extra: dict[str, str] | None = None) -> list[str]:
        return [a for k, v in {**self.dynamic, **(extra or {})}.items() for a in ("-D", f"{k}={v}")]

    def start(self) -> SessionCluster:
        """``flintlock cluster start``; returns once every TaskManager registered."""
        proc = subprocess.run([*FLINTLOCK, "cluster", "start", "--taskmanagers",
                               str(self.task_managers), *self._d()],
                              capture_output=True, text=True, timeout=300, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"cluster start failed:\n{proc.stderr}\n{self.logs()}")
        ports = json.loads((self.state_dir / "jobmanager.port").read_text())
        self.rest = f"http://127.0.0.1:{ports['rest_port']}"
        self.rpc_port = int(ports["rpc_port"])
        return self

    def stop(self) -> None:
        """Stop the TaskManagers started here (and reap them), then ``flintlock cluster stop``."""
        for name, proc in self._children.items():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                except ProcessLookupError:
                    proc.wait()
            (self.state_dir / f"{name}.pid").unlink(missing_ok=True)
        subprocess.run([*FLINTLOCK, "cluster", "stop", *self._d()], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
        self._http.close()

    def __enter__(self) -> SessionCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-tail:]}"
                         for p in sorted((self.state_dir / "log").glob("*.log")))

    # ---- REST ----------------------------------------------------------------------------------

    def get(self, path: str) -> Any:
        response = self._http.get(f"{self.rest}/v1{path}")
        response.raise_for_status()
        return response.json()

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self.get(f"/jobs/{job_id}"))

    def registered_task_managers(self) -> list[str]:
        return [tm["id"] for tm in self.get("/taskmanagers")["taskmanagers"]]

    def attempts(self, job_id: str) -> dict[str, list[int]]:
        """Vertex id -> final attempt number of each subtask (in subtask order)."""
        out = {}
        for v in self.job(job_id)["vertices"]:
            details = self.get(f"/jobs/{job_id}/vertices/{v['id']}")
            out[v["id"]] = [s["attempt"] for s in details["subtasks"]]
        return out

    def wait_for_state(self, job_id: str, states: set[str], timeout_s: float) -> dict[str, Any]:
        holder: list[dict[str, Any]] = []

        def reached() -> bool:
            holder[:] = [self.job(job_id)]
            return holder[0]["state"] in states

        _wait(reached, timeout_s, f"job {job_id} in {sorted(states)}", 0.1,
              lambda: holder[0]["state"] if holder else "?")
        return holder[0]

    # ---- processes -----------------------------------------------------------------------------

    def task_manager_pids(self) -> dict[str, int]:
        """ResourceID -> pid (a process group leader) of each running TaskManager."""
        out = {}
        for port_file in self.state_dir.glob("taskmanager-*.port"):
            try:
                data = json.loads(port_file.read_text())
            except (OSError, ValueError):
                continue
            out[str(data["resource_id"])] = int(data["pid"])
        return out

    def kill_task_manager(self, resource_id: str) -> int:
        """SIGKILL the TaskManager's whole process group (its Python process and Spark JVM)."""
        pids = self.task_manager_pids()
        if resource_id not in pids:
            raise KeyError(f"no TaskManager {resource_id} among {sorted(pids)}")
        pid = pids[resource_id]
        os.killpg(pid, signal.SIGKILL)
        for port_file in self.state_dir.glob("taskmanager-*.port"):
            if json.loads(port_file.read_text()).get("pid") == pid:
                port_file.unlink()
        return pid

    def start_task_manager(self, extra: dict[str, str] | None = None,
                           timeout_s: float = 180) -> str:
        """Start one more TaskManager (it gets a pid file, so ``stop`` ends it); its ResourceID
        once it registered at the ResourceManager."""
        name = f"taskmanager-r{len(self._children) + 1}"
        log_dir = self.state_dir / "log"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "FLINTLOCK_CLUSTER_SECRET": (self.state_dir / "secret").read_text(),
               "PYTHONUNBUFFERED": "1"}
        port_file = self.state_dir / f"{name}.port"
        args = [*FLINTLOCK, "-v", "taskmanager", *self._d(extra),
                "-D", f"jobmanager.rpc.port={self.rpc_port}", "--port-file", str(port_file)]
        with open(log_dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, cwd=REPO,
                                    start_new_session=True)
        self._children[name] = proc
        (self.state_dir / f"{name}.pid").write_text(str(proc.pid))
        _wait(lambda: port_file.exists() or proc.poll() is not None, timeout_s,
              f"{name} serving")
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.logs()}")
        resource_id = str(json.loads(port_file.read_text())["resource_id"])
        _wait(lambda: resource_id in self.registered_task_managers(), timeout_s,
              f"{name} registered", 0.1, self.registered_task_managers)
        return resource_id

    def submit(self, program: Path, *args: str, detached: bool = True,
               timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        """``flintlock run --target remote [-d] program args`` against this cluster."""
        return subprocess.run(
            [*FLINTLOCK, "run", "--target", "remote", *(["-d"] if detached else []),
             "-D", f"cluster.state-dir={self.state_dir}", str(program), *args],
            capture_output=True, text=True, timeout=timeout_s, cwd=REPO)


def submitted_job_id(stderr: str) -> str:
    """The JobID a detached ``flintlock run`` printed."""
    match = re.search(r"JobID ([0-9a-f]{32})", stderr)
    if match is None:
        raise RuntimeError(f"no JobID in the client's output:\n{stderr[-3000:]}")
    return match.group(1)


def last_stage(job: dict[str, Any]) -> dict[str, Any]:
    """The job's last vertex (one no other vertex consumes)."""
    consumed = {i["id"] for n in job["plan"]["nodes"] for i in n.get("inputs", [])}
    (last,) = [v for v in job["vertices"] if v["id"] not in consumed]
    return dict(last)


def wait_for_running_subtask(cluster: SessionCluster, job_id: str, vertex_id: str,
                             timeout_s: float = 300) -> dict[str, Any] | None:
    """Poll the vertex until one of its subtasks RUNS on a TaskManager; that subtask, or None
    once the job ended first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        details = cluster.get(f"/jobs/{job_id}/vertices/{vertex_id}")
        for sub in details["subtasks"]:
            if sub["status"] == "RUNNING" and sub["taskmanager-id"] != "(unassigned)":
                return dict(sub)
        if cluster.job(job_id)["state"] in TERMINAL:
            return None
        time.sleep(0.02)
    raise TimeoutError(f"no subtask of vertex {vertex_id} ran within {timeout_s} s")


def read_rows(path: Path) -> list[tuple[Any, ...]]:
    """The rows of every Parquet file under ``path``, sorted."""
    import pyarrow.parquet as pq

    rows: list[tuple[Any, ...]] = []
    for f in sorted(path.rglob("*.parquet")):
        table = pq.read_table(f)
        rows.extend(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))
    return sorted(rows, key=repr)


# ---- the benchmark -----------------------------------------------------------------------------------


@dataclass
class Run:
    strategy: str
    run: int
    failure_free_ms: int
    with_failure_ms: int
    killed_task_manager: str
    killed_after_ms: int
    subtasks: int
    reexecuted: int
    extra_attempts: int
    output_matches: bool
    attempts: dict[str, list[int]] = field(default_factory=dict)

    @property
    def relative_time(self) -> float:
        return self.with_failure_ms / self.failure_free_ms


def _job_ms(job: dict[str, Any]) -> int:
    return int(job["end-time"]) - int(job["start-time"])


def one_run(cluster: SessionCluster, program: Path, query: str, data: str, parallelism: int,
            work: Path, strategy: str, run: int, attempts_left: int = 3) -> Run:
    """A failure-free job, then the same job with the last stage's TaskManager killed."""
    args = ["--query", query, "--data", data, "--parallelism", str(parallelism)]
    clean_out = work / f"{strategy}-{run}-clean"
    proc = cluster.submit(program, *args, "--out", str(clean_out), "--name", f"{query} clean")
    clean_id = submitted_job_id(proc.stderr)
    clean = cluster.wait_for_state(clean_id, TERMINAL, 1800)
    if clean["state"] != "FINISHED":
        raise RuntimeError(f"failure-free job {clean_id} ended {clean['state']}")
    for attempt in range(attempts_left):
        out = work / f"{strategy}-{run}-failure-{attempt}"
        proc = cluster.submit(program, *args, "--out", str(out), "--name", f"{query} with failure")
        job_id = submitted_job_id(proc.stderr)
        job = cluster.job(job_id)
        subtask = wait_for_running_subtask(cluster, job_id, last_stage(job)["id"])
        if subtask is None:  # finished before the last stage was seen running: try again
            continue
        killed = subtask["taskmanager-id"]
        killed_after = int(time.time() * 1000) - int(job["start-time"])
        cluster.kill_task_manager(killed)
        failed = cluster.wait_for_state(job_id, TERMINAL, 1800)
        if failed["state"] != "FINISHED":
            raise RuntimeError(f"job {job_id} ended {failed['state']} after the TaskManager loss:"
                               f" {cluster.get(f'/jobs/{job_id}/exceptions')}")
        names = {v["id"]: v["name"] for v in failed["vertices"]}
        attempts = {f"{names[vid]} [{vid}]": a for vid, a in cluster.attempts(job_id).items()}
        cluster.start_task_manager()
        flat = [a for subtasks in attempts.values() for a in subtasks]
        return Run(strategy, run, _job_ms(clean), _job_ms(failed), killed, killed_after,
                   len(flat), sum(1 for a in flat if a > 0), sum(flat),
                   read_rows(out) == read_rows(clean_out), attempts)
    raise RuntimeError(f"the last stage of {query} never ran long enough to be caught")


def warm_up(cluster: SessionCluster, program: Path, query: str, data: str, parallelism: int,
            out: Path) -> None:
    """One unmeasured job, so both TaskManagers' Spark sessions are warm for the measured ones."""
    proc = cluster.submit(program, "--query", query, "--data", data, "--parallelism",
                          str(parallelism), "--out", str(out.with_name(out.name + "-warm-up")),
                          "--name", f"{query} warm-up")
    job_id = submitted_job_id(proc.stderr)
    if cluster.wait_for_state(job_id, TERMINAL, 1800)["state"] != "FINISHED":
        raise RuntimeError(f"warm-up job {job_id} did not finish:\n{cluster.logs()}")


def _settings(strategy: str, storage: str, shared_dir: Path) -> dict[str, str]:
    settings = {
        "jobmanager.execution.failover-strategy": strategy,
        "heartbeat.interval": "500 ms",
        "heartbeat.timeout": "3 s",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "10",
        "restart-strategy.fixed-delay.delay": "0 ms",
        "taskmanager.numberOfTaskSlots": "2",
    }
    if storage == "shared":
        settings["shuffle.storage-dir"] = str(shared_dir)
    return settings


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for strategy in sorted({r.strategy for r in runs}, key=["region", "full"].index):
        mine = [r for r in runs if r.strategy == strategy]
        rows.append({
            "strategy": strategy,
            "runs": len(mine),
            "failure_free_s": statistics.median(r.failure_free_ms for r in mine) / 1000,
            "with_failure_s": statistics.median(r.with_failure_ms for r in mine) / 1000,
            "relative_time": statistics.median(r.relative_time for r in mine),
            "reexecuted_share": statistics.median(r.reexecuted / r.subtasks for r in mine),
            "extra_attempts": statistics.median(r.extra_attempts for r in mine),
            "subtasks": mine[0].subtasks,
            "outputs_match": all(r.output_matches for r in mine),
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| failover | runs | failure-free (s) | TM killed (s) | relative time | "
            "subtasks re-executed | extra attempts | output equal |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        lines.append(
            f"| {r['strategy']} | {r['runs']} | {r['failure_free_s']:.1f} | "
            f"{r['with_failure_s']:.1f} | {r['relative_time']:.2f}x | "
            f"{r['reexecuted_share']:.0%} of {r['subtasks']} | {r['extra_attempts']:g} | "
            f"{'yes' if r['outputs_match'] else 'NO'} |")
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The figures as a markdown page (settings first, then the table)."""
    q = meta["query"].upper()
    setup = (
        f"TPC-H {q} at SF {meta['sf']} (`{meta['data']}`), parallelism {meta['parallelism']}, on a "
        "session cluster of two TaskManager processes with two slots each; result partitions on "
        f"{meta['storage_text']}. Each run executes the query once without a failure, then again "
        "while SIGKILL ends the TaskManager (and its Spark JVM) that runs a subtask of the last "
        "stage, during that subtask; a replacement TaskManager is started after the job ended. "
        "One unmeasured warm-up job runs first on every cluster. Loss detection: "
        "`heartbeat.interval` 500 ms, `heartbeat.timeout` 3 s; restart strategy fixed-delay "
        "without delay.")
    figures = (
        f"Job time is the JobManager's job duration (median of {meta['runs']} run(s)). "
        "\"Subtasks re-executed\" counts the subtasks whose final attempt number is above 0; "
        "\"extra attempts\" sums the attempt numbers.")
    return "\n".join([
        f"# Failover benchmark: a TaskManager killed during TPC-H {q}",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}).",
        "",
        setup,
        "",
        figures,
        "",
        table(rows),
        "",
        "`region` restarts the failed subtask's pipelined region, the producers of partitions that "
        "were lost with the TaskManager, and the consumers of every restarted region (Flink's "
        "rules); `full` restarts every subtask. Raw figures: "
        f"`{meta['json']}`.",
        "",
    ])


@contextmanager
def _cluster(state: Path, settings: dict[str, str]) -> Iterator[SessionCluster]:
    cluster = SessionCluster(state, settings, task_managers=2)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sf", default="1", help="scale factor of --data (a label; default 1)")
    p.add_argument("--data", default="data", help="data root or TPC-H directory (default ./data)")
    p.add_argument("--runs", type=int, default=3, help="runs per failover strategy (default 3)")
    p.add_argument("--query", default="q3", help="TPC-H query with >= 3 vertices (default q3)")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--storage", choices=["local", "shared"], default="local",
                   help="where result partitions live (default: each TaskManager's local disk)")
    p.add_argument("--strategies", default="region,full")
    p.add_argument("--results", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--doc", default=str(REPO / "docs" / "failover-benchmark.md"))
    args = p.parse_args(argv)
    data = str(Path(args.data).resolve())
    load_at_start = os.getloadavg()[0]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="flintlock-failover-") as tmp:
        work = Path(tmp)
        program = work / "query.py"
        program.write_text(QUERY_PROGRAM.format(repo=str(REPO)))
        for strategy in args.strategies.split(","):
            settings = _settings(strategy, args.storage, work / f"shuffle-{strategy}")
            with _cluster(work / f"cluster-{strategy}", settings) as cluster:
                warm_up(cluster, program, args.query, data, args.parallelism, work / strategy)
                for run in range(args.runs):
                    r = one_run(cluster, program, args.query, data, args.parallelism, work,
                                strategy, run)
                    print(f"{strategy} run {run}: {r.failure_free_ms} ms -> {r.with_failure_ms} ms,"
                          f" {r.reexecuted}/{r.subtasks} subtasks re-executed, output equal: "
                          f"{r.output_matches}", file=sys.stderr)
                    runs.append(r)
    rows = summarize(runs)
    print(table(rows))
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    json_path = results / f"failover-{args.query}-sf{args.sf}-{stamp}.json"
    meta = {
        "query": args.query, "sf": args.sf, "data": args.data, "parallelism": args.parallelism,
        "runs": args.runs, "storage": args.storage,
        "storage_text": ("each TaskManager's local disk" if args.storage == "local"
                         else "one shared directory (`shuffle.storage-dir`)"),
        "date": dt.date.today().isoformat(),
        "machine": (f"{platform.platform()}, {os.cpu_count()} cores, Python "
                    f"{platform.python_version()}, load average {load_at_start:.1f} at the start"),
        "command": "python benchmarks/failover.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "json": os.path.relpath(json_path, REPO),
    }
    json_path.write_text(json.dumps({"meta": meta, "summary": rows,
                                     "runs": [asdict(r) for r in runs]}, indent=2))
    Path(args.doc).write_text(markdown(rows, meta))
    print(f"wrote {json_path} and {args.doc}", file=sys.stderr)
    return 0 if all(r["outputs_match"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
