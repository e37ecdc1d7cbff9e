"""RpcService: registers endpoints at addresses and connects gateways to them.

``InProcRpcService`` (MiniCluster, tests) hands calls straight to the target endpoint's mailbox;
a gRPC service (session cluster) implements the same two methods over the network. Callers only
ever hold gateways: ``await service.connect(address, ResourceManagerGateway)`` returns a proxy whose
methods are the Protocol's methods, each with a timeout.

Gateway Protocols mark fire-and-forget methods (heartbeats, disconnects) with ``@oneway``: calling
one queues it at the target and returns ``None`` at once.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.rpc.exceptions import RecipientUnreachable, RpcTimeout

if TYPE_CHECKING:
    # PEP 747: ``connect`` takes a gateway Protocol, which is no ``type[G]`` to a type checker
    # (only concrete classes are)
    from typing_extensions import TypeForm

__all__ = ["GatewayProxy", "InProcRpcService", "RpcService", "gateway_methods", "oneway"]

G = TypeVar("G")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TIMEOUT_S = 10.0


def oneway(fn: F) -> F:
    """Mark a gateway method as fire-and-forget (no reply is awaited)."""
    fn.__flintlock_oneway__ = True  # type: ignore[attr-defined]
    return fn


def gateway_methods(gateway_type: TypeForm[Any]) -> dict[str, bool]:
    """The Protocol's public methods, mapped to whether each is ``@oneway``."""
    methods: dict[str, bool] = {}
    for name in dir(gateway_type):
        if name.startswith("_"):
            continue
        attr = getattr(gateway_type, name)
        if inspect.iscoroutinefunction(attr) or callable(attr):
            methods[name] = bool(getattr(attr, "__flintlock_oneway__", False))
    return methods


class RpcService(Protocol):
    """Where endpoints live and how gateways reach them."""

    def register(self, endpoint: RpcEndpoint) -> str:
        """Register ``endpoint``; returns its address (also stored in ``endpoint.address``)."""
        ...

    def unregister(self, endpoint: RpcEndpoint) -> None: ...

    async def connect(self, address: str, gateway_type: TypeForm[G],
                      timeout_s: float | None = None, *, fencing_token: str | None = None) -> G:
        """A gateway to the endpoint at ``address``; its calls carry ``fencing_token`` (the
        target's leader id / JobMasterId, checked by fenced endpoints).

        Raises:
            RecipientUnreachable: nothing is registered there.
        """
        ...

    async def close(self) -> None: ...


class GatewayProxy:
    """Base of the gateway proxies: ``gateway.<method>(...)`` for the RPC methods of a type.

    Only the methods of ``gateway_type`` (``gateway_methods``) resolve; ``_make_call(name,
    is_oneway)`` of the subclass returns the coroutine function that carries the call.
    """

    def __init__(self, address: str, gateway_type: TypeForm[Any], timeout_s: float,
                 fencing_token: str | None = None) -> None:
        self._address = address
        self._methods = gateway_methods(gateway_type)
        self._timeout_s = timeout_s
        self._gateway_name = gateway_type.__name__
        self._fencing_token = fencing_token

    @property
    def address(self) -> str:
        return self._address

    @property
    def fencing_token(self) -> str | None:
        """The token every call of this gateway carries (None: unfenced)."""
        return self._fencing_token

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(f"{self._gateway_name} has no RPC method {name!r}")
        call = self._make_call(name, self._methods[name])
        call.__name__ = name
        return call

    def _make_call(self, name: str, is_oneway: bool) -> Callable[..., Any]:
        raise NotImplementedError


class _InProcGateway(GatewayProxy):
    """Proxy whose attributes call the target endpoint's handlers through its mailbox."""

    def __init__(self, service: InProcRpcService, address: str, gateway_type: TypeForm[Any],
                 timeout_s: float, fencing_token: str | None) -> None:
        super().__init__(address, gateway_type, timeout_s, fencing_token)
        self._service = service

    def _make_call(self, name: str, is_oneway: bool) -> Callable[..., Any]:
        async def call(*args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
            endpoint = self._service.lookup(self._address)
            if is_oneway:
                endpoint.deliver_oneway(name, args, kwargs, self._fencing_token)
                return None
            try:
                return await asyncio.wait_for(
                    endpoint.dispatch(name, args, kwargs, self._fencing_token),
                    timeout or self._timeout_s
                )
            except asyncio.TimeoutError:
                raise RpcTimeout(
                    f"{self._gateway_name}.{name} to {self._address} timed out after "
                    f"{timeout or self._timeout_s:.1f}s"
                ) from None

        return call

    def __repr__(self) -> str:
        return f"<{self._gateway_name} at {self._address}>"


class InProcRpcService:
    """All endpoints in one process and one asyncio loop; addresses are ``inproc://<id>``."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._endpoints: dict[str, RpcEndpoint] = {}
        self._timeout_s = timeout_s

    def register(self, endpoint: RpcEndpoint) -> str:
        address = f"inproc://{endpoint.endpoint_id}"
        if address in self._endpoints and self._endpoints[address] is not endpoint:
            raise ValueError(f"an endpoint is already registered at {address}")
        self._endpoints[address] = endpoint
        endpoint.address = address
        return address

    def unregister(self, endpoint: RpcEndpoint) -> None:
        if self._endpoints.get(endpoint.address) is endpoint:
            del self._endpoints[endpoint.address]

    def lookup(self, address: str) -> RpcEndpoint:
        endpoint = self._endpoints.get(address)
        if endpoint is None or not endpoint.is_running:
            raise RecipientUnreachable(f"no running endpoint at {address}")
        return endpoint

    async def connect(self, address: str, gateway_type: TypeForm[G],
                      timeout_s: float | None = None, *, fencing_token: str | None = None) -> G:
        self.lookup(address)
        proxy = _InProcGateway(self, address, gateway_type, timeout_s or self._timeout_s,
                               fencing_token)
        return cast(G, proxy)

    async def close(self) -> None:
        self._endpoints.clear()
