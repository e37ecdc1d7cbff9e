"""TaskManager metrics for REST, fetched at most once per update interval (Flink's
``MetricFetcherImpl`` with ``metrics.fetcher.update-interval``).

A TaskManager's metrics come over RPC from the TaskManager, which reads its process and its Spark
server (Py4J) for them; the web UI asks for them every few seconds per open page. Flink's REST
handlers read a ``MetricStore`` that its ``MetricFetcher`` refreshes at most every
``metrics.fetcher.update-interval`` (10 s), so the load on the cluster does not grow with the
number of browsers. ``TaskManagerMetricFetcher`` does the same per TaskManager:

- a snapshot younger than the interval is served as it is (it may be that old);
- requests that find none share one fetch in flight, whatever their number;
- a failed fetch is not kept: its waiters get the error, the next request asks again;
- snapshots of TaskManagers nobody asked about for ``FORGET_AFTER_INTERVALS`` intervals (at
  least ``FORGET_AFTER_MIN_S``) are dropped, so TaskManagers that left do not pile up.

An interval of 0 fetches on every request (Flink's 0 turns its fetcher off instead).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from flintlock.runtime.ids import ResourceID

__all__ = ["FORGET_AFTER_INTERVALS", "FORGET_AFTER_MIN_S", "TaskManagerMetricFetcher"]

#: a TaskManager's snapshot is dropped once this many intervals passed without a request for it
FORGET_AFTER_INTERVALS = 10
#: ... and at least this many seconds
FORGET_AFTER_MIN_S = 60.0


@dataclass
class _Entry:
    snapshot: Any = None
    fetched_at: float = 0.0  # clock seconds, when ``snapshot`` was fetched
    asked_at: float = 0.0  # clock seconds, the last request for this TaskManager
    pending: asyncio.Future[Any] | None = None


class TaskManagerMetricFetcher:
    """Serves TaskManager metric snapshots (``TaskManagerMetricsSnapshot``) no older than
    ``interval_s``.

    Args:
        fetch: asks a TaskManager for its snapshot (``DispatcherGateway
            .request_task_manager_metrics``); its errors reach the callers of ``get``.
        interval_s: ``metrics.fetcher.update-interval`` in seconds; 0 fetches every time.
        clock: monotonic seconds (tests pass a fake).

    Not thread-safe: one event loop uses it (the REST server's).
    """

    def __init__(self, fetch: Callable[[ResourceID], Awaitable[Any]], interval_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if interval_s < 0:
            raise ValueError(f"interval_s must be >= 0, got {interval_s}")
        self._fetch = fetch
        self._interval_s = interval_s
        self._clock = clock
        self._entries: dict[ResourceID, _Entry] = {}

    @property
    def cached(self) -> list[ResourceID]:
        """TaskManagers whose snapshot is kept."""
        return [rid for rid, e in self._entries.items() if e.snapshot is not None]

    async def get(self, resource_id: ResourceID) -> Any:
        """The TaskManager's snapshot, fetched now unless one younger than the interval is kept.

        Raises:
            whatever ``fetch`` raised for this request's fetch (unknown TaskManager, timeout).
        """
        now = self._clock()
        self._forget_idle(now)
        entry = self._entries.setdefault(resource_id, _Entry())
        entry.asked_at = now
        if (self._interval_s > 0 and entry.snapshot is not None
                and now - entry.fetched_at < self._interval_s):
            return entry.snapshot
        pending = entry.pending
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():
            pending = asyncio.ensure_future(self._fetch_into(resource_id, entry))
            # its error is retrieved even when every request waiting for it was cancelled
            pending.add_done_callback(lambda f: f.cancelled() or f.exception())
            entry.pending = pending
        return await asyncio.shield(pending)  # a cancelled request leaves the fetch to others

    async def _fetch_into(self, resource_id: ResourceID, entry: _Entry) -> Any:
        try:
            snapshot = await self._fetch(resource_id)
        finally:
            entry.pending = None
        entry.snapshot, entry.fetched_at = snapshot, self._clock()
        return snapshot

    def _forget_idle(self, now: float) -> None:
        idle_s = max(FORGET_AFTER_MIN_S, FORGET_AFTER_INTERVALS * self._interval_s)
        for rid in [rid for rid, e in self._entries.items()
                    if e.pending is None and now - e.asked_at > idle_s]:
            del self._entries[rid]
