"""What a streaming run achieved, read back from its output files, and how its memory grew.

Every system writes files under its output directory whose modification time is when their rows
were written: Parquet (flintlock, Structured Streaming) or JSON lines (PyFlink; its pip package
has no Parquet format). Hidden files (``.``/``_`` prefixes: in-progress parts, Spark's
``_spark_metadata``, ``_SUCCESS``) are skipped.

- ``events`` rows are ``(id, word, created_ms)``: one latency per event, ``written - created_ms``;
- ``flights`` rows are window results ``(origin, window_start, departures, mean_dep_delay,
  max_created_ms, min_created_ms)``: one latency per window, ``written - max_created_ms`` (from
  the last event that went into the window to its result being written, waiting for the
  watermark included); the events counted are the sum of ``departures``.

Throughput = events / (last file written - first event created), in events/s. Latency
percentiles leave out what was created in the first ``warmup_s`` seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["FORMATS", "compare_windows", "measure", "output_files", "persistent_rss",
           "rss_growth_mib_per_min", "window_results"]

#: output formats ``measure`` reads: Parquet files (``*.parquet``), JSON lines (any other name)
FORMATS = ("parquet", "json")


def output_files(out: Path, fmt: str = "parquet") -> Iterator[Path]:
    """The data files under ``out`` (recursively, sorted), hidden files and directories left out."""
    for f in sorted(out.rglob("*")):
        if not f.is_file() or any(p.startswith((".", "_")) for p in f.relative_to(out).parts):
            continue
        if (f.suffix == ".parquet") == (fmt == "parquet") and f.suffix != ".crc":
            yield f


def _read(f: Path, fmt: str, columns: Sequence[str]) -> dict[str, list[Any]]:
    """The ``columns`` of one file as lists (timestamps as epoch ms)."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(f, columns=list(columns))
    else:
        import pyarrow.json as pj

        if f.stat().st_size == 0:
            return {c: [] for c in columns}
        table = pj.read_json(f).select(list(columns))
    result = {}
    for c in columns:
        col = table.column(c)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", col.type.tz)).cast(pa.int64())
        result[c] = col.to_pylist()
    return result


