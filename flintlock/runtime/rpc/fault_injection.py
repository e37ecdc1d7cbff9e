"""FaultInjectingRpcService: drops, delays or fails RPCs between named endpoints (tests only).

Wraps any ``RpcService`` (``InProcRpcService`` in a MiniCluster, or a ``GrpcRpcService`` for the
calls its own process makes) and applies the first matching ``FaultRule`` to every call made
through a gateway it handed out, including ``connect`` itself. Rules can be added and removed at
any time; a gateway obtained earlier follows the rules in force when each call is made. This is
the "faulty" transport of ARCHITECTURE section 3 and serves the failure-recovery tests: partition
a TaskExecutor from the JobManager so heartbeats time out, delay a slot offer, refuse a deploy.

Endpoints are named by *endpoint id* (``"resourcemanager"``, ``"jobmaster-<job id>"``,
``"taskexecutor-<resource id>"``, the last path segment of an address) or by full address; rule
patterns are ``fnmatch`` globs matched against both. The *source* of a call is the endpoint whose
mailbox (or background work started from it) makes the call (``current_endpoint_id``); calls made
outside any endpoint (a test, the REST server) have no source and match only source ``"*"``.

Actions (``FaultAction``):

- ``DROP``: the message is lost. A ``@oneway`` call returns ``None`` and is never delivered; a
  request waits for its timeout (the per-call ``timeout=``, the ``connect`` timeout or the
  service's ``timeout_s``) and raises ``RpcTimeout``, as over a network that swallows packets.
- ``DELAY``: delivered ``delay_s`` seconds later (a request whose delay exceeds its timeout times
  out instead; a oneway call returns at once and is delivered in the background).
- ``FAIL``: refused at once with ``RecipientUnreachable`` (a closed port, a crashed peer).

Example::

    faulty = FaultInjectingRpcService(InProcRpcService(), timeout_s=2.0)
    rules = faulty.partition("taskexecutor-taskmanager-0-*")   # isolate one TaskExecutor
    ...
    faulty.remove(*rules)                                       # or faulty.heal()
"""

from __future__ import annotations

import asyncio
import enum
import fnmatch
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from flintlock.runtime.rpc.endpoint import RpcEndpoint, current_endpoint_id
from flintlock.runtime.rpc.exceptions import RecipientUnreachable, RpcTimeout
from flintlock.runtime.rpc.service import DEFAULT_TIMEOUT_S, GatewayProxy, RpcService

if TYPE_CHECKING:
    from typing_extensions import TypeForm  # gateway Protocols (see rpc.service)

__all__ = [
    "FaultAction",
    "FaultInjectingRpcService",
    "FaultRule",
    "InterceptedCall",
    "endpoint_name",
]

log = logging.getLogger(__name__)

G = TypeVar("G")

#: the pseudo method name under which ``connect`` calls are matched and recorded
CONNECT = "connect"


def endpoint_name(address: str) -> str:
    """The endpoint id of an address (``inproc://<id>``, ``grpc://host:port/<id>``)."""
    return address.rstrip("/").rsplit("/", 1)[-1]


class FaultAction(enum.Enum):
    """What happens to a call a rule matches."""

    DROP = "drop"
    DELAY = "delay"
    FAIL = "fail"


