"""Summaries of a results document: medians, min/max, ratios, geometric means, targets (pure).

A results document (``benchmarks/results/<date>-<host>.json``, written by ``benchmarks.runner``)
holds raw measurements only; everything here is derived from it, so a report can be regenerated
from any results file. Shapes (times in seconds, memory in bytes):

- ``measurements``: ``[{"workload", "system", "run", "warmup", "wall_s", "job_s", "rest_s"}]``.
  ``wall_s`` is what the user waits for (a whole process for cold systems, the
  ``flintlock run --target remote`` process for the session cluster); ``job_s`` is the query
  including the result fetch, measured inside the process; ``rest_s`` the job's own duration
  from the JobManager's REST API (flintlock on a session cluster only), else ``null``.
- ``latency``: ``{"client_s": [...], "rest_s": [...]}`` of the small two-vertex job.
- ``control_plane``: ``[{"subtasks", "deployed_s": [...], "finished_s": [...]}]``.
- ``memory``: ``{role: {"peak_rss_bytes", "peak_tree_rss_bytes"}}``.
- ``slot_sharing`` and ``load``: the shapes of ``benchmarks.data_plane``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FLINTLOCK_SESSION",
    "Summary",
    "TPCH",
    "check_targets",
    "slot_sharing_ratio",
    "geomean",
    "ratio",
    "summarize",
    "summarize_control_plane",
]

#: The TPC-H queries (``benchmarks.workloads.TPCH``; repeated here so this module stays pure).
TPCH = tuple(f"q{n}" for n in range(1, 23))
FLINTLOCK_SESSION = "flintlock-session"
FLINTLOCK_LOCAL = "flintlock-local"
PYSPARK_WARM = "pyspark-warm"
PYSPARK_COLD = "pyspark-cold"
PYFLINK = "pyflink"
DUCKDB = "duckdb"
#: the two systems on the harness's Spark standalone cluster (``benchmarks.systems.STANDALONE``)
FLINTLOCK_SESSION_STANDALONE = "flintlock-session@standalone"
PYSPARK_WARM_STANDALONE = "pyspark-warm@standalone"
#: the load issue's bounds: slot sharing p4 / p2 and event-loop lag p99 (ms)
SLOT_SHARING_BOUND = 1.2
LOOP_LAG_P99_BOUND_MS = 200.0


@dataclass(frozen=True)
class Summary:
    """Median, min and max of the measured (non-warm-up) runs of one metric."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary | None:
        vals = [float(v) for v in values if v is not None]
        if not vals:
            return None
        return cls(statistics.median(vals), min(vals), max(vals), len(vals))


def summarize(measurements: Iterable[Mapping[str, Any]], metric: str = "wall_s"
              ) -> dict[str, dict[str, Summary]]:
    """``{workload: {system: Summary of metric}}`` over measured runs (warm-ups excluded).

    Runs without the metric (``None``) are skipped; a (workload, system) pair with no value at
    all is left out.
    """
    values: dict[str, dict[str, list[float]]] = {}
    for m in measurements:
        if m.get("warmup") or m.get(metric) is None:
            continue
        values.setdefault(m["workload"], {}).setdefault(m["system"], []).append(float(m[metric]))
    out: dict[str, dict[str, Summary]] = {}
    for workload, per_system in values.items():
        for system, vals in per_system.items():
            s = Summary.of(vals)
            if s is not None:
                out.setdefault(workload, {})[system] = s
    return out


def ratio(numerator: Summary | None, denominator: Summary | None) -> float | None:
    """``numerator.median / denominator.median``; ``None`` when either is missing or zero."""
    if numerator is None or denominator is None or denominator.median <= 0:
        return None
    return numerator.median / denominator.median


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values; ``None`` if there are none."""
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def summarize_control_plane(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per job size: median seconds to all deployed / all finished and subtasks deployed per s."""
    out = []
    for row in sorted(rows, key=lambda r: r["subtasks"]):
        deployed = Summary.of(row.get("deployed_s", []))
        finished = Summary.of(row.get("finished_s", []))
        rate = row["subtasks"] / deployed.median if deployed and deployed.median > 0 else None
        out.append({"subtasks": row["subtasks"], "deployed": deployed, "finished": finished,
                    "deploy_rate": rate})
    return out


