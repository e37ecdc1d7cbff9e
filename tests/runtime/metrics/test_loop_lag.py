"""Event-loop lag: the pure statistics, the monitor on a real loop, and its metrics."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from flintlock.config import Configuration
from flintlock.runtime.metrics.loop_lag import (
    LagSummary,
    LoopLagMonitor,
    LoopLagStats,
    loop_lag_metric_values,
    loop_lag_summary,
)
from flintlock.runtime.metrics.process import process_metric_values, process_stats
from flintlock.testing.waiting import wait_until

# ---- pure core --------------------------------------------------------------------------------


def test_summary_gives_max_p99_and_mean_in_ms() -> None:
    stats = LoopLagStats(window_s=60.0)
    for i in range(99):
        stats.record(now_s=float(i) * 0.05, lag_s=0.001)
    stats.record(now_s=5.0, lag_s=0.5)
    summary = stats.summary()
    assert summary.samples == 100
    assert summary.max_ms == pytest.approx(500.0)
    assert summary.p99_ms == pytest.approx(1.0)  # nearest rank: the 99th of 100 sorted lags
    assert summary.mean_ms == pytest.approx((99 * 1.0 + 500.0) / 100)
    assert stats.fraction_over(0.2) == pytest.approx(0.01)


def test_samples_leave_the_window_and_negative_lags_count_as_zero() -> None:
    stats = LoopLagStats(window_s=10.0)
    stats.record(now_s=0.0, lag_s=3.0)
    stats.record(now_s=5.0, lag_s=-0.2)
    assert stats.summary().max_ms == pytest.approx(3000.0)
    stats.record(now_s=10.5, lag_s=0.002)  # the lag of t=0 is older than 10 s now
    summary = stats.summary()
    assert summary.samples == 2
    assert summary.max_ms == pytest.approx(2.0)
    assert LoopLagStats().summary() == LagSummary()


def test_memory_is_bounded_at_any_tick_rate() -> None:
    stats = LoopLagStats(window_s=60.0, max_samples=100)
    for i in range(1000):
        stats.record(now_s=i * 0.001, lag_s=0.0)
    assert stats.summary().samples == 100


def test_metric_names_follow_the_status_python_scheme() -> None:
    values = loop_lag_metric_values(LagSummary(12.5, 3.25, 1.0, 10, 2))
    assert values == {
        "Status.Python.EventLoop.LagMaxMs": 12.5,
        "Status.Python.EventLoop.LagP99Ms": 3.25,
        "Status.Python.EventLoop.LagMeanMs": 1.0,
        "Status.Python.EventLoop.Unresponsive": 2.0,
    }


def test_thresholds_come_from_the_configuration() -> None:
    conf = Configuration({"metrics.event-loop.tick-interval": "20 ms",
                          "metrics.event-loop.warn-threshold": "3 s"})
    monitor = LoopLagMonitor.from_configuration("JobManager", conf)
    assert (monitor.tick_s, monitor.warn_s) == (0.02, 3.0)
    with pytest.raises(ValueError, match="positive"):
        LoopLagMonitor("x", tick_s=0.0)


# ---- the monitor on a real loop ----------------------------------------------------------------


def test_a_blocked_loop_is_measured_and_logged_with_the_blocking_stack(
        caplog: pytest.LogCaptureFixture) -> None:
    def block_the_loop_synchronously() -> None:
        time.sleep(0.6)  # the kind of call that must never run on a loop

    async def body() -> LagSummary:
        monitor = LoopLagMonitor("TestProcess", tick_s=0.02, warn_s=0.3).start()
        try:
            await wait_until(lambda: monitor.summary().samples >= 3, timeout_s=5.0)
            block_the_loop_synchronously()
            await wait_until(lambda: monitor.summary().unresponsive >= 1, timeout_s=5.0,
                             describe=monitor.summary)
            # the process-wide metrics report the worst running monitor
            assert process_metric_values(process_stats())[
                "Status.Python.EventLoop.LagMaxMs"] >= 500.0
            return monitor.summary()
        finally:
            await monitor.stop()

    with caplog.at_level(logging.WARNING, logger="flintlock.runtime.metrics.loop_lag"):
        summary = asyncio.run(asyncio.wait_for(body(), 20))
    assert summary.max_ms >= 500.0, summary
    messages = [r.getMessage() for r in caplog.records]
    # the watchdog names what the loop's thread was doing while it was blocked
    assert any("has not run for" in m and "block_the_loop_synchronously" in m for m in messages), \
        messages
    assert any("Event loop was unresponsive in TestProcess" in m for m in messages), messages
    # a stopped monitor no longer counts (other tests' local clusters may still run theirs)
    assert loop_lag_summary().max_ms < summary.max_ms


def test_an_idle_loop_shows_small_lag_and_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> LagSummary:
        monitor = LoopLagMonitor("Idle", tick_s=0.01, warn_s=1.0).start()
        try:
            await wait_until(lambda: monitor.summary().samples >= 20, timeout_s=5.0)
            return monitor.summary()
        finally:
            await monitor.stop()

    with caplog.at_level(logging.WARNING, logger="flintlock.runtime.metrics.loop_lag"):
        summary = asyncio.run(asyncio.wait_for(body(), 20))
    assert summary.unresponsive == 0
    assert summary.p99_ms < 1000.0, summary
    assert not [r for r in caplog.records if "unresponsive" in r.getMessage()]
