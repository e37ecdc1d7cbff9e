"""Event-loop health: how late this process's asyncio loop runs what is due (loop lag).

Heartbeats and RPC of every flintlock process run on one asyncio loop, so anything slow on that
loop (a synchronous call, a GIL-holding thread, a starved CPU) delays heartbeats and can make a
healthy peer look lost. dask's ``Event loop was unresponsive in Worker for X s`` warning is the
model; Flink has no equivalent because its RPC runs on dedicated actor threads.

- ``LoopLagStats``: the pure core. Samples ``(t_s, lag_s)`` in a sliding window; answers max, p99
  and mean lag (ms) over the window. No clock, no threads.
- ``LoopLagMonitor``: the shell. An asyncio task sleeps ``metrics.event-loop.tick-interval``
  (50 ms) and records by how much each wake-up was late; a watchdog thread notices a loop that
  has not ticked for ``metrics.event-loop.warn-threshold`` (1 s), logs a WARNING with the loop
  thread's stack (and the other threads' current frames when the loop thread is merely waiting,
  i.e. starved of the GIL or the CPU), and the tick that ends the episode logs its length.
- ``loop_lag_metric_values()``: ``Status.Python.EventLoop.*`` metric name -> value for the worst
  monitored loop of this process (a MiniCluster and the tests may run more than one loop).

Metrics (gauges): ``Status.Python.EventLoop.LagMaxMs`` and ``LagP99Ms`` and ``LagMeanMs`` over
the last ``window_s`` (60 s), and ``Status.Python.EventLoop.Unresponsive`` (episodes over the
warn threshold since the process started).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
import math
import sys
import threading
import time
import traceback
import weakref
from dataclasses import dataclass

__all__ = [
    "LagSummary",
    "LoopLagMonitor",
    "LoopLagStats",
    "loop_lag_metric_values",
    "loop_lag_summary",
]

log = logging.getLogger(__name__)

#: default tick interval (s) and warn threshold (s); configured by ``metrics.event-loop.*``
DEFAULT_TICK_S = 0.05
DEFAULT_WARN_S = 1.0
#: the sliding window of the lag statistics (s)
DEFAULT_WINDOW_S = 60.0


@dataclass(frozen=True)
class LagSummary:
    """Lag over the window, in ms; ``samples`` = ticks in the window; ``unresponsive`` = episodes."""

    max_ms: float = 0.0
    p99_ms: float = 0.0
    mean_ms: float = 0.0
    samples: int = 0
    unresponsive: int = 0


class LoopLagStats:
    """Sliding-window lag samples (pure: the caller passes the time).

    Args:
        window_s: samples older than this (seconds before the newest) are dropped.
        max_samples: hard bound on the stored samples (memory stays bounded at any tick rate).
    """

    def __init__(self, window_s: float = DEFAULT_WINDOW_S, max_samples: int = 4096) -> None:
        if window_s <= 0:
            raise ValueError(f"window must be positive, got {window_s}")
        self.window_s = window_s
        self._samples: collections.deque[tuple[float, float]] = collections.deque(maxlen=max_samples)
        self.unresponsive = 0

    def record(self, now_s: float, lag_s: float) -> None:
        """One tick at ``now_s`` that ran ``lag_s`` late (negative lags count as 0)."""
        self._samples.append((now_s, max(0.0, lag_s)))
        cutoff = now_s - self.window_s
        while self._samples and self._samples[0][0] < cutoff:
            self._samples.popleft()

    def record_unresponsive(self) -> None:
        self.unresponsive += 1

    def summary(self) -> LagSummary:
        """Max, p99 (nearest rank) and mean lag in ms over the window."""
        lags = sorted(lag for _, lag in list(self._samples))
        if not lags:
            return LagSummary(unresponsive=self.unresponsive)
        rank = max(0, math.ceil(0.99 * len(lags)) - 1)
        return LagSummary(
            max_ms=lags[-1] * 1000.0,
            p99_ms=lags[rank] * 1000.0,
            mean_ms=sum(lags) / len(lags) * 1000.0,
            samples=len(lags),
            unresponsive=self.unresponsive,
        )

    def fraction_over(self, threshold_s: float) -> float:
        """Share of the window's ticks that were later than ``threshold_s``."""
        lags = sorted(lag for _, lag in list(self._samples))
        if not lags:
            return 0.0
        return (len(lags) - bisect.bisect_right(lags, threshold_s)) / len(lags)


_monitors: weakref.WeakSet[LoopLagMonitor] = weakref.WeakSet()
_monitors_lock = threading.Lock()


def loop_lag_summary() -> LagSummary:
    """The worst (highest p99) running monitor's summary in this process; zeros without one."""
    with _monitors_lock:
        monitors = [m for m in _monitors if m.running]
    summaries = [m.summary() for m in monitors]
    if not summaries:
        return LagSummary()
    worst = max(summaries, key=lambda s: (s.p99_ms, s.max_ms))
    return LagSummary(worst.max_ms, worst.p99_ms, worst.mean_ms, worst.samples,
                      sum(s.unresponsive for s in summaries))


