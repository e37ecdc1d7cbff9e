"""MiniCluster test harness (dask ``gen_cluster`` style).

::

    @gen_mini_cluster(task_managers=2, slots_per_task_manager=2, config={"slot.request.timeout": "2 s"})
    async def test_something(cluster: MiniCluster) -> None:
        result = await cluster.execute(job_graph, timeout_s=20)

The decorated test runs on a fresh event loop with a hard timeout. Control-plane tests get a
``NoSpark`` service (any use of Spark fails loudly); pass ``spark=<SparkSessionProvider>`` to run
real operator chains. Teardown closes the cluster and checks that no ``Task-*`` thread is left.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from flintlock.config import Configuration
from flintlock.runtime.minicluster import MiniCluster

__all__ = ["NoSpark", "gen_mini_cluster", "leaked_task_threads"]


class NoSpark:
    """A Spark service for control-plane tests: using it is a test bug."""

    def get(self) -> Any:
        raise AssertionError("this control-plane test must not use Spark")

    def describe(self) -> dict[str, str]:
        return {"master": "none"}

    def stop(self) -> None:
        pass


def leaked_task_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("Task-") and t.is_alive()]


def gen_mini_cluster(
    task_managers: int = 2,
    slots_per_task_manager: int = 2,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
    spark: Any = None,
    shuffle_dir: str | None = None,
) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., None]]:
    """Wrap ``async def test(cluster, **fixtures)`` to run against a fresh MiniCluster."""

    def decorator(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
        params = list(inspect.signature(fn).parameters.values())[1:]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            async def body() -> None:
                services: dict[str, Any] = {"spark": spark if spark is not None else NoSpark()}
                if shuffle_dir is not None:
                    services["shuffle_dir"] = shuffle_dir
                cluster = MiniCluster(
                    Configuration(dict(config or {})),
                    num_task_managers=task_managers,
                    slots_per_task_manager=slots_per_task_manager,
                    services=services,
                )
                await cluster.start()
                try:
                    await asyncio.wait_for(fn(cluster, *args, **kwargs), timeout)
                finally:
                    await cluster.close()

            asyncio.run(body())
            leaked: list[str] = []
            deadline = threading.Event()
            for _ in range(200):  # threads end right after their final report; allow them to exit
                leaked = leaked_task_threads()
                if not leaked:
                    break
                deadline.wait(0.01)
            assert not leaked, f"Task threads left running after the cluster closed: {leaked}"

        wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return wrapper

    return decorator
