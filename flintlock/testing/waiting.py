"""Wait for a condition with a deadline, failing with what was seen (dask ``async_poll_for``).

Tests never ``sleep()`` to wait for something to happen; they poll a predicate::

    await wait_until(lambda: te.number_of_running_tasks == 0,
                     describe=lambda: f"tasks: {te.debug_state()}")
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["wait_until", "wait_until_async", "wait_until_sync"]


def _failure(timeout_s: float, predicate: Callable[[], Any],
             describe: Callable[[], Any] | None) -> AssertionError:
    name = getattr(predicate, "__name__", repr(predicate))
    seen = ""
    if describe is not None:
        try:
            seen = f"; seen: {describe()}"
        except Exception as exc:  # describing must not hide the timeout
            seen = f"; describe() failed: {exc!r}"
    return AssertionError(f"condition {name} not met within {timeout_s:.2f} s{seen}")


async def wait_until(
    predicate: Callable[[], Any],
    timeout_s: float = 10.0,
    interval_s: float = 0.01,
    describe: Callable[[], Any] | None = None,
) -> Any:
    """Poll ``predicate()`` on the running loop until it is truthy; returns its value.

    Raises:
        AssertionError: not truthy within ``timeout_s``; the message includes ``describe()``.
    """
    @functools.wraps(predicate)  # failures name the caller's predicate
    async def check() -> Any:
        return predicate()

    return await wait_until_async(check, timeout_s, interval_s, describe)


async def wait_until_async(
    predicate: Callable[[], Awaitable[Any]],
    timeout_s: float = 10.0,
    interval_s: float = 0.05,
    describe: Callable[[], Any] | None = None,
) -> Any:
    """``wait_until`` for an async predicate (e.g. one that asks a gateway); returns its value.

    Raises:
        AssertionError: not truthy within ``timeout_s``; the message includes ``describe()``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() >= deadline:
            raise _failure(timeout_s, predicate, describe)
        await asyncio.sleep(interval_s)


def wait_until_sync(
    predicate: Callable[[], Any],
    timeout_s: float = 10.0,
    interval_s: float = 0.01,
    describe: Callable[[], Any] | None = None,
) -> Any:
    """``wait_until`` for code without an event loop (e.g. watching threads)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _failure(timeout_s, predicate, describe)
        time.sleep(interval_s)
