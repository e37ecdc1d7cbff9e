"""``TaskManagerMetricFetcher``: at most one fetch per TaskManager per update interval (Flink's
``MetricFetcherImpl``), shared by concurrent requests; errors are not kept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.rest.metric_fetcher import FORGET_AFTER_MIN_S, TaskManagerMetricFetcher

TM1, TM2 = ResourceID("tm-1"), ResourceID("tm-2")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _TaskManagers:
    """Answers ``fetch`` with ``(resource_id, n)``, n counting that TaskManager's fetches; a
    gate holds the answers back while closed; ``fail`` makes the next fetches raise."""

    def __init__(self) -> None:
        self.fetches: dict[ResourceID, int] = {}
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None

    async def fetch(self, resource_id: ResourceID) -> Any:
        self.fetches[resource_id] = self.fetches.get(resource_id, 0) + 1
        n = self.fetches[resource_id]
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return (resource_id, n)


async def _until(condition: Any, ticks: int = 100) -> None:
    """Let the loop run until ``condition()`` holds (at most ``ticks`` turns; no timer waits)."""
    for _ in range(ticks):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"not reached within {ticks} turns of the loop")


def test_a_snapshot_is_served_until_it_is_one_interval_old() -> None:
    async def body() -> None:
        clock, tms = _Clock(), _TaskManagers()
        fetcher = TaskManagerMetricFetcher(tms.fetch, 10.0, clock)
        assert await fetcher.get(TM1) == (TM1, 1)
        clock.now += 9.9
        assert await fetcher.get(TM1) == (TM1, 1)  # younger than the interval: not asked again
        assert await fetcher.get(TM2) == (TM2, 1)  # per TaskManager
        clock.now += 0.1
        assert await fetcher.get(TM1) == (TM1, 2)
        assert tms.fetches == {TM1: 2, TM2: 1}

    asyncio.run(body())


def test_concurrent_requests_share_one_fetch_and_a_cancelled_one_does_not_cancel_it() -> None:
    async def body() -> None:
        tms = _TaskManagers()
        tms.gate.clear()
        fetcher = TaskManagerMetricFetcher(tms.fetch, 10.0, _Clock())
        first = asyncio.ensure_future(fetcher.get(TM1))
        await _until(lambda: tms.fetches == {TM1: 1})  # the first request's fetch is under way
        requests = [first, *(asyncio.ensure_future(fetcher.get(TM1)) for _ in range(19))]
        first.cancel()
        tms.gate.set()
        answers = await asyncio.gather(*requests[1:])
        assert answers == [(TM1, 1)] * 19
        assert tms.fetches == {TM1: 1}

    asyncio.run(body())


def test_an_error_reaches_the_waiting_requests_and_the_next_request_asks_again() -> None:
    async def body() -> None:
        tms = _TaskManagers()
        tms.fail = TimeoutError("TaskManager tm-1 did not answer")
        fetcher = TaskManagerMetricFetcher(tms.fetch, 10.0, _Clock())
        for _ in range(2):
            with pytest.raises(TimeoutError, match="did not answer"):
                await fetcher.get(TM1)
        assert tms.fetches == {TM1: 2}  # the failure was not kept
        tms.fail = None
        assert await fetcher.get(TM1) == (TM1, 3)

    asyncio.run(body())


def test_interval_zero_asks_on_every_request() -> None:
    async def body() -> None:
        tms = _TaskManagers()
        fetcher = TaskManagerMetricFetcher(tms.fetch, 0.0, _Clock())
        assert [await fetcher.get(TM1) for _ in range(3)] == [(TM1, 1), (TM1, 2), (TM1, 3)]

    asyncio.run(body())


def test_task_managers_nobody_asks_about_are_forgotten() -> None:
    async def body() -> None:
        clock, tms = _Clock(), _TaskManagers()
        fetcher = TaskManagerMetricFetcher(tms.fetch, 1.0, clock)
        await fetcher.get(TM1)
        await fetcher.get(TM2)
        clock.now += FORGET_AFTER_MIN_S - 1
        await fetcher.get(TM2)
        clock.now += 2  # TM1 was last asked for more than FORGET_AFTER_MIN_S ago, TM2 was not
        await fetcher.get(TM2)
        assert fetcher.cached == [TM2]

    asyncio.run(body())


def test_a_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s must be >= 0"):
        TaskManagerMetricFetcher(_TaskManagers().fetch, -1.0)
