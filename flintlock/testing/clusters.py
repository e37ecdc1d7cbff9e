"""MiniCluster test harness (dask ``gen_cluster`` style).

::

    @gen_mini_cluster(task_managers=2, slots_per_task_manager=2, config={"slot.request.timeout": "2 s"})
    async def test_something(cluster: MiniCluster) -> None:
        result = await cluster.execute(job_graph, timeout_s=20)

The decorated test runs on a fresh event loop with a hard timeout. Control-plane tests get a
``NoSpark`` service (any use of Spark fails loudly); pass ``spark=<SparkSessionProvider>`` to run
real operator chains. ``fault_injection=True`` connects the components through a
``FaultInjectingRpcService`` (``cluster.rpc_service``), whose rules are removed before teardown.
Teardown closes the cluster and checks that no ``Task-*`` thread is left.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from flintlock.config import Configuration
from flintlock.config.options import RPC_ASK_TIMEOUT
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rpc.fault_injection import FaultInjectingRpcService
from flintlock.runtime.rpc.service import InProcRpcService

__all__ = ["NoSpark", "gen_mini_cluster", "leaked_task_threads", "run_bounded"]

log = logging.getLogger(__name__)


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


#: how long the tasks left after an interrupted test may take to finish their cancellation
CLEANUP_TIMEOUT_S = 15.0


def run_bounded(main: Coroutine[Any, Any, None], cleanup_timeout_s: float = CLEANUP_TIMEOUT_S) -> None:
    """``asyncio.run(main)``, except that after an interruption (``pytest-timeout`` raising in
    the loop, a KeyboardInterrupt) the cancelled tasks get ``cleanup_timeout_s`` seconds to end
    instead of forever, so one stuck test cannot hang the whole run."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    completed = False
    try:
        loop.run_until_complete(main)
        completed = True
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                _, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=cleanup_timeout_s))
                for task in stuck:  # reported here instead of "destroyed but pending" at exit
                    log.warning("task %r did not end within %g s of its cancellation",
                                task.get_coro(), cleanup_timeout_s)
                    task._log_destroy_pending = False  # type: ignore[attr-defined]
            loop.run_until_complete(loop.shutdown_asyncgens())
            if completed:
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def gen_mini_cluster(
    task_managers: int = 2,
    slots_per_task_manager: int = 2,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
    spark: Any = None,
    shuffle_dir: str | None = None,
    fault_injection: bool = False,
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
                configuration = Configuration(dict(config or {}))
                faulty = None
                if fault_injection:
                    ask_timeout = configuration.get(RPC_ASK_TIMEOUT)
                    faulty = FaultInjectingRpcService(InProcRpcService(ask_timeout), ask_timeout)
                cluster = MiniCluster(
                    configuration,
                    num_task_managers=task_managers,
                    slots_per_task_manager=slots_per_task_manager,
                    services=services,
                    rpc_service=faulty,
                )
                await cluster.start()
                try:
                    await asyncio.wait_for(fn(cluster, *args, **kwargs), timeout)
                finally:
                    if faulty is not None:
                        faulty.heal()  # let the components say goodbye to each other
                    await cluster.close()

            run_bounded(body())
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