def _percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ascending ``sorted_values`` in ms, in seconds."""
    if not sorted_values:
        return None
    return round(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] / 1000, 3)


def measure(out: Path, workload: str = "events", fmt: str = "parquet", warmup_s: float = 0.0,
            commit_times: bool = False) -> dict[str, Any]:
    """Throughput and latency of one run from its output directory.

    Args:
        out: the run's output directory.
        workload: ``events`` (one latency per event) or ``flights`` (one per window result).
        fmt: ``parquet`` or ``json`` (JSON lines).
        warmup_s: latencies of what was created in the first ``warmup_s`` seconds after the
            first event are left out of the percentiles.
        commit_times: also give ``commit_latency_p50_s`` / ``_p99_s`` measured to each file's
            status change time (``st_ctime``), which is when a file renamed into place on commit
            (PyFlink's filesystem sink) became visible.

    Returns:
        ``{"events", "throughput_per_s" (events/s), "latency_p50_s", "latency_p99_s"}``, plus
        ``"windows"`` for flights; None where nothing was written.
    """
    created_col = "created_ms" if workload == "events" else "max_created_ms"
    cols = [created_col] if workload == "events" else [created_col, "min_created_ms",
                                                       "departures"]
    points: list[tuple[float, float, float]] = []  # (created, written, committed) in ms
    first_created, last_written, events = math.inf, 0.0, 0
    for f in output_files(out, fmt):
        st = f.stat()
        written, committed = st.st_mtime * 1000, st.st_ctime * 1000
        rows = _read(f, fmt, cols)
        created = rows[created_col]
        if not created:
            continue
        if workload == "events":
            events += len(created)
            first_created = min(first_created, min(created))
        else:
            events += sum(rows["departures"])
            first_created = min(first_created, min(rows["min_created_ms"]))
        points += [(c, written, committed) for c in created]
        last_written = max(last_written, written)
    kept = [p for p in points if p[0] >= first_created + warmup_s * 1000]
    latencies = sorted(w - c for c, w, _ in kept)
    span_s = (last_written - first_created) / 1000 if events else None
    result: dict[str, Any] = {
        "events": events,
        "throughput_per_s": round(events / span_s) if span_s and span_s > 0 else None,
        "latency_p50_s": _percentile(latencies, 0.50),
        "latency_p99_s": _percentile(latencies, 0.99)}
    if workload != "events":
        result["windows"] = len(points)
    if commit_times:
        committed = sorted(k - c for c, _, k in kept)
        result["commit_latency_p50_s"] = _percentile(committed, 0.50)
        result["commit_latency_p99_s"] = _percentile(committed, 0.99)
    return result


def window_results(out: Path, fmt: str = "parquet") -> dict[tuple[str, int], tuple[int, float]]:
    """A flights run's window results: ``{(origin, window start in epoch ms): (departures, mean
    departure delay in minutes)}``.

    Raises:
        ValueError: a window was written twice.
    """
    results: dict[tuple[str, int], tuple[int, float]] = {}
    for f in output_files(out, fmt):
        rows = _read(f, fmt, ["origin", "window_start", "departures", "mean_dep_delay"])
        for origin, start, n, mean in zip(rows["origin"], rows["window_start"],
                                          rows["departures"], rows["mean_dep_delay"],
                                          strict=True):
            if (origin, start) in results:
                raise ValueError(f"{out}: window ({origin}, {start}) written twice")
            results[(origin, start)] = (n, mean)
    return results


def compare_windows(got: dict[tuple[str, int], tuple[int, float]],
                    expected: dict[tuple[str, int], tuple[int, float]]) -> dict[str, Any]:
    """How a run's window results agree with the expected ones (``reference_windows``).

    A run may miss the windows still open when it was stopped (Structured Streaming in append
    mode emits a window only once the watermark has passed it, and a stopped query never does):
    ``missing_not_at_end`` counts the missing windows that start before the last window written.

    Returns:
        ``{"windows", "mismatched", "extra", "missing", "missing_not_at_end", "agree"}``; agree is
        True when no written window differs (count exact, mean within 1e-6 min) or is unexpected
        and no window is missing but at the end.
    """
    mismatched = sum(1 for k, (n, mean) in got.items() if k in expected and (
        expected[k][0] != n or not math.isclose(expected[k][1], mean, abs_tol=1e-6)))
    extra = sum(1 for k in got if k not in expected)
    last = max((start for _, start in got), default=-math.inf)
    missing = [k for k in expected if k not in got]
    early = sum(1 for _, start in missing if start < last)
    return {"windows": len(got), "mismatched": mismatched, "extra": extra,
            "missing": len(missing), "missing_not_at_end": early,
            "agree": mismatched == 0 and extra == 0 and early == 0}


def persistent_rss(processes: Iterable[Mapping[str, Any]], min_samples: int = 3
                   ) -> list[tuple[float, int]]:
    """The summed RSS of the processes that live through a run, per sample time.

    Args:
        processes: ``[{"rss": [(seconds since start, RSS in bytes)], ...}]``, one per process,
            sampled at the same times.
        min_samples: processes seen in fewer samples are left out: a JVM that forks a child to
            run ``chmod`` or ``jspawnhelper`` shows the child for one sample with its parent's RSS
            (the pages are shared until the child execs), which says nothing about memory held.

    Returns:
        ``[(seconds, bytes)]`` in time order.
    """
    totals: dict[float, int] = {}
    for proc in processes:
        series = proc.get("rss") or []
        if len(series) >= min_samples:
            for t, rss in series:
                totals[t] = totals.get(t, 0) + int(rss)
    return sorted(totals.items())


def rss_growth_mib_per_min(series: Sequence[Sequence[float]], tail: float = 0.5) -> float | None:
    """The slope of RSS over the last ``tail`` of a run (least squares), in MiB per minute.

    Args:
        series: ``[(seconds since start, RSS in bytes)]``, in time order.
        tail: the fraction of the run's duration at its end that is fitted (0.5: the second half,
            after start-up and warm-up).

    Returns:
        The slope, or None with fewer than 3 samples in the tail.
    """
    if not series:
        return None
    end = series[-1][0]
    points = [(t, r / 2**20) for t, r in series if t >= end * (1 - tail)]
    if len(points) < 3:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_r = sum(r for _, r in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    slope = sum((t - mean_t) * (r - mean_r) for t, r in points) / var  # MiB per second
    return round(slope * 60, 2)
