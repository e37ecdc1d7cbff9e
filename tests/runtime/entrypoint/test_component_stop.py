"""Layer 1: how a JobManager stops its components (``job_manager._stop_all``)."""

from __future__ import annotations

import asyncio

from flintlock.runtime.entrypoint.job_manager import _stop_all
from flintlock.runtime.rest.server import RestServer


class _Component:
    """Logs its stop; waits for ``waits_for`` before it stopped, sets ``sets`` when stopping."""

    def __init__(self, name: str, events: list[str], waits_for: asyncio.Event | None = None,
                 sets: asyncio.Event | None = None, alongside: bool = False) -> None:
        self.name, self._events, self._waits_for, self._sets = name, events, waits_for, sets
        if alongside:
            self.stops_alongside = True

    async def stop(self) -> None:
        self._events.append(f"{self.name} stopping")
        if self._sets is not None:
            self._sets.set()
        if self._waits_for is not None:
            await self._waits_for.wait()
        self._events.append(f"{self.name} stopped")


def test_rest_stops_alongside_the_others_which_stop_last_started_first():
    """The ResourceManager's stop can only end once REST is stopping, and REST's only once the
    RPC server (stopped last) is: with REST stopped after the others, this would hang."""

    async def scenario() -> tuple[list[str], list[object]]:
        events: list[str] = []
        rest_stopping, rpc_stopping = asyncio.Event(), asyncio.Event()
        started: list[object] = [
            _Component("rpc-server", events, sets=rpc_stopping),
            _Component("rm", events, waits_for=rest_stopping),
            _Component("dispatcher", events),
            _Component("rest", events, sets=rest_stopping, waits_for=rpc_stopping,
                       alongside=True),
        ]
        await asyncio.wait_for(_stop_all(started), 5)
        return events, started

    events, started = asyncio.run(scenario())
    assert started == []
    assert events == ["dispatcher stopping", "dispatcher stopped", "rm stopping", "rest stopping",
                      "rm stopped", "rpc-server stopping", "rpc-server stopped", "rest stopped"]


def test_the_rest_server_is_one_that_stops_alongside():
    assert RestServer.stops_alongside is True
