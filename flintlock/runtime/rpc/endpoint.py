"""RpcEndpoint: a component whose state changes only on its own serial mailbox.

Flink's main-thread model (``runtime/rpc/RpcEndpoint``) on asyncio: every RPC handler, timer and
callback of an endpoint runs as one mailbox item at a time, so endpoint state needs no locks.

Rules for subclasses:
- RPC handlers are the ``async def`` methods named in the endpoint's ``*Gateway`` Protocol.
- A handler never awaits a call to another endpoint (two endpoints awaiting each other would
  deadlock). It starts the call with ``run_async(awaitable, on_done)``; ``on_done(result, error)``
  runs later in the mailbox.
- Timers use ``schedule(delay_s, fn)``; ``fn`` runs in the mailbox, time comes from the clock.
- Task threads post into the mailbox with ``post_from_thread(fn, *args)``.
- A handler whose answer comes later (Flink's gateway methods that return a
  ``CompletableFuture``, e.g. ``Dispatcher.requestJobResult``) returns ``Deferred(later)``: the
  mailbox goes on, and the caller gets what ``later()`` returns; ``later`` runs outside the
  mailbox, so it reads endpoint state through ``run_in_mailbox``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from flintlock.runtime.clock import Clock, SystemClock, TimerHandle
from flintlock.runtime.rpc.exceptions import EndpointNotStartedError, FencingTokenMismatch

__all__ = ["DEFAULT_LEADER_ID", "Deferred", "FencedRpcEndpoint", "RpcEndpoint",
           "current_endpoint_id"]

log = logging.getLogger(__name__)

#: the fencing token of a leader without high availability (Flink's
#: ``HighAvailabilityServices.DEFAULT_LEADER_ID``, ``UUID(0, 0)``)
DEFAULT_LEADER_ID = "00000000000000000000000000000000"

_STOP = object()


class Deferred:
    """An RPC handler's answer that completes after the handler returned (see the module
    docstring): ``dispatch`` awaits ``later()`` outside the mailbox. A handler called directly,
    not through a gateway, returns this object; ``await deferred.later()`` gives the answer."""

    __slots__ = ("later",)

    def __init__(self, later: Callable[[], Awaitable[Any]]) -> None:
        self.later = later


#: the endpoint whose mailbox runs the current code (inherited by its ``run_async`` work)
_CURRENT_ENDPOINT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "flintlock_current_endpoint", default=None
)


def current_endpoint_id() -> str | None:
    """The id of the endpoint whose mailbox, or background work started from it, runs this code.

    ``None`` outside any endpoint. Lets an RPC transport name the caller of a call (used by the
    fault-injecting transport to drop or delay calls between named endpoints).
    """
    return _CURRENT_ENDPOINT.get()


class RpcEndpoint:
    """Base class of Dispatcher, ResourceManager, JobMaster and TaskExecutor.

    Args:
        endpoint_id: unique name within its RpcService (e.g. ``"resourcemanager"``).
        clock: time source for timers (``ManualClock`` in tests).
    """

    def __init__(self, endpoint_id: str, clock: Clock | None = None) -> None:
        self.endpoint_id = endpoint_id
        self.clock: Clock = clock or SystemClock()
        self.address: str = ""
        self._ep_mailbox: asyncio.Queue[Any] | None = None
        self._ep_loop: asyncio.AbstractEventLoop | None = None
        self._ep_runner: asyncio.Task[None] | None = None
        self._ep_background: set[asyncio.Task[Any]] = set()
        self._ep_timers: set[TimerHandle] = set()
        self._ep_running = False
        self._ep_in_mailbox = False

    # ---- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the mailbox, then run ``on_start`` in it. Must be called on the process loop."""
        if self._ep_running:
            return
        self._ep_loop = asyncio.get_running_loop()
        self._ep_mailbox = asyncio.Queue()
        self._ep_running = True
        self._ep_runner = self._ep_loop.create_task(self._run_mailbox(), name=f"mailbox-{self.endpoint_id}")
        await self.run_in_mailbox(self.on_start)

    async def stop(self) -> None:
        """Run ``on_stop`` in the mailbox, cancel background work and timers, end the mailbox."""
        if not self._ep_running:
            return
        try:
            await self.run_in_mailbox(self.on_stop)
        finally:
            self._ep_running = False
            for timer in list(self._ep_timers):
                timer.cancel()
            self._ep_timers.clear()
            for task in list(self._ep_background):
                task.cancel()
            if self._ep_background:
                await asyncio.wait(list(self._ep_background), timeout=5.0)
            assert self._ep_mailbox is not None
            self._ep_mailbox.put_nowait(_STOP)
            if self._ep_runner is not None:
                await asyncio.wait([self._ep_runner], timeout=5.0)

    async def on_start(self) -> None:
        """Hook: runs in the mailbox once the endpoint started."""

    async def on_stop(self) -> None:
        """Hook: runs in the mailbox before the endpoint stops."""

    @property
    def is_running(self) -> bool:
        return self._ep_running

    # ---- mailbox -------------------------------------------------------------------------------

    async def _run_mailbox(self) -> None:
        assert self._ep_mailbox is not None
        _CURRENT_ENDPOINT.set(self.endpoint_id)  # this task's own context copy
        while True:
            item = await self._ep_mailbox.get()
            if item is _STOP:
                return
            fn, args, future = item
            self._ep_in_mailbox = True
            try:
                result = fn(*args)
                if inspect.isawaitable(result):
                    result = await result
            except BaseException as exc:
                if future is not None and not future.done():
                    future.set_exception(exc)
                elif future is None:
                    log.exception("%s: error in mailbox callback %r", self.endpoint_id, fn)
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
            else:
                if future is not None and not future.done():
                    future.set_result(result)
            finally:
                self._ep_in_mailbox = False

    def run_in_mailbox(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Queue ``fn(*args)`` (sync or async) on the mailbox; the future holds its result.

        Raises:
            EndpointNotStartedError: the endpoint is not running.
        """
        if not self._ep_running or self._ep_mailbox is None or self._ep_loop is None:
            raise EndpointNotStartedError(f"endpoint {self.endpoint_id} is not running")
        future: asyncio.Future[Any] = self._ep_loop.create_future()
        self._ep_mailbox.put_nowait((fn, args, future))
        return future

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)`` on the mailbox without waiting; errors are logged."""
        if not self._ep_running or self._ep_mailbox is None:
            log.debug("%s: dropped %r, endpoint not running", self.endpoint_id, fn)
            return
        self._ep_mailbox.put_nowait((fn, args, None))

    def post_from_thread(self, fn: Callable[..., Any], *args: Any) -> None:
        """Thread-safe ``post``: used by Task threads to report to their TaskExecutor."""
        loop = self._ep_loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self.post, fn, *args)
        except RuntimeError:  # loop closed meanwhile
            pass

    async def dispatch(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                       fencing_token: str | None = None) -> Any:
        """Run RPC handler ``method`` in the mailbox and return its result (used by transports).

        ``check_fencing`` runs first, in the mailbox.

        Raises:
            FencingTokenMismatch: the call's ``fencing_token`` is not one this endpoint accepts.
        """
        handler = getattr(self, method)

        def fenced() -> Any:
            self.check_fencing(method, args, kwargs, fencing_token)
            return handler(*args, **kwargs)

        result = await self.run_in_mailbox(fenced)
        if isinstance(result, Deferred):
            return await result.later()
        return result

    def deliver_oneway(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                       fencing_token: str | None = None) -> None:
        """Queue one-way RPC ``method``; a call that fails ``check_fencing`` is discarded
        (logged), as Flink's fenced endpoints discard stale leaders' messages."""
        if not self.is_running:
            return

        def fenced() -> Any:
            try:
                self.check_fencing(method, args, kwargs, fencing_token)
            except FencingTokenMismatch as exc:
                log.info("%s: discarded one-way %s: %s", self.endpoint_id, method, exc)
                return None
            return getattr(self, method)(*args, **kwargs)

        self.post(fenced)

    def check_fencing(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                      fencing_token: str | None) -> None:
        """Hook, in the mailbox before each RPC handler: raise ``FencingTokenMismatch`` to
        reject the call. Unfenced endpoints accept every call (``FencedRpcEndpoint``)."""

    # ---- asynchronous work and timers ------------------------------------------------------------

    def run_async(
        self,
        awaitable: Awaitable[Any],
        on_done: Callable[[Any, BaseException | None], Any] | None = None,
    ) -> asyncio.Task[Any]:
        """Run ``awaitable`` in the background; ``on_done(result, error)`` then runs in the mailbox.

        The task belongs to this endpoint and is cancelled when it stops.
        """
        assert self._ep_loop is not None, "endpoint not started"

        async def _wrapped() -> Any:
            try:
                result = await awaitable
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                if on_done is not None:
                    self.post(on_done, None, exc)
                else:
                    log.warning("%s: background call failed: %s", self.endpoint_id, exc)
                return None
            if on_done is not None:
                self.post(on_done, result, None)
            return result

        task = self._ep_loop.create_task(_wrapped())
        self._ep_background.add(task)
        task.add_done_callback(self._ep_background.discard)
        return task

    def schedule(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run ``fn(*args)`` in the mailbox after ``delay_s`` seconds of this endpoint's clock."""
        handle: TimerHandle | None = None

        def _fire() -> None:
            if handle is not None:
                self._ep_timers.discard(handle)
            self.post(fn, *args)

        handle = self.clock.call_later(delay_s, _fire)
        self._ep_timers.add(handle)
        return handle


class FencedRpcEndpoint(RpcEndpoint):
    """An endpoint that accepts a call only with its current fencing token.

    Flink's ``FencedRpcEndpoint``: the Dispatcher (DispatcherId), ResourceManager
    (ResourceManagerId) and JobMaster (JobMasterId) reject calls that carry another leader's
    token, or none, so a deposed leader's components (and gateways that still point at them) can
    change nothing. Callers connect with ``rpc.connect(address, Gateway, fencing_token=...)``.
    Methods named in ``UNFENCED_METHODS`` (read-only queries) are accepted without a token.

    Args:
        fencing_token: the token (hex id); ``None`` rejects every fenced call (not leading).
    """

    UNFENCED_METHODS: frozenset[str] = frozenset()

    def __init__(self, endpoint_id: str, clock: Clock | None = None,
                 fencing_token: str | None = None) -> None:
        super().__init__(endpoint_id, clock)
        self.fencing_token = fencing_token

    def check_fencing(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                      fencing_token: str | None) -> None:
        if method in self.UNFENCED_METHODS:
            return
        if self.fencing_token is not None and fencing_token == self.fencing_token:
            return
        raise FencingTokenMismatch(
            f"{type(self).__name__} {self.endpoint_id} rejected {method}: the call's fencing "
            f"token {fencing_token} is not the leader's {self.fencing_token} (a deposed or "
            f"stale leader's call)")
