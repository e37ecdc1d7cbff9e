"""Leader election and retrieval callbacks (from the services' threads) turned into asyncio
events on a process's event loop: ``LeaderAddressWatcher`` for TaskManagers and clients,
``LeadershipEvents`` for a JobManager process contending for leadership."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from flintlock.runtime.highavailability.leader import LeaderInformation

__all__ = ["LeaderAddressWatcher", "LeadershipEvents", "unless_stopped"]

log = logging.getLogger(__name__)

T = TypeVar("T")


async def unless_stopped(awaitable: Awaitable[T], stop: asyncio.Event) -> T | None:
    """``awaitable``'s result, or None when ``stop`` is set first (it is then cancelled)."""
    task: asyncio.Future[Any] = asyncio.ensure_future(awaitable)
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not task.done():
        task.cancel()
        return None
    return task.result()


class LeaderAddressWatcher:
    """A ``LeaderRetrievalListener`` that follows one component (e.g. ``"resourcemanager"``)
    of the leader on ``loop``: ``address`` and ``session_id`` (None while no leader is known),
    ``wait_for_address()``, and ``on_change(callback(address, session_id))`` callbacks run on
    the loop whenever the leadership changes (a new session, even at the same address)."""

    def __init__(self, component: str, loop: asyncio.AbstractEventLoop) -> None:
        self.component = component
        self.address: str | None = None
        self.session_id: str | None = None
        self._loop = loop
        self._known = asyncio.Event()
        self._callbacks: list[Callable[[str | None, str | None], None]] = []

    def notify_leader_address(self, leader: LeaderInformation | None) -> None:
        address = None if leader is None else leader.addresses.get(self.component)
        session = None if leader is None or address is None else leader.session_id
        try:
            self._loop.call_soon_threadsafe(self._set, address, session)
        except RuntimeError:  # the loop closed: the process is stopping
            pass

    def handle_error(self, error: BaseException) -> None:
        log.error("leader retrieval failed: %s", error)

    def _set(self, address: str | None, session: str | None) -> None:
        if (address, session) == (self.address, self.session_id):
            return
        self.address, self.session_id = address, session
        log.info("leader %s: %s", self.component, address or "(none known)")
        if address is None:
            self._known.clear()
        else:
            self._known.set()
        for callback in list(self._callbacks):
            callback(address, session)

    def on_change(self, callback: Callable[[str | None, str | None], None]) -> None:
        self._callbacks.append(callback)

    async def wait_for_address(self) -> str:
        while self.address is None:
            await self._known.wait()
        return self.address


class LeadershipEvents:
    """A ``LeaderContender`` whose grant, revocation and errors become asyncio events on
    ``loop``: ``granted`` (the session id, once), ``lost`` (set on revocation or error)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.granted: asyncio.Future[str] = loop.create_future()
        self.lost = asyncio.Event()
        self.why_lost = ""

    def grant_leadership(self, session_id: str) -> None:
        self._loop.call_soon_threadsafe(self._grant, session_id)

    def _grant(self, session_id: str) -> None:
        if not self.granted.done():
            self.granted.set_result(session_id)

    def revoke_leadership(self) -> None:
        self._loop.call_soon_threadsafe(self._lose, "leadership was revoked")

    def handle_error(self, error: BaseException) -> None:
        self._loop.call_soon_threadsafe(self._lose, f"leader election failed: {error}")

    def _lose(self, why: str) -> None:
        self.why_lost = why
        self.lost.set()
