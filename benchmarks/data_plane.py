"""The data plane under load (issue 10): slot sharing and event-loop lag on session clusters.

Both workloads start their own session clusters of TaskManager processes (``flintlock cluster
start``, as ``FlintlockSession`` does) and run TPC-H Q18 written to a FileSink
(``programs/q18_file_sink.py``); every output is read back and checked against DuckDB's answer.

- ``slot_sharing``: Q18 at parallelism 2 on 2 TaskManagers x 1 slot, and at parallelism 4 on
  2 x 4 slots, ``runs`` times on each cluster. The last ``measured`` runs of each count: the
  JVMs keep getting faster for about 4 runs. Target: the p4 median within 1.2x of the p2 one.
- ``load``: on 2 x 4 slots with ``heartbeat.timeout: 10000``, Q18 at parallelism 4, then
  ``jobs`` small jobs submitted at once (``programs/concurrent_jobs.py``), while every process's
  event-loop lag is polled from REST once a second (``LagPoller``). Targets: p99 lag < 200 ms in
  every process, Q18 finished without a restart, no heartbeat timed out.

Shapes in the results document (seconds, milliseconds where named):

- ``slot_sharing``: ``{"p2_2x1_s": [...], "p4_2x4_s": [...], "measured": int,
  "parallelism": {"p2_2x1": int, "p4_2x4": int}}`` (``parallelism``: the most subtasks a vertex
  of the last job ran).
- ``load``: ``{"q18_s", "jobs", "jobs_s", "finished", "restarts", "heartbeat_timeouts": [str],
  "lag_ms": {process: {"LagP99Ms", "LagMaxMs"}}, "polls"}``.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.stats import LOOP_LAG_P99_BOUND_MS
from benchmarks.systems import PROGRAMS, Context, FlintlockSession, RunFailed, run_process
from benchmarks.verify import check_answer
from benchmarks.workloads import DuckDB, sort_keys

__all__ = ["LAG_METRICS", "P99_BOUND_MS", "LagPoller", "load", "slot_sharing"]

#: the design bound of ARCHITECTURE.md section 3 (ms), as the report checks it
P99_BOUND_MS = LOOP_LAG_P99_BOUND_MS
LAG_METRICS = "Status.Python.EventLoop.LagP99Ms,Status.Python.EventLoop.LagMaxMs"


class LagPoller:
    """Polls every process's event-loop lag from REST once a second (``/jobmanager/metrics``,
    ``/taskmanagers/:id/metrics``, a 60 s window, so every tick is seen) and keeps the worst
    values per process: ``worst[process][metric]`` in ms."""

    def __init__(self, rest: str) -> None:
        self.rest = rest
        self.worst: dict[str, dict[str, float]] = {}
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-poller", daemon=True)

    def __enter__(self) -> LagPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.poll()  # the last window, after the work

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.poll()

    def poll(self) -> None:
        import httpx

        with httpx.Client(base_url=self.rest, timeout=10) as http:
            urls = {"jobmanager": f"/jobmanager/metrics?get={LAG_METRICS}"}
            for tm in http.get("/taskmanagers").json()["taskmanagers"]:
                urls[f"taskmanager {tm['id']}"] = (
                    f"/taskmanagers/{tm['id']}/metrics?get={LAG_METRICS}")
            for who, url in urls.items():
                worst = self.worst.setdefault(who, {})
                for metric in http.get(url).json():
                    name = metric["id"].rsplit(".", 1)[1]
                    worst[name] = max(worst.get(name, 0.0), float(metric["value"]))
        self.polls += 1


@contextmanager
def _cluster(ctx: Context, tag: str, slots: int, conf: tuple[str, ...] = ()
             ) -> Iterator[FlintlockSession]:
    """A session cluster of 2 TaskManagers x ``slots`` slots in ``<workdir>/<tag>``."""
    workdir = ctx.workdir / tag
    workdir.mkdir()
    own = dataclasses.replace(ctx, workdir=workdir, task_managers=2, slots_per_task_manager=slots,
                              flintlock_conf=[*ctx.flintlock_conf, *conf])
    session = FlintlockSession(own, f"flintlock-session-{tag}")
    session.start()
    try:
        yield session
    finally:
        session.stop()


def _q18(session: FlintlockSession, parallelism: int, out: Path, tpch: Path) -> float:
    """Run Q18 into ``out`` at ``parallelism``; return the client process's wall time (s)."""
    cmd = [sys.executable, "-m", "flintlock", "run", "--target", "remote", "-p", str(parallelism),
           *session.d, str(PROGRAMS / "q18_file_sink.py"), str(tpch), str(out)]
    return run_process(cmd, "flintlock-client", session.ctx, f"{out.name}-client")


