"""``LiveMetricsReporter``: per-second rates over each report interval, and the accumulated
back-pressured and idle time a task reports with them (pure, no cluster)."""

from __future__ import annotations

from types import SimpleNamespace

from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobVertexID
from flintlock.runtime.metrics.live_task_metrics import LiveMetricsReporter

ATTEMPT = ExecutionAttemptID(ExecutionVertexID(JobVertexID("a" * 32), 0), 0, "n0nce")


def _stats(busy: float, back_pressured: float, idle: float, records_in: int) -> SimpleNamespace:
    return SimpleNamespace(busy_ms=busy, back_pressured_ms=back_pressured, idle_ms=idle,
                           records_in=records_in, records_out=records_in // 2,
                           bytes_in=records_in * 8, bytes_out=records_in * 4, epochs=3,
                           input_watermark=None, output_watermark=None)


def test_rates_cover_each_interval_and_accumulated_times_the_whole_run() -> None:
    reporter = LiveMetricsReporter()
    first = reporter.sample(ATTEMPT, _stats(600.0, 300.0, 100.0, 1000), 11_000, 10_000)
    assert (first.busy_ms_per_second, first.back_pressured_ms_per_second,
            first.idle_ms_per_second, first.records_in_per_second) == (600.0, 300.0, 100.0, 1000.0)
    assert (first.accumulated_back_pressured_ms, first.accumulated_idle_ms) == (300.0, 100.0)
    # the next 2 s: 200 ms more back pressure, 1,800 ms more idleness, 500 records
    second = reporter.sample(ATTEMPT, _stats(600.0, 500.0, 1900.0, 1500), 13_000, 10_000)
    assert (second.back_pressured_ms_per_second, second.idle_ms_per_second,
            second.records_in_per_second) == (100.0, 900.0, 250.0)
    assert (second.accumulated_back_pressured_ms, second.accumulated_idle_ms) == (500.0, 1900.0)
    reporter.retain(set())  # forgotten: the next report starts from the attempt's start again
    again = reporter.sample(ATTEMPT, _stats(600.0, 500.0, 1900.0, 1500), 14_000, 10_000)
    assert again.records_in_per_second == 375.0
