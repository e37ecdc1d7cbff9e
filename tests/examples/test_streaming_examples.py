"""The streaming examples on the local cluster, each checked against the batch computation.

- ``departures``: every replayed flight is counted once, in its hourly window or as late; the
  windows match DuckDB over the same flights (counts with the late flights added back; means
  exactly where no flight of the window was late).
- ``carrier_alerts``: the alerts equal DuckDB's 30-minute RANGE window count over the same flights.
- ``word_count``: files dropped into the watched directory while the job runs are counted; the
  sum over the windows equals a plain count of the dropped files' words.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from examples.flights import flights_path
from examples.streaming import carrier_alerts, departures
from examples.streaming import word_count as streaming_word_count
from examples.streaming.flight_replay import replay_table
from examples.word_count import WORD_SPLIT, text_path
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def streaming_env(env: Any) -> Any:
    from flintlock import RuntimeExecutionMode

    return env.set_runtime_mode(RuntimeExecutionMode.STREAMING)


def _ms(ts: Any) -> int:
    return int(ts.timestamp() * 1000) if ts.tzinfo else int(ts.replace(
        tzinfo=__import__("datetime").UTC).timestamp() * 1000)


def test_departures_per_hour_match_the_batch_computation(streaming_env: Any, data_dir: str,
                                                         tmp_path: Path) -> None:
    from flintlock.connectors import FileSink

    limit = 20_000
    hourly, late = departures.build(streaming_env, data_dir, rate=10_000, limit=limit)
    hourly.sink_to(FileSink.parquet(str(tmp_path / "hourly")))
    late.sink_to(FileSink.parquet(str(tmp_path / "late")))
    streaming_env.execute("departures")

    flights = replay_table(str(flights_path(data_dir) / "flights"), "actual", limit)  # DuckDB reads it
    reference = {(o, _ms(w)): (n, m) for o, w, n, m in
                 duckdb.execute(departures.REFERENCE_SQL).fetchall()}
    got = {(r["origin"], _ms(r["window_start"])): (r["departures"], r["mean_dep_delay"])
           for r in pq.read_table(tmp_path / "hourly").to_pylist()}
    late_rows = pq.read_table(tmp_path / "late").to_pylist() if (tmp_path / "late").exists() else []
    late_per_window = Counter((r["origin"], _ms(r["sched_dep"]) // 3_600_000 * 3_600_000)
                              for r in late_rows)
    assert sum(n for n, _ in got.values()) + len(late_rows) == flights.num_rows == limit
    for key, (n, mean) in reference.items():
        fired, fired_mean = got.get(key, (0, None))
        assert fired + late_per_window[key] == n, (key, fired, late_per_window[key], n)
        if not late_per_window[key]:
            assert fired_mean == pytest.approx(mean, rel=1e-12), key


def test_carrier_alerts_match_the_batch_computation(streaming_env: Any, data_dir: str) -> None:
    limit = 30_000
    alerts = carrier_alerts.build(streaming_env, data_dir, rate=30_000, limit=limit)
    rows = list(alerts.execute_and_collect())
    flights = replay_table(str(flights_path(data_dir) / "flights"), "scheduled", limit)  # noqa: F841
    expected = {(c, _ms(t), n) for c, t, n in duckdb.execute(carrier_alerts.REFERENCE_SQL).fetchall()}
    # flights at the same scheduled time reach the function one after the other: the last of
    # them sees what DuckDB's RANGE window counts for all of them
    most: dict[tuple[str, int], int] = {}
    for r in rows:
        key = (r.carrier, _ms(r.sched_dep))
        most[key] = max(most.get(key, 0), r.delayed_in_30_min)
    assert {(c, t, n) for (c, t), n in most.items()} == expected
    assert len(expected) > 50, len(expected)


def test_word_count_counts_files_dropped_while_the_job_runs(
        streaming_env: Any, data_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import datetime

    incoming = tmp_path / "incoming"
    incoming.mkdir()
    lines = next(iter(sorted(text_path(data_dir).glob("*.txt")))).read_text().splitlines()
    chunks = ["\n".join(lines[i * 200:(i + 1) * 200]) for i in range(3)]
    (incoming / "first.txt").write_text(chunks[0])
    counts = streaming_word_count.build(streaming_env, str(incoming),
                                        window=datetime.timedelta(seconds=1),
                                        watch_interval=datetime.timedelta(milliseconds=200))
    counts.print()
    client = streaming_env.execute_async("streaming word count")
    split = re.compile(WORD_SPLIT)
    expected = Counter(w for chunk in chunks for w in split.split(chunk.lower()) if w)
    row = re.compile(r"Row\(word=(['\"])(.*?)\1, window_start=.*?, count=(\d+)\)")
    seen: Counter[str] = Counter()

    def counted() -> Counter[str]:
        # two sink subtasks print concurrently: a line may hold two rows (print writes the row
        # and its newline separately)
        for m in row.finditer(capsys.readouterr().out):
            seen[m.group(2)] += int(m.group(3))
        return seen

    try:
        wait_until_sync(lambda: counted()["the"] > 0, 120, 0.05, lambda: dict(seen.most_common(3)))
        for i, chunk in enumerate(chunks[1:], 1):  # written hidden, then renamed into place
            (incoming / f".part{i}.txt").write_text(chunk)
            (incoming / f".part{i}.txt").rename(incoming / f"part{i}.txt")
        wait_until_sync(lambda: counted() == expected, 120, 0.05,
                        lambda: {w: (seen[w], expected[w]) for w in set(seen) | set(expected)
                                 if seen[w] != expected[w]})
        assert _status(client) is JobStatus.RUNNING
    finally:
        client.cancel()
        wait_until_sync(lambda: _status(client) is JobStatus.CANCELED, 30, 0.05,
                        lambda: _status(client))


def _status(client: Any) -> JobStatus:
    status = client.get_job_status()
    return status.result() if hasattr(status, "result") else status