@dataclass(frozen=True)
class Target:
    """One target (issues 6 and 10) and how the run measured against it."""

    name: str
    goal: str
    measured: str
    met: bool | None  # None: not measured in this run


def _fmt_ratio(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.2f}x"


def check_targets(doc: Mapping[str, Any]) -> list[Target]:
    """Evaluate the issue's targets against one results document."""
    job = summarize(doc.get("measurements", []), "job_s")
    wall = summarize(doc.get("measurements", []), "wall_s")
    targets: list[Target] = []

    targets += _warm_targets(job, FLINTLOCK_SESSION, PYSPARK_WARM, "TPC-H warm")
    if any(FLINTLOCK_SESSION_STANDALONE in job.get(q, {}) for q in TPCH):
        targets += _warm_targets(job, FLINTLOCK_SESSION_STANDALONE, PYSPARK_WARM_STANDALONE,
                                 "TPC-H warm on a Spark standalone cluster")
    local = {q: r for q in TPCH if q in wall
             if (r := ratio(wall[q].get(FLINTLOCK_LOCAL), wall[q].get(PYSPARK_COLD))) is not None}
    if local:
        slower = [q for q in TPCH if local.get(q, 0) >= 1.0]
        worst = max(local, key=lambda q: local[q])
        detail = (f"geometric mean {_fmt_ratio(geomean(local.values()))}; "
                  + (f"not faster on {', '.join(slower)}" if slower else
                     f"faster on all {len(local)}") + f" (worst {worst} {_fmt_ratio(local[worst])})")
        targets.append(Target("local mode vs cold PySpark, every TPC-H query",
                              "`flintlock run` (local) wall time < a fresh `python job.py`",
                              detail, not slower))

    for other, label in ((PYSPARK_COLD, "cold PySpark"), (PYFLINK, "PyFlink")):
        rs = {w: ratio(wall[w].get(FLINTLOCK_SESSION), wall[w].get(other))
              for w in (*TPCH, "word_count") if w in wall}
        rs = {w: r for w, r in rs.items() if r is not None}
        if not rs:
            targets.append(Target(f"as users run them vs {label}", "faster on every workload",
                                  "n/a", None))
            continue
        slower = sorted(w for w, r in rs.items() if r >= 1.0)
        worst = max(rs, key=lambda w: rs[w])
        detail = (f"slower on {', '.join(slower)} (worst {worst} {_fmt_ratio(rs[worst])})"
                  if slower else f"faster on all {len(rs)} (worst {worst} {_fmt_ratio(rs[worst])})")
        targets.append(Target(f"as users run them vs {label}",
                              "flintlock session wall time < theirs on every workload",
                              detail, not slower))

    sharing = slot_sharing_ratio(doc.get("slot_sharing") or {})
    if sharing is not None:
        targets.append(Target("slot sharing", "Q18 at p4 on 2 x 4 slots / p2 on 2 x 1 slots "
                              f"<= {SLOT_SHARING_BOUND}", _fmt_ratio(sharing),
                              sharing <= SLOT_SHARING_BOUND))
    load = doc.get("load")
    if load:
        worst_p99 = max((v.get("LagP99Ms", 0.0) for v in load.get("lag_ms", {}).values()),
                        default=None)
        clean = (load.get("restarts") == 0 and not load.get("heartbeat_timeouts")
                 and load.get("finished") == load.get("jobs", 0) + 1)
        measured = (f"worst p99 {worst_p99:.0f} ms; {load.get('finished')} of "
                    f"{load.get('jobs', 0) + 1} jobs finished, {load.get('restarts')} restart(s), "
                    f"{len(load.get('heartbeat_timeouts', []))} heartbeat timeout(s)"
                    if worst_p99 is not None else "no lag measured")
        targets.append(Target("under load (Q18 at p4 on 2 x 4 slots, then many jobs at once)",
                              f"event-loop lag p99 < {LOOP_LAG_P99_BOUND_MS:.0f} ms in every "
                              "process; no restart, no heartbeat timeout", measured,
                              worst_p99 is not None and worst_p99 < LOOP_LAG_P99_BOUND_MS
                              and clean))

    lat = doc.get("latency") or {}
    rest = Summary.of(lat.get("rest_s", []))
    client = Summary.of(lat.get("client_s", []))
    if rest is not None:
        client_txt = f"; {client.median:.3f} s as the client sees it" if client else ""
        targets.append(Target("small-job latency", "submit to FINISHED <= 0.5 s median",
                              f"{rest.median:.3f} s{client_txt}", rest.median <= 0.5))
    else:
        targets.append(Target("small-job latency", "submit to FINISHED <= 0.5 s median", "n/a", None))

    cp = summarize_control_plane(doc.get("control_plane", []))
    rates = [r for r in cp if r["deploy_rate"] is not None]
    if rates:
        slowest = min(rates, key=lambda r: r["deploy_rate"])
        targets.append(Target("control plane, deploy rate", ">= 2,000 subtasks deployed / s",
                              f"lowest {slowest['deploy_rate']:,.0f}/s at {slowest['subtasks']:,}",
                              slowest["deploy_rate"] >= 2000))
        big = [r for r in rates if r["subtasks"] >= 10_000]
        if big:
            t = big[0]["deployed"].median
            done = f"; FINISHED after {big[0]['finished'].median:.2f} s" if big[0]["finished"] else ""
            targets.append(Target("control plane, 10,000 subtasks",
                                  "all subtasks deployed in < 10 s", f"{t:.2f} s{done}", t < 10))
        else:
            targets.append(Target("control plane, 10,000 subtasks",
                                  "all subtasks deployed in < 10 s", "not measured", None))
        growth = linearity(cp)
        if growth is not None:
            targets.append(Target("control plane, growth", "time linear in subtasks",
                                  f"time per subtask x{growth:.2f} from smallest to largest job",
                                  growth <= 1.5))
    else:
        targets.append(Target("control plane", ">= 2,000 subtasks/s; 10,000 in < 10 s", "n/a", None))
    return targets


