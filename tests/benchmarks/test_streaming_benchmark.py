"""The streaming benchmark's measurements, flights replay, window check and report (no Spark, no
JVM, no processes): output files are written by hand with chosen modification times."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.streaming import report
from benchmarks.streaming.__main__ import _command, ratios
from benchmarks.streaming.flights import (
    CYCLE_MS,
    HOUR_MS,
    flight_at,
    flight_events,
    reference_windows,
)
from benchmarks.streaming.measure import (
    compare_windows,
    measure,
    output_files,
    persistent_rss,
    rss_growth_mib_per_min,
    window_results,
)
from benchmarks.streaming.pyflink_programs import events_statements, flights_statements

T0 = 1_700_000_000_000  # epoch ms of the first event


def _touch(path: Path, written_ms: float) -> None:
    os.utime(path, (written_ms / 1000, written_ms / 1000))


def _parquet(path: Path, written_ms: float, **columns: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    _touch(path, written_ms)


def _json_lines(path: Path, written_ms: float, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _touch(path, written_ms)


def _events(out: Path, fmt: str) -> None:
    """Two files: 100 events created at T0..T0+990 written at T0+1500, and 100 created at
    T0+10000..T0+10990 written at T0+12000 (last write: 12 s after the first event)."""
    batches = [(range(0, 100), T0 + 1500), (range(100, 200), T0 + 12000)]
    for k, (ids, written) in enumerate(batches):
        created = [T0 + (i % 100) * 10 + (10_000 if i >= 100 else 0) for i in ids]
        if fmt == "parquet":
            _parquet(out / f"part-{k}.parquet", written, id=list(ids),
                     word=["W1"] * 100, created_ms=created)
        else:
            rows = [{"id": i, "word": "W1", "created_ms": c}
                    for i, c in zip(ids, created, strict=True)]
            _json_lines(out / "part=W1" / f"part-abc-0-{k}", written, rows)


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_measure_events_gives_throughput_and_latency_percentiles(tmp_path: Path, fmt: str) -> None:
    _events(tmp_path, fmt)
    m = measure(tmp_path, "events", fmt)
    assert m["events"] == 200
    assert m["throughput_per_s"] == round(200 / 12.0)
    # latencies (ms): 510 .. 1500 and 1010 .. 2000 by 10; sorted, #100 is 1260 and #198 1990
    assert (m["latency_p50_s"], m["latency_p99_s"]) == (1.26, 1.99)


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_measure_leaves_the_warmup_out_of_the_percentiles_only(tmp_path: Path, fmt: str) -> None:
    _events(tmp_path, fmt)
    m = measure(tmp_path, "events", fmt, warmup_s=5.0)
    assert m["events"] == 200 and m["throughput_per_s"] == round(200 / 12.0)
    # only the second file's events: 1010 .. 2000 ms
    assert (m["latency_p50_s"], m["latency_p99_s"]) == (1.51, 2.0)


def test_output_files_skip_hidden_files_and_other_formats(tmp_path: Path) -> None:
    _events(tmp_path, "json")
    (tmp_path / "part=W1" / ".part-abc-0-2.inprogress.123").write_text('{"created_ms": 1}\n')
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "_spark_metadata").mkdir()
    (tmp_path / "_spark_metadata" / "0").write_text("v1")
    (tmp_path / "part=W1" / "empty").write_text("")
    _parquet(tmp_path / "x.parquet", T0, created_ms=[T0])
    assert [f.name for f in output_files(tmp_path, "json")] == ["empty", "part-abc-0-0",
                                                                "part-abc-0-1"]
    assert [f.name for f in output_files(tmp_path, "parquet")] == ["x.parquet"]
    assert measure(tmp_path, "events", "json")["events"] == 200


def test_measure_of_nothing_written(tmp_path: Path) -> None:
    assert measure(tmp_path, "events", "parquet", commit_times=True) == {
        "events": 0, "throughput_per_s": None, "latency_p50_s": None, "latency_p99_s": None,
        "commit_latency_p50_s": None, "commit_latency_p99_s": None}


def test_commit_latency_is_measured_to_the_status_change_time(tmp_path: Path) -> None:
    f = tmp_path / "part-0"
    f.write_text("")
    created = int(f.stat().st_ctime * 1000) - 3000
    _json_lines(f, created + 1000, [{"id": 1, "word": "W", "created_ms": created}])
    m = measure(tmp_path, "events", "json", commit_times=True)
    assert m["latency_p50_s"] == 1.0
    assert 2.9 <= m["commit_latency_p50_s"] < 10  # ctime: when utime ran, not earlier


def _windows(out: Path, fmt: str) -> None:
    """Two window files; the first written 2 s after its newest event."""
    start = dt.datetime(2013, 1, 1, 10, tzinfo=dt.UTC)
    rows = [("EWR", start, 3, 1.0, T0 + 1000, T0), ("JFK", start, 2, -2.5, T0 + 1200, T0 + 200),
            ("EWR", start + dt.timedelta(hours=1), 5, 0.5, T0 + 9000, T0 + 1100)]
    names = ["origin", "window_start", "departures", "mean_dep_delay", "max_created_ms",
             "min_created_ms"]
    for k, (part, written) in enumerate([(rows[:2], T0 + 3000), (rows[2:], T0 + 10000)]):
        cols = {n: [r[i] for r in part] for i, n in enumerate(names)}
        if fmt == "parquet":
            _parquet(out / f"part-{k}.parquet", written, **cols)
        else:
            _json_lines(out / f"part-x-0-{k}", written, [
                {**dict(zip(names, r, strict=True)), "window_start": r[1].isoformat()[:19]}
                for r in part])


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_measure_flights_counts_flights_and_one_latency_per_window(tmp_path: Path,
                                                                   fmt: str) -> None:
    _windows(tmp_path, fmt)
    m = measure(tmp_path, "flights", fmt)
    assert m["events"] == 10 and m["windows"] == 3
    assert m["throughput_per_s"] == 1  # 10 flights / 10 s
    assert (m["latency_p50_s"], m["latency_p99_s"]) == (1.8, 2.0)  # 2.0, 1.8, 1.0 s
    assert measure(tmp_path, "flights", fmt, warmup_s=5)["latency_p50_s"] == 1.0
    hour = 1_357_034_400_000  # 2013-01-01 10:00 UTC
    assert window_results(tmp_path, fmt) == {("EWR", hour): (3, 1.0), ("JFK", hour): (2, -2.5),
                                             ("EWR", hour + HOUR_MS): (5, 0.5)}


def test_compare_windows_allows_only_windows_missing_at_the_end() -> None:
    expected = {("EWR", 0): (3, 1.0), ("JFK", 0): (2, 2.0), ("EWR", HOUR_MS): (1, 0.0),
                ("EWR", 2 * HOUR_MS): (4, 1.0)}
    same = compare_windows(dict(expected), expected)
    assert same["agree"] and same["windows"] == 4 and same["missing"] == 0
    tail = compare_windows({k: v for k, v in expected.items() if k[1] < 2 * HOUR_MS}, expected)
    assert tail["agree"] and tail["missing"] == 1 and tail["missing_not_at_end"] == 0
    hole = compare_windows({k: v for k, v in expected.items() if k != ("JFK", 0)}, expected)
    assert not hole["agree"] and hole["missing_not_at_end"] == 1
    wrong = compare_windows({**expected, ("JFK", 0): (2, 2.1), ("LGA", 0): (1, 0.0)}, expected)
    assert not wrong["agree"] and (wrong["mismatched"], wrong["extra"]) == (1, 1)
    close = compare_windows({**expected, ("JFK", 0): (2, 2.0 + 1e-12)}, expected)
    assert close["agree"]


@pytest.fixture
def flights_dir(tmp_path: Path) -> Path:
    """Five flights of nycflights13's shape, one cancelled (no departure delay)."""
    hour = dt.datetime(2013, 1, 1, 10, tzinfo=dt.UTC)
    d = tmp_path / "flights"
    d.mkdir()
    pq.write_table(pa.table({
        "carrier": ["AA", "UA", "B6", "AA", "DL"],
        "origin": ["JFK", "EWR", "JFK", "LGA", "EWR"],
        "dep_delay": [5.0, None, -1.0, 30.0, 2.0],
        "time_hour": pa.array([hour, hour, hour, hour + dt.timedelta(hours=1), hour],
                              pa.timestamp("us", "UTC")),
        "minute": [30, 0, 10, 5, 45],
    }), d / "part-0.parquet")
    return d