def loop_lag_metric_values(summary: LagSummary) -> dict[str, float]:
    """``Status.Python.EventLoop.*`` metric name -> value (ms, or a count)."""
    return {
        "Status.Python.EventLoop.LagMaxMs": round(summary.max_ms, 3),
        "Status.Python.EventLoop.LagP99Ms": round(summary.p99_ms, 3),
        "Status.Python.EventLoop.LagMeanMs": round(summary.mean_ms, 3),
        "Status.Python.EventLoop.Unresponsive": float(summary.unresponsive),
    }


def _format_stack(frame: object) -> str:
    return "".join(traceback.format_stack(frame)).rstrip()  # type: ignore[arg-type]


def _waiting(frame: object) -> bool:
    """Whether a loop thread's frame is the loop waiting for I/O (so the loop is starved, not busy)."""
    code = getattr(frame, "f_code", None)
    return code is not None and code.co_name in ("select", "poll", "_run_once") \
        and "selectors" in code.co_filename


class LoopLagMonitor:
    """Measures the lag of the running loop; start it from a coroutine on that loop.

    Args:
        name: the process or component named in log lines (``"JobManager"``, ``"TaskManager
            127.0.0.1:41023-6f1c"``).
        tick_s: how often the loop is probed (s).
        warn_s: a loop that did not tick for this long is reported as unresponsive (s).
        window_s: the statistics window (s).
    """

    def __init__(self, name: str, tick_s: float = DEFAULT_TICK_S, warn_s: float = DEFAULT_WARN_S,
                 window_s: float = DEFAULT_WINDOW_S) -> None:
        if tick_s <= 0 or warn_s <= 0:
            raise ValueError(f"tick interval and warn threshold must be positive: {tick_s}, {warn_s}")
        self.name = name
        self.tick_s = tick_s
        self.warn_s = warn_s
        self._stats = LoopLagStats(window_s)
        self._lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None
        self._watchdog: threading.Thread | None = None
        self._stopped = threading.Event()
        self._last_tick = time.monotonic()
        self._loop_thread_id: int | None = None
        self._episode_reported = False

    @classmethod
    def from_configuration(cls, name: str, configuration: object) -> LoopLagMonitor:
        from flintlock.config.options import LOOP_LAG_TICK, LOOP_LAG_WARN

        get = configuration.get  # type: ignore[attr-defined]
        return cls(name, tick_s=get(LOOP_LAG_TICK), warn_s=get(LOOP_LAG_WARN))

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def summary(self) -> LagSummary:
        with self._lock:
            return self._stats.summary()

    def start(self) -> LoopLagMonitor:
        """Start ticking on the running loop and the watchdog thread (idempotent)."""
        if self.running:
            return self
        self._stopped.clear()
        self._loop_thread_id = threading.get_ident()
        self._last_tick = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._tick_forever(),
                                                              name=f"loop-lag-{self.name}")
        self._watchdog = threading.Thread(target=self._watch, name=f"loop-watchdog-{self.name}",
                                          daemon=True)
        self._watchdog.start()
        with _monitors_lock:
            _monitors.add(self)
        return self

    async def stop(self) -> None:
        self._stopped.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            # it wakes on ``_stopped`` at once; joined here, not in an executor thread, because
            # ``stop`` also runs at interpreter exit, when executors take no new work
            watchdog.join(1.0)
        with _monitors_lock:
            _monitors.discard(self)

    async def _tick_forever(self) -> None:
        loop = asyncio.get_running_loop()
        expected = loop.time() + self.tick_s
        while True:
            await asyncio.sleep(self.tick_s)
            now = loop.time()
            lag = max(0.0, now - expected)
            mono = time.monotonic()
            stalled = mono - self._last_tick
            with self._lock:
                self._stats.record(now, lag)
                self._last_tick = mono
                reported, self._episode_reported = self._episode_reported, False
            if lag >= self.warn_s or reported:
                with self._lock:
                    self._stats.record_unresponsive()
                log.warning(
                    "Event loop was unresponsive in %s for %.2f s. Heartbeats and RPC of this "
                    "process waited that long; this is caused by long-running, GIL-holding or "
                    "synchronous work on the loop's thread or by an overloaded CPU.",
                    self.name, max(lag, stalled - self.tick_s))
            expected = now + self.tick_s

    def _watch(self) -> None:
        while not self._stopped.wait(min(self.warn_s / 2, 0.5)):
            with self._lock:
                stalled = time.monotonic() - self._last_tick
                report = stalled >= self.warn_s and not self._episode_reported
                if report:
                    self._episode_reported = True
            if report:
                log.warning("Event loop in %s has not run for %.2f s; %s", self.name, stalled,
                            self._describe_threads())

    def _describe_threads(self) -> str:
        frames = sys._current_frames()
        loop_frame = frames.get(self._loop_thread_id or -1)
        if loop_frame is None:
            return "its thread is gone"
        if not _waiting(loop_frame):
            return "its thread is busy in:\n" + _format_stack(loop_frame)
        names = {t.ident: t.name for t in threading.enumerate()}
        busy = []
        for ident, frame in frames.items():
            if ident in (self._loop_thread_id, threading.get_ident()):
                continue
            top = traceback.extract_stack(frame, limit=1)
            where = f"{top[-1].filename}:{top[-1].lineno} {top[-1].name}" if top else "?"
            busy.append(f"  {names.get(ident, ident)}: {where}")
        return ("its thread is waiting for I/O, so it is starved of the GIL or the CPU; "
                "other threads are at:\n" + "\n".join(sorted(busy)))
