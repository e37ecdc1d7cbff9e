"""The one boundary between synchronous code and the process's asyncio loop.

- ``LoopThread``: a daemon thread that owns an asyncio loop; synchronous callers (a user program's
  ``env.execute()``, the CLI) submit coroutines with ``run(coro, timeout_s)``. Used by the
  MiniCluster when it is driven from synchronous code.
- ``run_blocking(fn, *args)``: run a blocking call (file listing, SparkSession start, HA file I/O)
  in a worker thread from async code without blocking the loop (like starlette's
  ``run_in_threadpool``).

Storage work a JobManager orders or must not start threads for runs on the process's I/O pool
(``flintlock.runtime.io_executor``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "run_blocking"]

T = TypeVar("T")


async def run_blocking(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a worker thread and await its result."""
    return await asyncio.to_thread(fn, *args)


class LoopThread:
    """An asyncio loop running in its own daemon thread, named ``name``."""

    def __init__(self, name: str = "flintlock-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        try:
            self._loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result.

        Raises:
            TimeoutError: no result within ``timeout_s`` (the coroutine is cancelled).
            RuntimeError: called from the loop's own thread (would deadlock).
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run() called from its own loop thread")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            if future.done():  # the coroutine's own TimeoutError (the same class since 3.11)
                raise
            future.cancel()
            raise TimeoutError(f"no result within {timeout_s} s") from None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the loop (cancelling its remaining tasks) and join the thread."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()
