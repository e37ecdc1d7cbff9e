"""Exactly-once under faults: seeded fault-injection runs of checkpointed STREAMING jobs.

    python -m benchmarks.streaming.fault_runs [--runs 20] [--jobs running-counts,windows,...]
        [--data data] [--seed 1]

A session cluster of separate processes (``flintlock cluster start``: a JobManager and two
TaskManagers with two slots each) runs the jobs of ``benchmarks/streaming/fault_jobs.py`` one
after the other, cycling through ``--jobs``; run i uses seed ``--seed + i``. Each run submits its
job with checkpoints every second (EXACTLY_ONCE, no tolerable checkpoint failure) and a
fixed-delay restart strategy, then injects its ``FaultPlan`` (``flintlock.testing.fault_plan``):
task failures at seeded records, and in seeded order, each a seeded delay after the job recovered
from the previous fault (RUNNING, a checkpoint completed since): SIGKILL of a TaskManager running
the job (a replacement is started), a declined checkpoint (its directory taken by a file) and an
expired checkpoint (a TaskManager paused with SIGSTOP for longer than the checkpoint timeout).
Once the job FINISHED, its committed output is checked (``fault_jobs.problems``: no record lost,
none duplicated).

Reported per run: the faults injected, restarts, completed / failed / restored checkpoints, the
time from each TaskManager kill to the first output published after it ("recovery to output";
target: <= heartbeat.timeout + 10 s), and whether the output is exactly once. Prints a table and
writes the runs as JSON and markdown under ``benchmarks/results/``. ``run_fault_runs`` is also the
process test's short version (``tests/process/test_exactly_once_under_faults.py``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.failover import FLINTLOCK, SessionCluster, _wait, submitted_job_id  # noqa: E402
from benchmarks.streaming import fault_jobs  # noqa: E402
from flintlock.testing.fault_plan import FaultKind, FaultPlan, TimedFault, plan_faults  # noqa: E402

PROGRAM = Path(fault_jobs.__file__)
TERMINAL = {"FINISHED", "FAILED", "CANCELED"}

#: the cluster's processes: a killed TaskManager refuses connections and is lost after two
#: heartbeat intervals (heartbeat.rpc-failure-threshold); a paused one is not (its connections
#: stay open), and the timeout is longer than the pause
CLUSTER = {"heartbeat.interval": "500 ms", "heartbeat.timeout": "25 s",
           "taskmanager.numberOfTaskSlots": "2"}
CHECKPOINT_INTERVAL_S, CHECKPOINT_TIMEOUT_S = 1.0, 15.0
#: the job's settings (``flintlock run -D``)
JOB = {"execution.checkpointing.interval": f"{CHECKPOINT_INTERVAL_S:g} s",
       "execution.checkpointing.timeout": f"{CHECKPOINT_TIMEOUT_S:g} s",
       "execution.checkpointing.tolerable-failed-checkpoints": "0",
       "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "40",
       "restart-strategy.fixed-delay.delay": "500 ms"}
#: a paused TaskManager misses every checkpoint triggered while it sleeps by the timeout
PAUSE_S = CHECKPOINT_TIMEOUT_S + CHECKPOINT_INTERVAL_S + 1.0

#: (records, records per second) of each job: ~40 s undisturbed
FULL = {"running-counts": (8000, 200), "windows": (12000, 300),
        "carrier-alerts": (24000, 600), "departures": (24000, 600)}


@dataclass
class Injected:
    """One fault as injected: seconds since submission, what, and what it hit."""

    kind: str
    at_s: float
    detail: str
    #: kills: seconds from the kill to the first output file published after it
    recovery_to_output_s: float | None = None


@dataclass
class RunResult:
    job: str
    seed: int
    plan: str
    run: int = 0
    job_id: str = ""
    state: str = ""
    duration_s: float = 0.0
    injected: list[Injected] = field(default_factory=list)
    #: timed faults not injected because the job ended first
    skipped: list[str] = field(default_factory=list)
    failed_records: list[Any] = field(default_factory=list)
    restarts: int = 0
    checkpoints: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return self.state == "FINISHED" and not self.problems


class FaultRun:
    """One seeded run of ``job`` on ``cluster`` (see the module docstring)."""

    def __init__(self, cluster: SessionCluster, job: str, plan: FaultPlan, work: Path, *,
                 records: int, rate: int, data: str) -> None:
        self.cluster, self.job, self.plan = cluster, job, plan
        self.work, self.records, self.rate, self.data = work, records, rate, data
        self.out, self.checkpoints = work / "out", work / "checkpoints"
        self.result = RunResult(job, plan.seed, plan.describe())
        self._started = 0.0

    # ---- REST views ----------------------------------------------------------------------------

    def _job(self) -> dict[str, Any]:
        return self.cluster.job(self.result.job_id)

    def _checkpoint_counts(self) -> dict[str, int]:
        return dict(self.cluster.get(f"/jobs/{self.result.job_id}/checkpoints")["counts"])

    def _task_managers_running_the_job(self) -> list[str]:
        job = self._job()
        if job["state"] != "RUNNING":
            return []
        found = set()
        for v in job["vertices"]:
            for s in self.cluster.get(f"/jobs/{self.result.job_id}/vertices/{v['id']}")["subtasks"]:
                if s["status"] != "RUNNING":
                    return []
                found.add(s["taskmanager-id"])
        return sorted(found)

    def _outputs(self) -> set[str]:
        """The published part files (under ``out`` and its sinks' directories; never inside
        ``_temporary``, whose directories come and go while it is listed)."""
        if not self.out.exists():
            return set()
        sinks = [self.out, *(d for d in self.out.iterdir()
                             if not d.name.startswith(("_", ".")) and d.is_dir())]
        return {str(p.relative_to(self.out)) for d in sinks for p in d.glob("part-*")}

    # ---- the run -------------------------------------------------------------------------------

    def submit(self) -> None:
        settings = {**JOB, "state.checkpoints.dir": str(self.checkpoints)}
        args = [*FLINTLOCK, "run", "--target", "remote", "-d",
                "-D", f"cluster.state-dir={self.cluster.state_dir}",
                *[a for k, v in settings.items() for a in ("-D", f"{k}={v}")],
                str(PROGRAM), self.job, str(self.out), "--records", str(self.records),
                "--rate", str(self.rate), "--failures", str(self.work / "failures"),
                "--fail-at", ",".join(map(str, self.plan.failing_records)), "--data", self.data]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"submission failed:\n{proc.stderr[-3000:]}")
        self.result.job_id = submitted_job_id(proc.stderr)
        self._started = time.monotonic()

    def _recovered(self, completed_before: int) -> list[str] | bool:
        """The TaskManagers running the job once it runs and completed a checkpoint since
        ``completed_before``; True once the job ended."""
        if self._job()["state"] in TERMINAL:
            return True
        if self._checkpoint_counts()["completed"] <= completed_before:
            return []
        return self._task_managers_running_the_job()

    def inject(self, fault: TimedFault, completed_before: int) -> int:
        """Wait for recovery, then inject ``fault``; the completed count at injection."""
        while True:
            recovered = _wait(lambda: self._recovered(completed_before), 240,
                              f"{self.job} recovered before {fault.kind.value}", 0.1,
                              lambda: (self._job()["state"], self._checkpoint_counts()))
            if recovered is True:  # the job ended first
                self.result.skipped.append(fault.kind.value)
                return completed_before
            time.sleep(fault.delay_s)  # the seeded moment of the fault, not a wait for a condition
            candidates = self._task_managers_running_the_job()
            counts = self._checkpoint_counts()
            if candidates:
                break
            # a task failure at a record restarted the job meanwhile: wait for it again
        target = candidates[fault.target % len(candidates)]
        at = time.monotonic() - self._started
        if fault.kind is FaultKind.KILL_TASK_MANAGER:
            pid = self.cluster.kill_task_manager(target)
            killed = time.monotonic()
            injected = Injected(fault.kind.value, at, f"TaskManager {target} (pid {pid})")
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                replacement = pool.submit(self.cluster.start_task_manager)  # as Kubernetes would
                injected.recovery_to_output_s = self._output_after_restore(counts["restored"],
                                                                           killed)
                replacement.result()
        elif fault.kind is FaultKind.DECLINE_CHECKPOINT:
            injected = Injected(fault.kind.value, at, f"checkpoint {self._block_next_checkpoint()}")
        else:
            pid = self.cluster.task_manager_pids()[target]
            os.killpg(pid, signal.SIGSTOP)
            try:
                time.sleep(PAUSE_S)  # the length of the pause is the fault
            finally:
                os.killpg(pid, signal.SIGCONT)
            injected = Injected(fault.kind.value, at, f"TaskManager {target} paused {PAUSE_S:g} s")
        self.result.injected.append(injected)
        return int(counts["completed"])

    def _output_after_restore(self, restored_before: int, since: float) -> float | None:
        """Seconds from ``since`` until the job restored a checkpoint and then published new
        output (None: the job ended first)."""
        _wait(lambda: self._job()["state"] in TERMINAL
              or self._checkpoint_counts()["restored"] > restored_before, 240, "a restore", 0.1)
        before = self._outputs()
        new = _wait(lambda: self._outputs() - before or self._job()["state"] in TERMINAL, 240,
                    "output after the restore", 0.1)
        return round(time.monotonic() - since, 2) if new is not True else None

    def _block_next_checkpoint(self) -> int:
        job_dir = self.checkpoints / self.result.job_id
        n = max((int(p.name[4:]) for p in job_dir.glob("chk-*")), default=0) + 1
        while True:
            try:
                with open(job_dir / f"chk-{n}", "x") as f:  # the storage refuses checkpoint n
                    f.write("in the way")
                return n
            except (FileExistsError, IsADirectoryError):
                n += 1

    def run(self) -> RunResult:
        self.submit()
        completed = 0
        for fault in self.plan.timed:
            completed = self.inject(fault, completed)
        final = self.cluster.wait_for_state(self.result.job_id, TERMINAL, 600)
        result = self.result
        result.state, result.duration_s = final["state"], round(final["duration"] / 1000, 1)
        result.checkpoints = self._checkpoint_counts()
        exceptions = self.cluster.get(f"/jobs/{result.job_id}/exceptions")
        result.restarts = len(exceptions.get("exceptionHistory", {}).get("entries", []))
        failures = self.work / "failures"
        result.failed_records = sorted(p.name[7:] for p in failures.glob("record-*")) \
            if failures.exists() else []
        if result.state != "FINISHED":
            root = exceptions.get("root-exception") or ""
            result.problems.append(f"job {result.state}: {root[:500]}")
        result.problems += fault_jobs.problems(self.job, self.out, self.records, self.data)
        return result


@contextmanager
def fault_cluster(work: Path) -> Iterator[SessionCluster]:
    """A session cluster for the runs (two TaskManagers, the settings above)."""
    cluster = SessionCluster(work / "cluster", dict(CLUSTER), task_managers=2)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def run_fault_runs(cluster: SessionCluster, work: Path, jobs: list[str], runs: int, seed: int,
                   sizes: dict[str, tuple[int, int]], data: str, faults: dict[str, int],
                   report: Callable[[RunResult], None] = lambda r: None) -> list[RunResult]:
    """``runs`` seeded runs cycling through ``jobs`` on ``cluster``."""
    results = []
    for i in range(runs):
        job = jobs[i % len(jobs)]
        records, rate = sizes[job]
        plan = plan_faults(seed + i, records=records, **faults)
        work_i = work / f"run-{i:02d}-{job}"
        fault_run = FaultRun(cluster, job, plan, work_i, records=records, rate=rate, data=data)
        fault_run.result.run = i
        result = fault_run.run()
        report(result)
        results.append(result)
    return results


def _table(results: list[RunResult]) -> str:
    lines = ["| run | job | seed | faults injected | job time (s) | restarts | checkpoints (done / "
             "failed / restored) | kill to output (s) | exactly once |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        kinds = ([f"task failure at {x}" for x in r.failed_records] + [f.kind for f in r.injected]
                 + [f"({k} skipped: the job had ended)" for k in r.skipped])
        recovery = [f.recovery_to_output_s for f in r.injected if f.recovery_to_output_s is not None]
        c = r.checkpoints
        lines.append(f"| {r.run} | {r.job} | {r.seed} | {', '.join(kinds)} | {r.duration_s:.0f} | "
                     f"{r.restarts} | "
                     f"{c.get('completed', 0)} / {c.get('failed', 0)} / {c.get('restored', 0)} | "
                     f"{', '.join(f'{x:.1f}' for x in recovery) or '-'} | "
                     f"{'yes' if r.exactly_once else 'NO: ' + '; '.join(r.problems)[:200]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--jobs", default=",".join(fault_jobs.JOBS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default=str(REPO / "data"))
    parser.add_argument("--scale", type=float, default=1.0,
                        help="records per job relative to the full length (~40 s undisturbed)")
    parser.add_argument("--work", default=None, help="directory kept for inspection")
    args = parser.parse_args(argv)
    jobs = [j for j in args.jobs.split(",") if j]
    unknown = set(jobs) - set(fault_jobs.JOBS)
    if unknown:
        parser.error(f"unknown jobs {sorted(unknown)}; choose from {fault_jobs.JOBS}")
    sizes = {j: (int(n * args.scale), rate) for j, (n, rate) in FULL.items()}
    faults = {"task_failures": 2, "kills": 1, "declines": 1, "expiries": 1}
    started = dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory(prefix="fault-runs-") as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        with fault_cluster(work) as cluster:
            results = run_fault_runs(cluster, work, jobs, args.runs, args.seed, sizes, args.data,
                                     faults, report=lambda r: print(_table([r]).splitlines()[-1],
                                                                    flush=True))
    table = _table(results)
    passed = sum(r.exactly_once for r in results)
    print(f"\n{table}\n\nexactly once in {passed} of {len(results)} runs")
    out = REPO / "benchmarks" / "results" / f"fault-runs-{started:%Y%m%dT%H%M%S}"
    out.with_suffix(".json").write_text(json.dumps({
        "started": started.isoformat(), "cluster": CLUSTER, "job_settings": JOB,
        "pause_s": PAUSE_S, "sizes": sizes, "faults": faults,
        "runs": [{**asdict(r), "exactly_once": r.exactly_once} for r in results]}, indent=1))
    out.with_suffix(".md").write_text(
        f"# Fault-injection runs ({started:%Y-%m-%d})\n\n{table}\n\n"
        f"Exactly once in {passed} of {len(results)} runs.\n")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