def _warm_targets(job: Mapping[str, Mapping[str, Summary]], system: str, peer: str,
                  what: str) -> list[Target]:
    """The warm targets of ``system`` against ``peer`` (engine times): geometric mean <= 1.2,
    every TPC-H query <= 1.5."""
    warm = {q: ratio(job.get(q, {}).get(system), job.get(q, {}).get(peer)) for q in TPCH}
    measured = {q: r for q, r in warm.items() if r is not None}
    if not measured:
        return [Target(what, "flintlock / warm PySpark <= 1.2 (gm), <= 1.5", "n/a", None)]
    gm = geomean(measured.values())
    worst_q = max(measured, key=lambda q: measured[q])
    return [Target(f"{what}, geometric mean", "flintlock / warm PySpark <= 1.2",
                   _fmt_ratio(gm), gm is not None and gm <= 1.2),
            Target(f"{what}, every query", "flintlock / warm PySpark <= 1.5",
                   f"worst {worst_q} {_fmt_ratio(measured[worst_q])}", measured[worst_q] <= 1.5)]


def slot_sharing_ratio(result: Mapping[str, Any]) -> float | None:
    """Median of the last ``measured`` Q18 runs at p4 on 2 x 4 slots over the same at p2 on
    2 x 1 slots (``benchmarks.data_plane.slot_sharing``); None when not measured."""
    n = result.get("measured") or 0
    p2 = Summary.of(result.get("p2_2x1_s", [])[-n:]) if n else None
    p4 = Summary.of(result.get("p4_2x4_s", [])[-n:]) if n else None
    return ratio(p4, p2)


def linearity(cp: Sequence[Mapping[str, Any]]) -> float | None:
    """How much the time per subtask (to all deployed) grows from the smallest to the largest job:
    1.0 is perfectly linear, 2.0 means each subtask costs twice as much in the largest job."""
    pts = [(r["subtasks"], r["deployed"].median) for r in cp if r.get("deployed")]
    if len(pts) < 2:
        return None
    (n0, t0), (n1, t1) = pts[0], pts[-1]
    if t0 <= 0 or n0 <= 0:
        return None
    return (t1 / n1) / (t0 / n0)
