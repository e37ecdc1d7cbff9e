"""The process's I/O thread pool and per-owner serial executors on it.

Blocking storage work (sink commits, checkpoint metadata, partition and temporary-file cleanup)
must not run on a process's asyncio loop: heartbeats and RPC share that loop. Flink gives every
ClusterEntrypoint one ``ioExecutor`` (a fixed pool of ``cluster.io-pool.size`` threads, default
4 x cores; ``ClusterEntrypoint#initializeServices``) and orders work where it must with a
``SequentialExecutor``-style wrapper. This module is the same:

- ``io_executor()``: the process-wide pool (``ThreadPoolExecutor``, threads named
  ``flintlock-io_N``), created on first use with ``cluster.io-pool.size`` threads.
- ``prestart_io_threads()``: start all of its threads now. Called from a worker thread at process
  start, because ``Thread.start()`` waits until the new thread runs, and on a busy host that wait
  (measured up to 0.5 s) would otherwise fall on the loop that submits the first work.
- ``SerialExecutor``: runs what is submitted to it one at a time, in submission order, on a
  shared executor (a JobMaster's sink commits after the checkpoint finalizations issued before
  them). ``shutdown()`` refuses new work; work already submitted still runs.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["SerialExecutor", "configure_io_pool", "io_executor", "prestart_io_threads"]

_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_size = 4 * (os.cpu_count() or 1)  # the pool's size once it exists


def configure_io_pool(size: int) -> None:
    """Set the pool's size (``cluster.io-pool.size``) before its first use; a pool that already
    exists keeps its size."""
    global _size
    if size < 1:
        raise ValueError(f"cluster.io-pool.size must be positive, got {size}")
    with _lock:
        if _pool is None:
            _size = size


def io_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process-wide I/O pool (created on first call)."""
    return _pool_and_size()[0]


def _pool_and_size() -> tuple[concurrent.futures.ThreadPoolExecutor, int]:
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(_size, thread_name_prefix="flintlock-io")
        return _pool, _size


def prestart_io_threads(timeout_s: float = 30.0) -> int:
    """Start every thread of the I/O pool now (blocking; call it off the loop) and return the
    pool's size. Each thread gets a task that waits until all have started, so none is idle when
    the next is due."""
    pool, size = _pool_and_size()
    barrier = threading.Barrier(size + 1)
    for _ in range(size):
        pool.submit(barrier.wait, timeout_s)
    try:
        barrier.wait(timeout_s)
    except threading.BrokenBarrierError:  # a busy pool: some threads ran other work meanwhile
        pass
    return size


class SerialExecutor:
    """One-at-a-time, in-order execution on ``executor`` (default: ``io_executor()``).

    ``submit(fn, *args)`` returns a ``concurrent.futures.Future``; it raises ``RuntimeError``
    after ``shutdown()`` (as ``ThreadPoolExecutor`` does). Only one of the shared pool's threads
    works for this executor at a time, and it returns to the pool when the queue is empty.
    """

    def __init__(self, executor: concurrent.futures.Executor | None = None) -> None:
        self._executor = executor
        self._lock = threading.Lock()
        self._queue: collections.deque[tuple[concurrent.futures.Future[Any],
                                             Callable[..., Any], tuple[Any, ...]]] = (
            collections.deque())
        self._draining = False
        self._shut_down = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._shut_down:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.append((future, fn, args))
            if self._draining:
                return future
            self._draining = True
        try:
            (self._executor or io_executor()).submit(self._drain)
        except RuntimeError:  # the shared pool shut down (interpreter exit)
            with self._lock:
                self._draining = False
            raise
        return future

    def shutdown(self) -> None:
        """Refuse new work; what was submitted still runs."""
        with self._lock:
            self._shut_down = True

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._draining = False
                    return
                future, fn, args = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to whoever waits for the future
                future.set_exception(exc)
            else:
                future.set_result(result)
