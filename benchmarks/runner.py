"""One benchmark run: every system on every workload, alternating, checked against DuckDB.

Order: for each workload, ``warmups + runs`` rounds; in each round every system runs the
workload once, and the order of the systems rotates from round to round (so no system always runs
right after another's page-cache or JIT warm-up). The first ``warmups`` rounds are recorded with
``"warmup": true`` and left out of every summary. Each answer is compared with DuckDB's before its
time is kept; a wrong answer stops the run (``WrongAnswer``). A run that fails or times out stops
it too, unless ``keep_going`` (then it is recorded with its error).

A system may decline a workload (``System.skip_reason``, e.g. a query PyFlink cannot run): it is
left out of that workload's rounds and the reason recorded in ``skipped``.

With ``spark_remote`` (``--spark-remote``; ``benchmarks.spark_target``) the Spark-based systems
share one Spark: a Spark Connect URL, or ``standalone`` for a Spark standalone cluster the harness
starts first and stops last. The document's ``spark`` entry says which Spark was used. Without it,
systems named ``<system>@standalone`` run on such a cluster beside the others (``spark_standalone``
in the document), so one run compares flintlock and PySpark on both Sparks.

After the data workloads: small-job latency on the session cluster (``programs/small_job.py``) and
control-plane throughput (``benchmarks.control_plane``, one process per job size, measured jobs
until ``control_plane_budget_s`` is spent; sizes after one that failed or overran
``control_plane_timeout_s`` are skipped), then slot sharing and the load scenario
(``benchmarks.data_plane``, on clusters of their own). Peak RSS per process role comes from the
``MemorySampler``. The results document (shape in ``benchmarks.stats``) is written to
``<out_dir>/<date>-<host>.json``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.data_plane import load, slot_sharing
from benchmarks.machine import machine_info
from benchmarks.memory import MemorySampler
from benchmarks.spark_target import SparkTarget, start_spark
from benchmarks.systems import (
    SPARK_BASED,
    STANDALONE,
    SYSTEMS,
    Context,
    RunFailed,
    System,
    make_system,
    run_process,
)
from benchmarks.verify import check_answer
from benchmarks.workloads import WORKLOADS, DuckDB, ensure_data, sort_keys

__all__ = ["EXTRA_WORKLOADS", "Settings", "run_benchmark"]

REPO = Path(__file__).resolve().parents[1]
EXTRA_WORKLOADS = ("latency", "control_plane", "slot_sharing", "load")


@dataclass
class Settings:
    data_root: str = "data"
    sf: float = 1.0
    runs: int = 3
    warmups: int = 1
    systems: list[str] = field(default_factory=lambda: list(SYSTEMS))
    workloads: list[str] = field(default_factory=lambda: [*WORKLOADS, *EXTRA_WORKLOADS])
    parallelism: int = 2
    cores: int = 2
    task_managers: int = 1
    slots_per_task_manager: int = 2
    text_copies: int = 38
    timeout_s: float = 600.0
    latency_runs: int = 10
    latency_warmups: int = 2
    control_plane_sizes: list[int] = field(default_factory=lambda: [1000, 2000, 5000, 10000])
    control_plane_runs: int = 3
    control_plane_timeout_s: float = 180.0
    control_plane_budget_s: float = 45.0
    keep_going: bool = False
    pyflink_required: bool = False
    out_dir: str = "benchmarks/results"
    flintlock_conf: list[str] = field(default_factory=list)
    spark_remote: str | None = None  # None: every system its own local Spark; a URL; "standalone"
    slot_sharing_runs: int = 8
    slot_sharing_measured: int = 4  # the last runs of each cluster that count
    load_jobs: int = 50


def _rotate(items: list[str], k: int) -> list[str]:
    k %= max(len(items), 1)
    return items[k:] + items[:k]


def _results_path(out_dir: Path, host: str) -> Path:
    now = dt.datetime.now()
    path = out_dir / f"{now:%Y-%m-%d}-{host}.json"
    return path if not path.exists() else out_dir / f"{now:%Y-%m-%d-%H%M%S}-{host}.json"


def run_benchmark(s: Settings, log: Callable[[str], None] = print) -> Path:
    """Run everything ``s`` selects; return the path of the written results document.

    Raises:
        WrongAnswer: a system's answer differs from DuckDB's.
        RunFailed: a run failed or timed out (unless ``keep_going``).
    """
    started = time.time()
    t_start = time.perf_counter()
    info = machine_info()
    log(f"flintlock benchmark on {info['host']}: {info['logical_cores']} cores, "
        f"{info['memory_bytes'] / 2**30:.0f} GiB, load {info['load_average_at_start'][0]:.1f}")
    data_workloads = [w for w in s.workloads if w in WORKLOADS]
    paths = ensure_data(s.data_root, s.sf, s.text_copies, log)
    workdir = Path(tempfile.mkdtemp(prefix="flintlock-bench-"))
    sampler = MemorySampler().start()
    ctx = Context(paths, workdir, s.parallelism, s.cores, s.task_managers,
                  s.slots_per_task_manager, s.timeout_s, sampler, log, list(s.flintlock_conf))
    doc: dict[str, Any] = {
        "schema": 1, "started": dt.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
        "machine": info, "settings": asdict(s), "data": paths.describe(), "systems": {},
        "spark": SparkTarget("local").describe(), "measurements": [], "errors": [], "skipped": [],
    }
    systems: list[System] = []
    spark: SparkTarget | None = None
    standalone: SparkTarget | None = None
    ok = False
    try:
        uses_spark = "latency" in s.workloads or (data_workloads
                                                  and set(SPARK_BASED) & set(s.systems))
        try:
            spark = start_spark(s.spark_remote if uses_spark else None, workdir, s.cores, log)
        except RuntimeError as exc:  # the standalone cluster did not come up
            raise RunFailed(f"Spark standalone cluster: {exc}") from exc
        spark.watch(sampler)
        doc["spark"] = spark.describe()
        if spark.remote:
            ctx = _on_spark(ctx, spark.remote)
        contexts = {"": ctx}
        if data_workloads and any(name.endswith(STANDALONE) for name in s.systems):
            if spark.remote:
                raise RunFailed(f"systems ending in {STANDALONE} run beside systems on their "
                                "own local Spark; drop --spark-remote")
            try:
                standalone = start_spark("standalone", workdir, s.cores, log)
            except RuntimeError as exc:
                raise RunFailed(f"Spark standalone cluster: {exc}") from exc
            standalone.watch(sampler)
            doc["spark_standalone"] = standalone.describe()
            contexts[STANDALONE] = _on_spark(ctx, standalone.remote)
        db = DuckDB(paths)
        references = {}
        for w in data_workloads:
            cols, rows, took = db.run(w)
            references[w] = (cols, rows)
            log(f"reference {w}: {len(rows)} rows (DuckDB {took:.2f} s)")
        db.close()
        need_session = "flintlock-session" in s.systems or "latency" in s.workloads
        for name in s.systems if data_workloads else []:
            suffix = STANDALONE if name.endswith(STANDALONE) else ""
            systems.append(_start(name, contexts[suffix], s, doc, log))
        systems = [x for x in systems if x is not None]
        if need_session and not any(x.name == "flintlock-session" for x in systems):
            session = _start("flintlock-session", ctx, s, doc, log)
            if session is not None:
                systems.append(session)
        by_name = {x.name: x for x in systems}
        active = [x.name for x in systems if x.name in s.systems]

        t_data = time.perf_counter()
        for k, w in enumerate(data_workloads, start=1):
            t_w = time.perf_counter()
            running = _not_declined(w, active, by_name, doc, log)
            for i in range(s.warmups + s.runs):
                for name in _rotate(running, i):
                    _one_run(by_name[name], w, i, s, ctx, references[w], doc, log)
            left = (time.perf_counter() - t_data) / k * (len(data_workloads) - k)
            log(f"{w}: done in {time.perf_counter() - t_w:.0f} s (total "
                f"{(time.perf_counter() - t_start) / 60:.1f} min; data workloads left: "
                f"~{left / 60:.0f} min)")

        if "latency" in s.workloads and "flintlock-session" in by_name:
            doc["latency"] = _latency(by_name["flintlock-session"], s, ctx, log)
        if "control_plane" in s.workloads:
            doc["control_plane"] = _control_plane(s, ctx, doc, log)
        if "slot_sharing" in s.workloads:
            doc["slot_sharing"] = slot_sharing(ctx, s.slot_sharing_runs,
                                               s.slot_sharing_measured, log)
        if "load" in s.workloads:
            doc["load"] = load(ctx, s.load_jobs, log)
        ok = True
    finally:
        for x in reversed(systems):
            try:
                x.stop()
            except Exception as exc:  # keep stopping the others
                log(f"warning: stopping {x.name} failed: {exc}")
        for target in (standalone, spark):
            if target is None:
                continue
            try:
                target.stop()
            except Exception as exc:
                log(f"warning: stopping the Spark standalone cluster failed: {exc}")
        sampler.sample_once()
        sampler.stop()
        doc["memory"] = sampler.peaks()
        doc["finished"] = dt.datetime.now().isoformat(timespec="seconds")
        doc["duration_s"] = time.perf_counter() - t_start
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            doc["aborted"] = True
            partial = workdir / "results.partial.json"
            partial.write_text(json.dumps(doc, indent=1, default=str) + "\n")
            log(f"run aborted; logs and the partial results are in {workdir}")
    out_dir = Path(s.out_dir)
    if not out_dir.is_absolute():
        out_dir = REPO / out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    path = _results_path(out_dir, socket.gethostname())
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    log(f"results: {path} ({doc['duration_s'] / 60:.1f} min)")
    return path


def _on_spark(ctx: Context, remote: str | None) -> Context:
    """``ctx`` for systems on the Spark Connect server ``remote``: PySpark connects to it and
    flintlock's TaskManagers get ``-D spark.remote=<remote>``."""
    conf = [c for c in ctx.flintlock_conf if not c.startswith("spark.remote=")]
    return dataclasses.replace(ctx, spark_remote=remote,
                               flintlock_conf=[*conf, f"spark.remote={remote}"])


