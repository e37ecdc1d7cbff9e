"""``docs/benchmarks.md`` and its charts (``docs/images/bench-*.png``) from one results document.

    python -m benchmarks report benchmarks/results/<date>-<host>.json

``render_markdown(doc, source)`` is pure (text from the document; tested without Spark or
matplotlib); ``write_charts`` draws the PNGs with matplotlib (Agg backend); ``write_report`` does
both.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.stats import (
    DUCKDB,
    FLINTLOCK_LOCAL,
    FLINTLOCK_SESSION,
    FLINTLOCK_SESSION_STANDALONE,
    LOOP_LAG_P99_BOUND_MS,
    PYFLINK,
    PYSPARK_COLD,
    PYSPARK_WARM,
    PYSPARK_WARM_STANDALONE,
    TPCH,
    Summary,
    check_targets,
    geomean,
    ratio,
    slot_sharing_ratio,
    summarize,
    summarize_control_plane,
)

__all__ = ["CHARTS", "RATIOS", "render_markdown", "write_charts", "write_report"]

REPO = Path(__file__).resolve().parents[1]
ORDER = (FLINTLOCK_SESSION, FLINTLOCK_LOCAL, PYSPARK_WARM, PYSPARK_COLD,
         FLINTLOCK_SESSION_STANDALONE, PYSPARK_WARM_STANDALONE, PYFLINK, DUCKDB)
WORKLOAD_TITLES = {**{q: f"TPC-H Q{q[1:]}" for q in TPCH},
                   "word_count": "word count", "flights": "nycflights13"}
#: (column title, numerator system, denominator system, metric)
RATIOS = (
    ("session / PySpark warm (engine)", FLINTLOCK_SESSION, PYSPARK_WARM, "job_s"),
    ("on standalone Spark: session / PySpark warm (engine)", FLINTLOCK_SESSION_STANDALONE,
     PYSPARK_WARM_STANDALONE, "job_s"),
    ("session / PySpark cold (as run)", FLINTLOCK_SESSION, PYSPARK_COLD, "wall_s"),
    ("session / PyFlink (as run)", FLINTLOCK_SESSION, PYFLINK, "wall_s"),
    ("local / PySpark cold (as run)", FLINTLOCK_LOCAL, PYSPARK_COLD, "wall_s"),
    ("session / DuckDB (engine)", FLINTLOCK_SESSION, DUCKDB, "job_s"),
)
CHARTS = {
    "engine": "bench-engine.png",
    "as_run": "bench-as-run.png",
    "control_plane": "bench-control-plane.png",
    "memory": "bench-memory.png",
}


def _cell(s: Summary | None) -> str:
    if s is None:
        return "–"
    if s.n == 1:
        return f"{s.median:.2f}"
    return f"{s.median:.2f} ({s.min:.2f}–{s.max:.2f})"


def _ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}"


def _workloads(table: Mapping[str, Any]) -> list[str]:
    known = [w for w in WORKLOAD_TITLES if w in table]
    return known + sorted(w for w in table if w not in WORKLOAD_TITLES)


def _systems(table: Mapping[str, Mapping[str, Any]]) -> list[str]:
    present = {s for per in table.values() for s in per}
    return [s for s in ORDER if s in present] + sorted(present - set(ORDER))


def time_table(table: Mapping[str, Mapping[str, Summary]], title: str) -> list[str]:
    systems = _systems(table)
    if not systems:
        return []
    lines = [f"| {title} | " + " | ".join(systems) + " |",
             "|---|" + "---:|" * len(systems)]
    for w in _workloads(table):
        lines.append(f"| {WORKLOAD_TITLES.get(w, w)} | "
                     + " | ".join(_cell(table[w].get(s)) for s in systems) + " |")
    return lines


def ratio_table(doc: Mapping[str, Any]) -> list[str]:
    by_metric = {m: summarize(doc.get("measurements", []), m) for m in ("wall_s", "job_s")}
    cols = [(t, a, b, m) for t, a, b, m in RATIOS
            if any(a in per and b in per for per in by_metric[m].values())]
    if not cols:
        return []
    lines = ["| workload | " + " | ".join(t for t, *_ in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    workloads = _workloads(by_metric["wall_s"])
    values: dict[str, list[float | None]] = {t: [] for t, *_ in cols}
    for w in workloads:
        cells = []
        for t, a, b, m in cols:
            per = by_metric[m].get(w, {})
            r = ratio(per.get(a), per.get(b))
            if w in TPCH:
                values[t].append(r)
            cells.append(_ratio(r))
        lines.append(f"| {WORKLOAD_TITLES.get(w, w)} | " + " | ".join(cells) + " |")
    if any(w in TPCH for w in workloads):
        lines.append("| **TPC-H geometric mean** | "
                     + " | ".join(f"**{_ratio(geomean(values[t]))}**" for t, *_ in cols) + " |")
    return lines


def _mib(n: int | float | None) -> str:
    return "–" if not n else f"{n / 2**20:,.0f}"


def _machine(doc: Mapping[str, Any]) -> list[str]:
    m = doc.get("machine", {})
    v = m.get("versions", {})
    flink = (doc.get("systems", {}).get(PYFLINK) or {}).get("apache-flink")
    load = m.get("load_average_at_start") or [0.0]
    return [
        f"- Host `{m.get('host')}`: {m.get('cpu')}, {m.get('logical_cores')} logical cores "
        f"({m.get('physical_cores')} physical), {(m.get('memory_bytes') or 0) / 2**30:.1f} GiB RAM, "
        f"{m.get('os')}; load average {load[0]:.1f} when the run started.",
        f"- Python {m.get('python')}, {m.get('java')}; flintlock {v.get('flintlock')} "
        f"(commit {m.get('git_commit')}), PySpark {v.get('pyspark')}, DuckDB {v.get('duckdb')}, "
        f"pyarrow {v.get('pyarrow')}" + (f", apache-flink {flink}" if flink else "") + ".",
    ]


def spark_line(doc: Mapping[str, Any]) -> str:
    """Which Spark the Spark-based systems used (the results' ``spark``; older ones had none)."""
    spark = doc.get("spark") or {"mode": "local"}
    cores = doc.get("settings", {}).get("cores")
    if spark.get("mode", "local") == "local":
        return ("- Spark: each system its own, embedded: every flintlock TaskManager starts a "
                "Spark Connect server in its process (`local[<cores>]`), plain PySpark a classic "
                f"`local[{cores}]` session in its process.")
    url = spark.get("remote")
    if spark.get("mode") == "standalone":
        where = (f"a Spark standalone cluster started by the harness for the run (master "
                 f"`{spark.get('master')}`, one worker with {spark.get('worker_cores')} cores and "
                 f"{spark.get('worker_memory')}, Spark Connect server `{url}`)")
    else:
        where = f"the Spark Connect server `{url}` (`--spark-remote`)"
    return (f"- Spark: one shared Spark, {where}: flintlock's TaskManagers with "
            f"`spark.remote={url}`, plain PySpark as a PySpark Connect client "
            "(`SparkSession.builder.remote`). DuckDB and PyFlink do not use Spark.")


def _settings(doc: Mapping[str, Any]) -> list[str]:
    s = doc.get("settings", {})
    d = doc.get("data", {})
    words = d.get("text_words")
    words_txt = f"{words / 1e6:.1f}M words" if words else f"{d.get('text_copies')} copies"
    return [
        f"- TPC-H SF {s.get('sf')}; word count over the King James Bible x{d.get('text_copies')} "
        f"({words_txt}); nycflights13.",
        f"- {s.get('warmups')} warm-up round(s), then {s.get('runs')} measured round(s) per "
        f"workload; systems alternate, their order rotating every round. Cells: median (min–max) "
        "in seconds.",
        f"- Parallelism {s.get('parallelism')} everywhere (flintlock `-p`, PyFlink "
        f"`parallelism.default`); the session cluster has {s.get('task_managers')} TaskManagers "
        f"x {s.get('slots_per_task_manager')} slot(s).",
        spark_line(doc),
        *([f"- Systems ending in `@standalone` ran on a Spark standalone cluster the harness "
           f"started (master `{doc['spark_standalone'].get('master')}`, one worker with "
           f"{doc['spark_standalone'].get('worker_cores')} cores, Spark Connect server "
           f"`{doc['spark_standalone'].get('remote')}`): flintlock's TaskManagers with "
           "`spark.remote`, plain PySpark as a Connect client."]
          if doc.get("spark_standalone") else []),
    ]


def _is_smoke(doc: Mapping[str, Any]) -> str | None:
    s = doc.get("settings", {})
    reasons = []
    if (s.get("sf") or 0) < 1:
        reasons.append(f"TPC-H SF {s.get('sf')}")
    if (s.get("runs") or 0) < 3:
        reasons.append(f"{s.get('runs')} measured run(s)")
    load = (doc.get("machine", {}).get("load_average_at_start") or [0])[0]
    cores = doc.get("machine", {}).get("logical_cores") or 1
    if load and load > cores:
        reasons.append(f"load average {load:.1f} on {cores} cores at the start")
    return ", ".join(reasons) or None


def render_markdown(doc: Mapping[str, Any], source: str, images: Mapping[str, str] | None = None
                    ) -> str:
    """The whole ``docs/benchmarks.md`` text for results document ``doc`` (read from ``source``);
    ``images`` maps chart keys (``CHARTS``) to paths relative to the Markdown file."""
    images = images or {}
    wall = summarize(doc.get("measurements", []), "wall_s")
    job = summarize(doc.get("measurements", []), "job_s")
    out: list[str] = [
        "# Benchmarks",
        "",
        f"Generated by `python -m benchmarks report {source}` from the run started "
        f"{doc.get('started')} ({(doc.get('duration_s') or 0) / 60:.1f} min): "
        f"`{doc.get('command')}`.",
        "",
    ]
    smoke = _is_smoke(doc)
    if smoke:
        out += [f"> **Not a benchmark result**: this page comes from a check of the harness "
                f"({smoke}). Its figures show the format only; run the full benchmark (below) "
                "on an idle machine for numbers to quote.", ""]
    if doc.get("aborted"):
        out += ["> **The run was aborted**; the figures are incomplete.", ""]
    out += ["## Machine and settings", "", *_machine(doc), *_settings(doc), "",
            "Run it (the defaults, all 22 TPC-H queries and the other workloads with 1 warm-up "
            "and 3 measured rounds, take roughly 1 h 45 min to 2 h at SF 1 on an idle 2-core "
            "machine; a slower flintlock stretches that, each run being cut at `--timeout`; "
            "`--workloads` and `--systems` select a part (`--workloads tpch` is the 22 queries), "
            "`--spark-remote` runs the Spark-based systems on one shared Spark, a system "
            "with `@standalone` appended runs on a Spark standalone cluster beside the others, "
            "the `slot_sharing` and `load` workloads start clusters of their own, "
            "`python -m benchmarks run --help` lists the knobs):",
            "", "```bash", "make bench            # = .venv/bin/python -m benchmarks run --sf 1",
            "python -m benchmarks report benchmarks/results/<date>-<host>.json  # this page",
            "```", ""]

    out += ["## Targets (issues 6 and 10)", "", "| target | goal | measured | met |",
            "|---|---|---|:-:|"]
    for t in check_targets(doc):
        mark = {True: "yes", False: "**no**", None: "–"}[t.met]
        out.append(f"| {t.name} | {t.goal} | {t.measured} | {mark} |")
    out.append("")

    out += ["## Data workloads", "",
            "**As users run them** (`wall_s`): what the user waits for. flintlock-session: the "
            "`flintlock run --target remote` process (interpreter start, compile, submit, wait, "
            "fetch the rows); flintlock-local: `flintlock run` with an embedded MiniCluster and "
            "Spark session started in the process; pyspark-cold: a fresh `python job.py`; "
            "pyflink: a fresh PyFlink process (JVM gateway and local Flink included); "
            "pyspark-warm and duckdb: the query in an already running session.", ""]
    out += time_table(wall, "workload (wall s)")
    out += ["", "**Engine time** (`job_s`): the query including the fetch of its result, timed "
            "inside the process that runs it (for flintlock, `execute_and_collect()` in the "
            "program: compile, submit, run, fetch).", ""]
    out += time_table(job, "workload (engine s)")
    if images.get("engine"):
        out += ["", f"![engine time per workload]({images['engine']})"]
    if images.get("as_run"):
        out += ["", f"![wall time as users run them]({images['as_run']})"]
    rt = ratio_table(doc)
    if rt:
        out += ["", "### Ratios flintlock / other (median / median; below 1 means flintlock is "
                "faster)", "", *rt]
    rest = summarize(doc.get("measurements", []), "rest_s")
    if rest:
        out += ["", "flintlock-session, the JobManager's own submit-to-FINISHED duration (REST "
                "`/jobs/:jobid` `duration`):", ""]
        out += time_table(rest, "workload (REST s)")
    out.append("")

    lat = doc.get("latency")
    if lat:
        c, r = Summary.of(lat.get("client_s", [])), Summary.of(lat.get("rest_s", []))
        out += ["## Small-job latency", "",
                f"A {lat.get('rows', 1000):,}-row job of {lat.get('vertices', 2)} vertices "
                f"(sequence source -> HASH -> count/sum -> collect, parallelism "
                f"{lat.get('parallelism', 1)}) on the warm session cluster, "
                f"{len(lat.get('rest_s', []))} runs after warm-ups.", "",
                "| measure | median | min | max |", "|---|---:|---:|---:|"]
        for label, s in (("submit to FINISHED (JobManager, REST duration)", r),
                         ("`execute_and_collect()` in the client", c)):
            if s:
                out.append(f"| {label} | {s.median:.3f} s | {s.min:.3f} s | {s.max:.3f} s |")
        out.append("")

    out += _data_plane(doc)

    cp = summarize_control_plane(doc.get("control_plane", []))
    if cp:
        out += ["## Control-plane throughput", "",
                "No-op subtasks (`flintlock.testing.invokables.NoOpInvokable`) of one job vertex "
                "on a MiniCluster with a slot for each (no Spark): from job start to the last "
                "subtask DEPLOYING, and to FINISHED.", "",
                "| subtasks | to all deployed (s) | to FINISHED (s) | deployed / s |",
                "|---:|---:|---:|---:|"]
        for row in cp:
            rate = f"{row['deploy_rate']:,.0f}" if row["deploy_rate"] else "–"
            out.append(f"| {row['subtasks']:,} | {_cell(row['deployed'])} | "
                       f"{_cell(row['finished'])} | {rate} |")
        if images.get("control_plane"):
            out += ["", f"![control plane]({images['control_plane']})"]
        out.append("")

    mem = doc.get("memory") or {}
    if mem:
        out += ["## Peak memory", "",
                "Peak resident set size per process role, sampled every 0.2 s; the tree column "
                "adds the role's child processes (the Spark JVM of a Python process, Python UDF "
                "workers). Cold roles are the peak over all their runs.", "",
                "| process | peak RSS (MiB) | with children (MiB) |", "|---|---:|---:|"]
        for role, p in mem.items():
            out.append(f"| {role} | {_mib(p.get('peak_rss_bytes'))} | "
                       f"{_mib(p.get('peak_tree_rss_bytes'))} |")
        if images.get("memory"):
            out += ["", f"![peak memory]({images['memory']})"]
        out.append("")

    problems = [*doc.get("errors", []), *doc.get("skipped", [])]
    if problems:
        out += ["## Failures and skipped parts", ""]
        for p in problems:
            what = " ".join(str(p[k]) for k in ("workload", "system", "subtasks", "run") if k in p)
            text = str(p.get("error") or p.get("reason", "")).strip().splitlines()
            out.append(f"- {what}: {text[0] if text else ''}")
        out.append("")

    out += ["## Method notes", "",
            "- Every answer of every run is checked against DuckDB's (same files, the SQL of "
            "`examples/tpch/reference.py`, `examples/word_count.py`, `examples/flights.py`) "
            "before its time counts; a wrong answer stops the run.",
            "- flintlock runs the programs of `examples/` (`benchmarks/programs/flintlock_job.py`);"
            " plain PySpark runs idiomatic DataFrame code (`benchmarks/pyspark_queries.py`, "
            "`benchmarks/pyspark_queries_q12_q22.py`) with Spark's defaults apart from "
            + ("`local[N]` (classic PySpark)" if (doc.get("spark") or {}).get("mode", "local")
               == "local" else "the shared Spark (PySpark Connect)")
            + "; both collect the rows.",
            "- PyFlink (apache-flink from PyPI, Table API / SQL in batch mode) lives in its own "
            "venv (`.cache/bench-pyflink-venv`: it pins pandas < 2.3 and pyarrow < 21). Its pip "
            "package has no Parquet format, so it reads CSV copies of the same data, written "
            "once by DuckDB: parsing CSV costs it more than Parquet would. It runs the reference "
            "SQL in Flink's dialect (`benchmarks/flink_sql.py`).",
            "- flintlock-local's engine time includes starting its MiniCluster and Spark session "
            "(with a shared Spark: connecting to it): the program's first `execute()` starts "
            "them.",
            "- DuckDB runs in the harness process and stands for what the hardware allows on one "
            "machine.",
            "- Failover: see [failover-benchmark.md](failover-benchmark.md).",
            ""]
    return "\n".join(out)


def _data_plane(doc: Mapping[str, Any]) -> list[str]:
    """The slot-sharing and load sections (``benchmarks.data_plane``), when measured."""
    out: list[str] = []
    sharing = doc.get("slot_sharing")
    if sharing:
        n = sharing.get("measured")
        out += ["## Slot sharing", "",
                "TPC-H Q18 written to a FileSink (`benchmarks/programs/q18_file_sink.py`) on "
                "session clusters of 2 TaskManager processes; the client process's wall time, "
                f"median of the last {n} runs on each cluster (all runs in brackets).", "",
                "| cluster | job parallelism | most subtasks of a vertex | s |",
                "|---|---:|---:|---:|"]
        for tag, label, p in (("p2_2x1", "2 x 1 slots", 2), ("p4_2x4", "2 x 4 slots", 4)):
            runs = sharing.get(f"{tag}_s", [])
            cell = _cell(Summary.of(runs[-n:] if n else runs))
            out.append(f"| {label} | {p} | {sharing.get('parallelism', {}).get(tag, '–')} | "
                       f"{cell} ({', '.join(f'{r:.2f}' for r in runs)}) |")
        out += ["", f"Ratio p4 / p2: **{_ratio(slot_sharing_ratio(sharing))}**.", ""]
    load = doc.get("load")
    if load:
        out += ["## Under load", "",
                "A session cluster of 2 TaskManagers x 4 slots with `heartbeat.timeout: 10000`: "
                f"Q18 at parallelism 4 ({load.get('q18_s', 0):.1f} s), then {load.get('jobs')} "
                f"small jobs submitted at once ({load.get('jobs_s', 0):.1f} s). "
                f"{load.get('finished')} jobs finished, Q18 with {load.get('restarts')} "
                f"restart(s); {len(load.get('heartbeat_timeouts', []))} heartbeat timeout(s) in "
                f"the logs. Every process's event-loop lag, polled from REST every second "
                f"({load.get('polls')} polls; the worst 60 s window; bound p99 < "
                f"{LOOP_LAG_P99_BOUND_MS:.0f} ms):", "",
                "| process | p99 (ms) | max (ms) |", "|---|---:|---:|"]
        for who, lag in sorted(load.get("lag_ms", {}).items()):
            out.append(f"| {who} | {lag.get('LagP99Ms', 0):.0f} | {lag.get('LagMaxMs', 0):.0f} |")
        out.append("")
    return out


def write_charts(doc: Mapping[str, Any], images_dir: Path) -> dict[str, str]:
    """Draw the charts that have data; return ``{chart: file name}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}

    def bars(table: Mapping[str, Mapping[str, Summary]], systems: Sequence[str], key: str,
             title: str) -> None:
        systems = [s for s in systems if any(s in per for per in table.values())]
        workloads = _workloads(table)
        if not systems or not workloads:
            return
        fig, ax = plt.subplots(figsize=(max(11.0, 0.6 * len(workloads) + 2), 4.8))
        width = 0.8 / len(systems)
        for i, system in enumerate(systems):
            xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(workloads))]
            ys = [table[w][system].median if system in table[w] else 0 for w in workloads]
            err_lo = [table[w][system].median - table[w][system].min if system in table[w] else 0
                      for w in workloads]
            err_hi = [table[w][system].max - table[w][system].median if system in table[w] else 0
                      for w in workloads]
            ax.bar(xs, ys, width, label=system, yerr=[err_lo, err_hi], capsize=2)
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels([WORKLOAD_TITLES.get(w, w) for w in workloads],
                           rotation=20 if len(workloads) <= 10 else 45, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log scale; median, min-max)")
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(images_dir / CHARTS[key], dpi=110)
        plt.close(fig)
        made[key] = CHARTS[key]

    ms = doc.get("measurements", [])
    bars(summarize(ms, "job_s"), (FLINTLOCK_SESSION, FLINTLOCK_LOCAL, PYSPARK_WARM, PYSPARK_COLD,
                                  PYFLINK, DUCKDB), "engine", "Engine time (query incl. fetch)")
    bars(summarize(ms, "wall_s"), (FLINTLOCK_SESSION, FLINTLOCK_LOCAL, PYSPARK_COLD, PYFLINK),
         "as_run", "As users run them (whole submission / process)")

    cp = [r for r in summarize_control_plane(doc.get("control_plane", [])) if r["deployed"]]
    if cp:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs = [r["subtasks"] for r in cp]
        ax.plot(xs, [r["deployed"].median for r in cp], "o-", label="to all deployed")
        ax.plot(xs, [r["finished"].median if r["finished"] else None for r in cp], "s-",
                label="to FINISHED")
        first = cp[0]["deployed"].median / cp[0]["subtasks"]
        ax.plot(xs, [first * x for x in xs], ":", color="grey", label="linear from smallest")
        ax.plot(xs, [x / 2000 for x in xs], "--", color="tab:red", label="target 2,000/s")
        ax.set_xlabel("no-op subtasks in the job")
        ax.set_ylabel("seconds (median)")
        ax.set_title("Control plane: scheduling time vs job size")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(images_dir / CHARTS["control_plane"], dpi=110)
        plt.close(fig)
        made["control_plane"] = CHARTS["control_plane"]

    mem = doc.get("memory") or {}
    if mem:
        roles = list(mem)
        fig, ax = plt.subplots(figsize=(8, 0.4 * len(roles) + 1.2))
        ax.barh(roles, [mem[r].get("peak_tree_rss_bytes", 0) / 2**20 for r in roles],
                label="with children")
        ax.barh(roles, [mem[r].get("peak_rss_bytes", 0) / 2**20 for r in roles],
                label="process alone")
        ax.set_xlabel("peak RSS (MiB)")
        ax.invert_yaxis()
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(images_dir / CHARTS["memory"], dpi=110)
        plt.close(fig)
        made["memory"] = CHARTS["memory"]
    return made


def write_report(results: str | Path, docs: str | Path | None = None,
                 images_dir: str | Path | None = None) -> Path:
    """Regenerate ``docs`` (default ``docs/benchmarks.md``) and its charts from ``results``."""
    results = Path(results)
    doc = json.loads(results.read_text())
    docs = Path(docs) if docs else REPO / "docs" / "benchmarks.md"
    images_dir = Path(images_dir) if images_dir else docs.parent / "images"
    made = write_charts(doc, images_dir)
    rel = Path(os.path.relpath(images_dir.resolve(), docs.parent.resolve()))
    images = {key: (rel / name).as_posix() for key, name in made.items()}
    try:
        source = results.resolve().relative_to(REPO).as_posix()
    except ValueError:
        source = str(results)
    docs.parent.mkdir(parents=True, exist_ok=True)
    docs.write_text(render_markdown(doc, source, images))
    return docs