def test_flight_replay_repeats_the_year_shifted(flights_dir: Path) -> None:
    from examples.streaming.flight_replay import departed_flights

    columns = departed_flights(str(flights_dir), "scheduled")
    hour = 1_357_034_400_000
    assert [flight_at(columns, i) for i in range(4)] == [
        ("JFK", -1.0, hour + 10 * 60_000), ("JFK", 5.0, hour + 30 * 60_000),
        ("EWR", 2.0, hour + 45 * 60_000), ("LGA", 30.0, hour + HOUR_MS + 5 * 60_000)]
    assert flight_at(columns, 9) == ("JFK", 5.0, hour + 30 * 60_000 + 2 * CYCLE_MS)
    event = flight_events(str(flights_dir))
    before = int(time.time() * 1000)
    row = event(5)
    assert row[1:5] == ("AA", "JFK", 5.0, dt.datetime(2014, 1, 1, 10, 30, tzinfo=dt.UTC))
    assert row[0] == 0 + 4 and before <= row[5] <= int(time.time() * 1000)
    ref = reference_windows(str(flights_dir), 6)
    assert ref == {("JFK", hour): (2, 2.0), ("EWR", hour): (1, 2.0),
                   ("LGA", hour + HOUR_MS): (1, 30.0),
                   ("JFK", hour + CYCLE_MS): (2, 2.0)}