def _not_declined(workload: str, active: list[str], by_name: dict[str, System],
                  doc: dict[str, Any], log: Callable[[str], None]) -> list[str]:
    """The systems of ``active`` that run ``workload``; the others' reasons go to ``skipped``."""
    running = []
    for name in active:
        reason = by_name[name].skip_reason(workload)
        if reason is None:
            running.append(name)
            continue
        log(f"{workload:10s} {name:28s} skipped: {reason}")
        doc["skipped"].append({"workload": workload, "system": name, "reason": reason})
    return running


def _start(name: str, ctx: Context, s: Settings, doc: dict[str, Any],
           log: Callable[[str], None]) -> System | None:
    from benchmarks.pyflink_env import PyFlinkUnavailable

    system = make_system(name, ctx)
    log(f"starting {name}")
    try:
        system.start()
    except PyFlinkUnavailable as exc:
        if s.pyflink_required:
            raise
        log(f"  skipping pyflink: {exc}")
        doc["skipped"].append({"system": name, "reason": str(exc)})
        return None
    doc["systems"][name] = system.info
    return system


def _one_run(system: System, workload: str, i: int, s: Settings, ctx: Context,
             reference: tuple[list[str], list[tuple]], doc: dict[str, Any],
             log: Callable[[str], None]) -> None:
    warmup = i < s.warmups
    run_dir = ctx.workdir / f"{workload}-{system.name}-{i}"
    run_dir.mkdir()
    label = f"{workload:10s} {system.name:28s} {'warm-up' if warmup else f'run {i - s.warmups + 1}'}"
    try:
        r = system.run(workload, run_dir)
    except RunFailed as exc:
        if not s.keep_going:
            raise
        log(f"{label}: FAILED {str(exc).splitlines()[0]}")
        doc["errors"].append({"workload": workload, "system": system.name, "run": i,
                              "error": str(exc)[-4000:]})
        return
    check_answer(f"{system.name} {workload} (run {i})", r.columns, r.rows, *reference,
                 sort_keys(workload))
    job = f" job {r.job_s:.2f} s" if r.job_s is not None and system.name != "duckdb" else ""
    rest = f" rest {r.rest_s:.2f} s" if r.rest_s is not None else ""
    log(f"{label}: {r.wall_s:7.2f} s{job}{rest}  ok")
    doc["measurements"].append({
        "workload": workload, "system": system.name, "run": i, "warmup": warmup,
        "wall_s": r.wall_s, "job_s": r.job_s, "rest_s": r.rest_s, **r.extra,
    })
    shutil.rmtree(run_dir, ignore_errors=True)