@dataclass(frozen=True)
class FaultRule:
    """``source -> target`` calls (optionally only ``methods``) get ``action``.

    Attributes:
        source: glob over the caller's endpoint id or address; ``"*"`` also matches callers
            outside any endpoint.
        target: glob over the target's endpoint id or address.
        action: DROP, DELAY or FAIL.
        delay_s: seconds of delay (DELAY only), >= 0.
        methods: gateway method names the rule applies to (``"connect"`` for connecting); None
            means every method.
        id: assigned by the service, for ``remove``.
    """

    source: str
    target: str
    action: FaultAction
    delay_s: float = 0.0
    methods: frozenset[str] | None = None
    id: int = 0

    def __post_init__(self) -> None:
        if not self.source or not self.target:
            raise ValueError("a fault rule needs a source and a target pattern ('*' for any)")
        if self.delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {self.delay_s}")
        if self.action is FaultAction.DELAY and self.delay_s == 0:
            raise ValueError("a DELAY rule needs delay_s > 0")

    def matches(self, source: str | None, target_address: str, method: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        if not _matches(self.target, target_address):
            return False
        if source is None:
            return self.source == "*"
        return _matches(self.source, source)


def _matches(pattern: str, name_or_address: str) -> bool:
    return fnmatch.fnmatchcase(name_or_address, pattern) or fnmatch.fnmatchcase(
        endpoint_name(name_or_address), pattern
    )


@dataclass(frozen=True)
class InterceptedCall:
    """A call a rule acted on (``source`` None: made outside any endpoint)."""

    source: str | None
    target: str
    method: str
    action: FaultAction
    rule_id: int


class FaultInjectingRpcService:
    """An ``RpcService`` that applies fault rules to the calls of the gateways it hands out.

    Args:
        inner: the real transport; endpoints are registered there.
        timeout_s: how long a dropped request waits before ``RpcTimeout`` when the call gives no
            timeout (use the inner service's timeout, ``rpc.ask-timeout``).
        history_size: how many intercepted calls ``intercepted`` keeps.

    Thread-safe rule changes: tests may add and remove rules from any thread.
    """

    def __init__(self, inner: RpcService, timeout_s: float = DEFAULT_TIMEOUT_S,
                 history_size: int = 10_000) -> None:
        self.inner = inner
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        #: replaced as a whole on every change, so calls read a consistent tuple without the lock
        self._rules: tuple[FaultRule, ...] = ()
        self._ids = itertools.count(1)
        self._intercepted: deque[InterceptedCall] = deque(maxlen=history_size)
        self._background: set[asyncio.Task[Any]] = set()

    # ---- RpcService --------------------------------------------------------------------------------

    def register(self, endpoint: RpcEndpoint) -> str:
        return self.inner.register(endpoint)

    def unregister(self, endpoint: RpcEndpoint) -> None:
        self.inner.unregister(endpoint)

    async def connect(self, address: str, gateway_type: TypeForm[G],
                      timeout_s: float | None = None, *, fencing_token: str | None = None) -> G:
        """A gateway to ``address`` whose calls pass the fault rules (``connect`` itself too).

        Raises:
            RecipientUnreachable: nothing runs there, or a FAIL rule matches.
            RpcTimeout: a DROP rule matches (after the timeout).
        """
        timeout = timeout_s or self.timeout_s
        rule = self._decide(current_endpoint_id(), address, CONNECT)
        if rule is not None:
            await self._apply_before_request(rule, address, f"connect to {address}", timeout)
        inner = await self.inner.connect(address, gateway_type, timeout_s,
                                         fencing_token=fencing_token)
        return cast(G, _FaultInjectingGateway(self, inner, address, gateway_type, timeout,
                                              fencing_token))

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # e.g. ``lookup`` of an InProcRpcService or ``port`` of a GrpcRpcService
        if name.startswith("_") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # ---- rules -------------------------------------------------------------------------------------

    @property
    def rules(self) -> tuple[FaultRule, ...]:
        return self._rules

    @property
    def intercepted(self) -> list[InterceptedCall]:
        """The calls rules acted on, oldest first (bounded by ``history_size``)."""
        with self._lock:
            return list(self._intercepted)

    def add_rule(self, source: str, target: str, action: FaultAction, *, delay_s: float = 0.0,
                 methods: Iterable[str] | None = None) -> FaultRule:
        """Add a rule (checked after the rules added before it); returns it for ``remove``.

        Raises:
            ValueError: empty patterns, a negative delay, or DELAY without a delay.
        """
        with self._lock:
            rule = FaultRule(source, target, action, delay_s,
                             frozenset(methods) if methods is not None else None, next(self._ids))
            self._rules = (*self._rules, rule)
        log.info("fault injection: %s %s -> %s%s", action.value, source, target,
                 f" ({', '.join(sorted(rule.methods))})" if rule.methods else "")
        return rule

    def drop(self, source: str = "*", target: str = "*",
             methods: Iterable[str] | None = None) -> FaultRule:
        """Lose the matching calls (requests time out)."""
        return self.add_rule(source, target, FaultAction.DROP, methods=methods)

    def delay(self, delay_s: float, source: str = "*", target: str = "*",
              methods: Iterable[str] | None = None) -> FaultRule:
        """Deliver the matching calls ``delay_s`` seconds late."""
        return self.add_rule(source, target, FaultAction.DELAY, delay_s=delay_s, methods=methods)

    def fail(self, source: str = "*", target: str = "*",
             methods: Iterable[str] | None = None) -> FaultRule:
        """Refuse the matching calls at once (``RecipientUnreachable``)."""
        return self.add_rule(source, target, FaultAction.FAIL, methods=methods)

    def partition(self, side_a: str, side_b: str = "*") -> tuple[FaultRule, FaultRule]:
        """A network partition: drop every call ``a -> b`` and ``b -> a``.

        ``partition("taskexecutor-x")`` isolates that endpoint from everyone.
        """
        return self.drop(side_a, side_b), self.drop(side_b, side_a)

    def remove(self, *rules: FaultRule) -> None:
        """Stop applying ``rules`` (unknown ones are ignored)."""
        ids = {r.id for r in rules}
        with self._lock:
            self._rules = tuple(r for r in self._rules if r.id not in ids)

    def heal(self) -> None:
        """Remove every rule."""
        with self._lock:
            self._rules = ()

    # ---- applying rules ------------------------------------------------------------------------------

    def _decide(self, source: str | None, target: str, method: str) -> FaultRule | None:
        for rule in self._rules:
            if rule.matches(source, target, method):
                with self._lock:
                    self._intercepted.append(InterceptedCall(source, target, method, rule.action, rule.id))
                return rule
        return None

    async def _apply_before_request(self, rule: FaultRule, address: str, what: str,
                                    timeout_s: float) -> float:
        """Wait/raise as ``rule`` says for a request; returns the timeout left for the real call."""
        if rule.action is FaultAction.FAIL:
            raise RecipientUnreachable(f"{what}: {address} is unreachable (fault injection)")
        if rule.action is FaultAction.DROP or rule.delay_s >= timeout_s:
            await asyncio.sleep(timeout_s)
            raise RpcTimeout(f"{what} timed out after {timeout_s:.1f}s (dropped by fault injection)")
        await asyncio.sleep(rule.delay_s)
        return timeout_s - rule.delay_s

    def _deliver_later(self, delay_s: float, send: Callable[[], Any]) -> None:
        async def later() -> None:
            await asyncio.sleep(delay_s)
            try:
                await send()
            except Exception as exc:  # a oneway call has nobody to tell
                log.debug("delayed oneway call failed: %s", exc)

        task = asyncio.ensure_future(later())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class _FaultInjectingGateway(GatewayProxy):
    """Gateway proxy: every method call is checked against the service's rules first."""

    def __init__(self, service: FaultInjectingRpcService, inner: Any, address: str,
                 gateway_type: TypeForm[Any], timeout_s: float,
                 fencing_token: str | None) -> None:
        super().__init__(address, gateway_type, timeout_s, fencing_token)
        self._service = service
        self._inner = inner

    def _make_call(self, name: str, is_oneway: bool) -> Callable[..., Any]:
        service = self._service
        what = f"{self._gateway_name}.{name} to {self._address}"

        async def call(*args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
            def send(timeout_s: float | None = timeout) -> Any:
                method = getattr(self._inner, name)
                return method(*args, **kwargs) if timeout_s is None else method(
                    *args, timeout=timeout_s, **kwargs)

            rule = service._decide(current_endpoint_id(), self._address, name)
            if rule is None:
                return await send()
            if is_oneway:
                if rule.action is FaultAction.DELAY:
                    service._deliver_later(rule.delay_s, send)
                elif rule.action is FaultAction.FAIL:
                    raise RecipientUnreachable(f"{what}: unreachable (fault injection)")
                return None
            left = await service._apply_before_request(rule, self._address, what,
                                                       timeout or self._timeout_s)
            return await send(left)

        return call

    def __repr__(self) -> str:
        return f"<faulty {self._gateway_name} at {self._address}>"