def test_rss_growth_is_the_slope_over_the_second_half() -> None:
    mib = 2**20
    # flat at 100 MiB for 30 s, then +1 MiB per second: the second half's slope is 60 MiB/min
    series = [(t, (100 + max(0, t - 30)) * mib) for t in range(61)]
    assert rss_growth_mib_per_min(series) == pytest.approx(60.0)
    assert rss_growth_mib_per_min([(t, 500 * mib) for t in range(20)]) == 0.0
    assert rss_growth_mib_per_min([(0, mib), (1, 2 * mib)]) is None
    assert rss_growth_mib_per_min([]) is None


def test_the_growth_leaves_out_processes_seen_in_fewer_than_three_samples() -> None:
    mib = 2**20
    jvm = {"rss": [(float(t), 1000 * mib) for t in range(60)]}  # flat
    worker = {"rss": [(float(t), (200 + t // 30) * mib) for t in range(60)]}  # +1 MiB at 30 s
    fork = {"rss": [(50.0, 1000 * mib)]}  # a forked JVM seen once, late in the run
    series = persistent_rss([jvm, worker, fork])
    assert series[0] == (0.0, 1200 * mib) and series[-1] == (59.0, 1201 * mib)
    assert len(series) == 60 and dict(series)[50.0] == 1201 * mib  # the fork is not added
    assert rss_growth_mib_per_min(series) == pytest.approx(0.0, abs=0.5)
    assert persistent_rss([fork]) == [] and persistent_rss([]) == []


def _run(thr: int, p50: float, peak_mib: int, **extra: object) -> dict:
    series = [[float(t), (peak_mib - 10 + t % 2) * 2**20] for t in range(20)]
    return {"events": thr * 60, "throughput_per_s": thr, "latency_p50_s": p50,
            "latency_p99_s": p50 * 2, "wall_s": 70.0, "rss": series,
            "peak_rss_bytes": peak_mib * 2**20, "rss_growth_mib_per_min": 0.5, **extra}


def _doc() -> dict:
    check = {"windows": 100, "mismatched": 0, "extra": 0, "missing": 2,
             "missing_not_at_end": 0, "agree": True}
    events = {"flintlock": {"sustained": _run(9500, 1.2, 1500), "max": _run(60000, 2.0, 1600)},
              "structured-streaming": {"sustained": _run(10000, 0.6, 900),
                                       "max": _run(100000, 1.0, 1000)},
              "pyflink": {"sustained": _run(10100, 0.05, 700, commit_latency_p50_s=1.05,
                                            commit_latency_p99_s=1.9),
                          "max": _run(99000, 0.1, 800)}}
    flights = {"flintlock": {"sustained": _run(9000, 2.5, 1400, check=check),
                             "max": _run(20000, 5.0, 1500)},
               "structured-streaming": {"sustained": _run(9900, 3.0, 950, check=check),
                                        "max": _run(40000, 4.0, 990)},
               "pyflink": {"error": "Traceback ...\nRuntimeError: boom"}}
    return {"host": "vm", "cores": 2, "seconds": 60.0, "max_seconds": 30.0, "rate": 10000,
            "max_rate": 100000, "warmup_s": 10.0,
            "workloads": {"events": {"systems": events, "ratios": ratios(events)},
                          "flights": {"systems": flights, "ratios": ratios(flights)}}}


def test_ratios_are_to_structured_streaming() -> None:
    r = _doc()["workloads"]["events"]["ratios"]
    assert r["flintlock"] == {"max_throughput": 0.6, "sustained_throughput": 0.95,
                              "latency_p50": 2.0, "latency_p99": 2.0}
    assert r["pyflink"]["max_throughput"] == 0.99 and "structured-streaming" not in r
    assert "pyflink" not in _doc()["workloads"]["flights"]["ratios"]  # it failed
    assert ratios({"flintlock": {"sustained": {}, "max": {}}}) == {}


def test_report_renders_every_workload_system_and_target() -> None:
    text = report.render(_doc(), "benchmarks/results/streaming-x.json")
    assert "--seconds 60 --max-seconds 30 --rate 10000 --max-rate 100000 --warmup 10" in text
    assert "first 10 s of each run" in text
    assert "## events" in text and "## flights" in text
    assert "| flintlock | 9,500 of 10,000 | 1.20 s (2.00x) | 2.40 s | 60,000 (0.60x) of " \
           "100,000 offered | 1,500 MiB | +0.5 MiB/min |" in text
    assert "| PyFlink | 10,100 of 10,000 | 0.05 s (0.08x)" in text
    assert "latency to the commit p50 1.05 s, p99 1.90 s" in text
    assert "window results agree with the batch answer" in text
    assert "| PyFlink | failed |" in text and "RuntimeError: boom" in text
    assert "Spark Structured Streaming, PyFlink kept up with the offered maximum rate" in text
    assert "| events | throughput | flintlock / Structured Streaming >= 0.8 | at most 0.60x " \
           "| **no** |" in text
    assert "| events | latency p50 | <= 2 s | 1.20 s | yes |" in text
    assert "| flights | latency p50 | <= 2 s | 2.50 s | **no** |" in text
    assert "+0.5 MiB/min over 60 s | open (needs a 600 s run) |" in text


def test_report_names_the_warm_up_run() -> None:
    text = report.render({**_doc(), "warm_up_run_s": 30.0}, "x.json")
    assert "--warmup 10 --warm-up-run 30" in text
    assert "first ran the same pipeline at the same rate for 30 s" in text
    assert "leave out what was created in the first 10 s of each run: a new job's first " \
           "seconds" in text
    assert "--warm-up-run" not in report.render(_doc(), "x.json")


def test_report_quotes_the_runs_note_before_the_workloads() -> None:
    assert "This run:" not in report.render(_doc(), "x.json")
    doc = {**_doc(), "note": "a slower hour"}
    text = report.render(doc, "x.json")
    assert "This run: a slower hour." in text
    assert text.index("This run: a slower hour.") < text.index("## events")


def test_report_says_when_a_max_rate_run_wrote_nothing() -> None:
    doc = _doc()
    base = doc["workloads"]["flights"]["systems"]["structured-streaming"]
    base["max"] = _run(0, 0.0, 990, throughput_per_s=None, latency_p50_s=None,
                       latency_p99_s=None)
    doc["workloads"]["flights"]["ratios"] = ratios(doc["workloads"]["flights"]["systems"])
    text = report.render(doc, "x.json")
    assert "Spark Structured Streaming's max-rate run wrote nothing within its 30 s at " \
           "100,000/s offered" in text
    assert "flintlock's max-rate run wrote nothing" not in text
    assert "| flights | throughput | flintlock / Structured Streaming >= 0.8 | - | " \
           "**no** (not measured) |" in text


def test_report_says_when_a_max_rate_run_collapsed_below_its_sustained_rate() -> None:
    doc = _doc()
    base = doc["workloads"]["flights"]["systems"]["structured-streaming"]
    base["max"] = _run(700, 9.0, 990)  # wrote less at the maximum than at the sustained rate
    doc["workloads"]["flights"]["ratios"] = ratios(doc["workloads"]["flights"]["systems"])
    text = report.render(doc, "x.json")
    assert "Spark Structured Streaming's max-rate run wrote 700/s at 100,000/s offered, less " \
           "than its sustained run's 9,900/s: it collapsed" in text
    assert "| flights | throughput | flintlock / Structured Streaming >= 0.8 | 28.57x | not " \
           "shown (Structured Streaming's max-rate run collapsed) |" in text
    assert "| events | throughput | flintlock / Structured Streaming >= 0.8 | at most 0.60x " \
           "| **no** |" in text  # a base that did not collapse is compared as before


def test_report_memory_target_needs_a_ten_minute_run() -> None:
    doc = _doc()
    doc["seconds"] = 600.0
    assert "+0.5 MiB/min over 600 s | yes |" in report.render(doc, "x.json")
    doc["workloads"]["events"]["systems"]["flintlock"]["sustained"]["rss_growth_mib_per_min"] = 4
    assert "+4.0 MiB/min over 600 s | **no** |" in report.render(doc, "x.json")


def test_report_takes_the_memory_target_from_a_separate_long_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_run = _run(10000, 1.1, 1400, rss_growth_mib_per_min=0.2, processes=[
        {"process": "python -m benchmarks.streaming.programs", "pid": 7,
         "peak_rss_bytes": 300 * 2**20,
         "rss": [[0.0, 290 * 2**20], [1.0, 295 * 2**20], [2.0, 300 * 2**20]]}])
    memory = {"host": "vm", "cores": 2, "seconds": 600.0, "rate": 10000, "max_rate": 10000,
              "workloads": {"events": {"systems": {"flintlock": {"sustained": long_run,
                                                                 "max": long_run}}}}}
    text = report.render(_doc(), "main.json", memory, "memory.json")
    assert "| events | memory | no growth over a 10-minute run" in text
    assert "+0.2 MiB/min over 600 s | yes |" in text  # events: from the long run
    assert "+0.5 MiB/min over 60 s | open (needs a 600 s run) |" in text  # flights: none
    assert "## Memory over a long run" in text
    assert "| events | flintlock | 600,000 | 1.10 s | 2.20 s | 1,400 MiB | +0.2 MiB/min |" in text
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(report, "MEMORY_CHART", tmp_path / "memory.png")
    report._memory_chart(memory)
    assert (tmp_path / "memory.png").stat().st_size > 0


def test_report_reads_the_old_single_workload_layout() -> None:
    old = {"host": "vm", "cores": 2, "seconds": 60.0, "rate": 10000, "max_rate": 100000,
           "systems": {"flintlock": {"sustained": _run(9500, 2.3, 1500),
                                     "max": _run(90000, 2.0, 1600)},
                       "structured-streaming": {"sustained": _run(10000, 0.7, 900),
                                                "max": _run(99900, 1.0, 1000)}},
           "ratios": {"max_throughput": 0.9, "latency_p50": 3.29, "latency_p99": 3.29}}
    for run in old["systems"]["flintlock"].values():
        del run["rss_growth_mib_per_min"]  # computed from the series instead
    text = report.render(old, "old.json")
    assert "no warm-up left out" in text and "## flights" not in text
    assert "| events | throughput | flintlock / Structured Streaming >= 0.8 | at most 0.90x " \
           "| not shown (upper bound) |" in text
    assert "| flintlock | 9,500 of 10,000 | 2.30 s (3.29x)" in text


def test_report_chart_has_one_panel_per_workload(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(report, "CHART", tmp_path / "rss.png")
    report._chart(_doc())
    assert (tmp_path / "rss.png").stat().st_size > 0


def test_commands_of_the_three_systems(tmp_path: Path) -> None:
    flights = tmp_path / "flights"
    cmd = _command("pyflink", "flights", tmp_path / "o", 100, 5.0, flights, Path("/venv/python"))
    assert cmd[0] == "/venv/python" and cmd[1].endswith("benchmarks/streaming/pyflink_programs.py")
    assert cmd[2:] == ["flights", str(tmp_path / "o"), "100", "5.0", str(flights)]
    cmd = _command("flintlock", "events", tmp_path / "o", 100, 5.0, flights, None)
    assert cmd[1:] == ["-m", "benchmarks.streaming.programs", "flintlock", str(tmp_path / "o"),
                       "100", "5.0", "events"]
    cmd = _command("structured-streaming", "flights", tmp_path / "o", 100, 5.0, flights, None,
                   warm_up_run_s=30.0)
    assert cmd[3:] == ["structured-streaming", str(tmp_path / "o"), "100", "5.0", "flights",
                       str(flights), "--warm-up-run", "30.0"]


def test_a_warm_up_run_goes_first_in_the_same_process_into_its_own_directory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.streaming import programs

    calls: list[tuple] = []
    monkeypatch.setitem(programs.RUNNERS, ("flintlock", "flights"),
                        lambda *args: calls.append(args))
    programs.main(["flintlock", "/o", "100", "5", "flights", "/f", "--warm-up-run", "20"])
    assert calls == [("/o-warm-up", 100, 20.0, "/f"), ("/o", 100, 5.0, "/f")]
    calls.clear()
    programs.main(["flintlock", "/o", "100", "5", "flights", "/f"])
    assert calls == [("/o", 100, 5.0, "/f")]


def test_pyflink_statements() -> None:
    ddl, sink, insert = events_statements("/tmp/out", 1000, 10)
    assert "'rows-per-second' = '1000'" in ddl and "'fields.id.end' = '9999'" in ddl
    assert "PARTITIONED BY (part)" in sink and "'sink.shuffle-by-partition.enable' = 'true'" in sink
    assert "CURRENT_ROW_TIMESTAMP()" in insert and "UPPER(" in insert
    source, _, windows = flights_statements("/tmp/out", 1000, 10)
    assert "WATERMARK FOR sched_dep AS sched_dep - INTERVAL '30' MINUTE" in source
    assert "TUMBLE(TABLE flights, DESCRIPTOR(sched_dep), INTERVAL '1' HOUR)" in windows


def test_the_checkpointed_variants_run_the_events_pipeline_with_their_interval() -> None:
    from benchmarks.streaming import programs
    from benchmarks.streaming.__main__ import main

    runners = {s: programs.RUNNERS[(s, "events")] for s in
               ("flintlock-checkpoints-1s", "flintlock-checkpoints-10s")}
    assert all(r.func is programs.run_flintlock for r in runners.values())  # type: ignore[attr-defined]
    assert {s: r.keywords for s, r in runners.items()} == {  # type: ignore[attr-defined]
        "flintlock-checkpoints-1s": {"checkpoint_ms": 1000},
        "flintlock-checkpoints-10s": {"checkpoint_ms": 10_000}}
    with pytest.raises(SystemExit):  # the flights workload has no checkpointed variant
        main(["--systems", "flintlock-checkpoints-1s", "--workloads", "flights"])