def _latency(session: Any, s: Settings, ctx: Context, log: Callable[[str], None]) -> dict[str, Any]:
    out = ctx.workdir / "latency.json"
    n = s.latency_warmups + s.latency_runs
    cmd = [sys.executable, "-m", "flintlock", "run", "--target", "remote", *session.d,
           str(REPO / "benchmarks" / "programs" / "small_job.py"), "--repeat", str(n),
           "--out", str(out)]
    run_process(cmd, "flintlock-client", ctx, "latency")
    runs = json.loads(out.read_text())[s.latency_warmups:]
    client = [r["client_s"] for r in runs]
    rest = [session.job_duration_s(r["job_id"]) for r in runs]
    result = {"client_s": client, "rest_s": [x for x in rest if x is not None],
              "rows": 1000, "vertices": 2, "parallelism": 1}
    med = sorted(result["rest_s"])[len(result["rest_s"]) // 2] if result["rest_s"] else None
    log(f"latency: {len(runs)} small jobs, median submit->FINISHED "
        f"{med if med is None else round(med, 3)} s")
    return result


def _control_plane(s: Settings, ctx: Context, doc: dict[str, Any],
                   log: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    for n in sorted(s.control_plane_sizes):
        out = ctx.workdir / f"control-plane-{n}.json"
        cmd = [sys.executable, "-m", "benchmarks.control_plane", "--subtasks", str(n),
               "--runs", str(s.control_plane_runs), "--out", str(out),
               "--timeout", str(s.control_plane_timeout_s),
               "--budget", str(s.control_plane_budget_s)]
        saved = ctx.timeout_s
        # warm-up, measured jobs until the budget is spent, the last one at most a job timeout
        ctx.timeout_s = s.control_plane_budget_s + s.control_plane_timeout_s + 120
        try:
            wall = run_process(cmd, "control-plane-minicluster", ctx, f"control-plane-{n}")
        except RunFailed as exc:
            log(f"control plane {n:,} subtasks: FAILED; larger sizes skipped")
            doc["errors"].append({"workload": "control_plane", "subtasks": n,
                                  "error": str(exc)[-4000:]})
            doc["skipped"].extend({"workload": "control_plane", "subtasks": m,
                                   "reason": f"{n} subtasks failed or timed out"}
                                  for m in s.control_plane_sizes if m > n)
            break
        finally:
            ctx.timeout_s = saved
        row = json.loads(out.read_text())
        row["process_wall_s"] = wall
        rows.append(row)
        med = sorted(row["deployed_s"])[len(row["deployed_s"]) // 2]
        log(f"control plane {n:,} subtasks: all deployed in {med:.2f} s "
            f"({n / med if med > 0 else float('inf'):,.0f}/s)")
    return rows
