"""Injected time: ``Clock`` for components, ``ManualClock`` for tests that must not sleep.

Components never read the wall clock or call ``asyncio.sleep`` to wait for time-based logic
(heartbeat timeouts, restart back-off, slot timeouts); they ask their clock. ``SystemClock`` uses the
running asyncio loop; ``ManualClock.advance(seconds)`` fires due timers synchronously.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "TimerHandle"]


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic seconds for durations, epoch milliseconds for timestamps, and timers."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes back."""
        ...

    def now_ms(self) -> int:
        """Wall-clock epoch milliseconds (for timestamps shown to users)."""
        ...

    def call_later(self, delay_s: float, callback: Callable[[], Any]) -> TimerHandle:
        """Run ``callback`` (on the caller's loop) after ``delay_s`` seconds."""
        ...


class SystemClock:
    """The real clock; timers run on the running asyncio loop."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_s: float, callback: Callable[[], Any]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay_s), callback)


class _ManualTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when a test calls ``advance``; due callbacks run in order."""

    def __init__(self, start_s: float = 0.0, start_epoch_ms: int = 1_700_000_000_000) -> None:
        self._now = start_s
        self._epoch0 = start_epoch_ms - int(start_s * 1000)
        self._timers: list[tuple[float, int, _ManualTimer, Callable[[], Any]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def now_ms(self) -> int:
        return self._epoch0 + int(self._now * 1000)

    def call_later(self, delay_s: float, callback: Callable[[], Any]) -> TimerHandle:
        timer = _ManualTimer()
        heapq.heappush(self._timers, (self._now + max(0.0, delay_s), next(self._seq), timer, callback))
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward, running every timer that falls due, in due order."""
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            due, _, timer, callback = heapq.heappop(self._timers)
            self._now = max(self._now, due)
            if not timer.cancelled:
                callback()
        self._now = target

    def pending_timers(self) -> int:
        return sum(1 for t in self._timers if not t[2].cancelled)
