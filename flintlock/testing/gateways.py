"""Testing gateways: a real endpoint for any gateway Protocol, with replaceable handlers.

Flink's ``Testing*Gateway`` + builder in one generic class::

    rm = TestingEndpoint("resourcemanager", ResourceManagerGateway,
                         register_job_master=lambda *a: RegistrationResponse(True, ResourceID("rm")))
    rpc.register(rm); await rm.start()
    ...
    assert rm.calls_to("declare_required_resources")[0].args[0].number_of_slots == 2

Every call is recorded (``calls``) in arrival order. A method without a handler returns ``ACK`` when
its Protocol annotation returns ``Acknowledge``, ``()`` for tuples and ``None`` otherwise. Handlers may
be sync or async callables taking the call's arguments; assign ``endpoint.handlers[name] = fn`` to
change one during a test. ``wait_for_call(name)`` waits (with a deadline) until a call arrived.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.rpc.messages import ACK
from flintlock.runtime.rpc.service import gateway_methods

__all__ = ["RecordedCall", "TestingEndpoint"]


@dataclass(frozen=True)
class RecordedCall:
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class TestingEndpoint(RpcEndpoint):
    """An endpoint implementing ``gateway_type`` by recording calls and running handlers."""

    __test__ = False  # not a pytest test class

    def __init__(self, endpoint_id: str, gateway_type: type[Any], **handlers: Callable[..., Any]) -> None:
        super().__init__(endpoint_id)
        self.gateway_type = gateway_type
        self.methods = gateway_methods(gateway_type)
        unknown = set(handlers) - set(self.methods)
        if unknown:
            raise TypeError(f"{gateway_type.__name__} has no methods {sorted(unknown)}")
        self.handlers: dict[str, Callable[..., Any]] = dict(handlers)
        self.calls: list[RecordedCall] = []
        self._arrivals: asyncio.Condition | None = None

    def __getattr__(self, name: str) -> Any:
        methods = self.__dict__.get("methods", {})
        if name not in methods:
            raise AttributeError(name)

        async def handler(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(RecordedCall(name, args, kwargs))
            if self._arrivals is None:
                self._arrivals = asyncio.Condition()
            async with self._arrivals:
                self._arrivals.notify_all()
            fn = self.handlers.get(name)
            if fn is not None:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
                return result
            return self._default_result(name)

        return handler

    def _default_result(self, name: str) -> Any:
        annotation = str(inspect.signature(getattr(self.gateway_type, name)).return_annotation)
        if "Acknowledge" in annotation:
            return ACK
        if annotation.startswith("tuple"):
            return ()
        return None

    def calls_to(self, method: str) -> list[RecordedCall]:
        return [c for c in self.calls if c.method == method]

    async def wait_for_call(self, method: str, count: int = 1, timeout_s: float = 10.0) -> list[RecordedCall]:
        """Wait until ``count`` calls to ``method`` arrived; on timeout, fail listing what came."""
        if self._arrivals is None:
            self._arrivals = asyncio.Condition()
        deadline = asyncio.get_running_loop().time() + timeout_s
        async with self._arrivals:
            while len(self.calls_to(method)) < count:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    seen = [c.method for c in self.calls]
                    raise AssertionError(
                        f"{self.endpoint_id}: expected {count} call(s) to {method}, "
                        f"got {len(self.calls_to(method))}; calls seen: {seen}"
                    )
                try:
                    await asyncio.wait_for(self._arrivals.wait(), remaining)
                except asyncio.TimeoutError:
                    pass
        return self.calls_to(method)