def _check_q18(out: Path, reference: tuple[list[str], list[tuple]], label: str) -> None:
    import duckdb

    written = duckdb.sql(f"SELECT * FROM read_parquet('{out}/**/*.parquet')")
    check_answer(label, list(written.columns), written.fetchall(), *reference, sort_keys("q18"))


def _reference(ctx: Context) -> tuple[list[str], list[tuple]]:
    db = DuckDB(ctx.paths)
    try:
        cols, rows, _ = db.run("q18")
    finally:
        db.close()
    return cols, rows


def _latest_job(session: FlintlockSession) -> dict[str, Any]:
    jobs = session.get("/jobs/overview")["jobs"]
    return session.get(f"/jobs/{max(jobs, key=lambda j: j['start-time'])['jid']}")


def slot_sharing(ctx: Context, runs: int, measured: int, log: Callable[[str], None]
                 ) -> dict[str, Any]:
    """Q18 at p2 on 2 x 1 slots and at p4 on 2 x 4 slots, ``runs`` times each (shape above).

    Raises:
        RunFailed: a cluster or a run failed.
        WrongAnswer: an output differs from DuckDB's answer.
    """
    reference = _reference(ctx)
    result: dict[str, Any] = {"measured": measured, "parallelism": {}}
    for tag, slots, parallelism in (("p2_2x1", 1, 2), ("p4_2x4", 4, 4)):
        times = []
        with _cluster(ctx, f"slot-sharing-{tag}", slots) as session:
            for i in range(runs):
                out = session.ctx.workdir / f"q18-{tag}-{i}"
                times.append(_q18(session, parallelism, out, ctx.paths.tpch))
                _check_q18(out, reference, f"slot sharing {tag} run {i}")
                log(f"slot sharing {tag} run {i + 1}/{runs}: {times[-1]:.2f} s  ok")
            vertices = _latest_job(session)["vertices"]
            result["parallelism"][tag] = max(v["parallelism"] for v in vertices)
        result[f"{tag}_s"] = times
    p2, p4 = (statistics.median(result[f"{t}_s"][-measured:]) for t in ("p2_2x1", "p4_2x4"))
    log(f"slot sharing: p4 on 2 x 4 slots {p4:.2f} s, p2 on 2 x 1 {p2:.2f} s: {p4 / p2:.2f}x")
    return result


def load(ctx: Context, jobs: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Q18 at p4 on 2 x 4 slots with a 10 s heartbeat timeout, then ``jobs`` small jobs at once,
    with every process's loop lag polled (shape above).

    Raises:
        RunFailed: the cluster or a job failed.
        WrongAnswer: Q18's output differs from DuckDB's answer.
    """
    reference = _reference(ctx)
    with _cluster(ctx, "load", 4, ("heartbeat.timeout=10000",)) as session:
        rest = f"http://127.0.0.1:{session.info['rest_port']}"
        out = session.ctx.workdir / "q18-load"
        with LagPoller(rest) as poller:
            q18_s = _q18(session, 4, out, ctx.paths.tpch)
            q18 = _latest_job(session)
            cmd = [sys.executable, "-m", "flintlock", "run", "--target", "remote", *session.d,
                   str(PROGRAMS / "concurrent_jobs.py"), str(jobs),
                   str(session.ctx.workdir / "small")]
            jobs_s = run_process(cmd, "flintlock-client", session.ctx, "concurrent-jobs-client")
        _check_q18(out, reference, "Q18 under load")
        states = [j["state"] for j in session.get("/jobs/overview")["jobs"]]
        timeouts = [line for f in sorted((session.state / "log").glob("*.log"))
                    for line in f.read_text(errors="replace").splitlines() if "timed out" in line]
    if q18.get("state") != "FINISHED":
        raise RunFailed(f"Q18 under load ended {q18.get('state')}")
    result = {"q18_s": q18_s, "jobs": jobs, "jobs_s": jobs_s,
              "finished": states.count("FINISHED"), "restarts": q18.get("numRestarts", 0),
              "heartbeat_timeouts": timeouts[:20], "lag_ms": poller.worst, "polls": poller.polls}
    worst = max((v.get("LagP99Ms", 0.0) for v in poller.worst.values()), default=0.0)
    log(f"load: Q18 {q18_s:.1f} s, {jobs} jobs {jobs_s:.1f} s, {result['finished']} finished, "
        f"worst p99 loop lag {worst:.0f} ms, {len(timeouts)} heartbeat timeout(s)")
    return result
