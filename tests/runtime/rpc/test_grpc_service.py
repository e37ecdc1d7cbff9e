"""GrpcRpcService: two services on 127.0.0.1 port 0 in one loop, an endpoint called across them."""

from __future__ import annotations

import asyncio
import pathlib
import pickle
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from fractions import Fraction
from typing import Any, Protocol

import grpc
import grpc.aio
import pytest

from flintlock.runtime.dispatcher.exceptions import FlinkJobNotFoundException
from flintlock.runtime.ids import JobID
from flintlock.runtime.rpc.auth import RpcAuthenticationError
from flintlock.runtime.rpc.codec import CodecError
from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.rpc.exceptions import (
    FencingTokenMismatch,
    RecipientUnreachable,
    RemoteError,
    RpcException,
    RpcTimeout,
)
from flintlock.runtime.rpc.grpc_service import RPC_METHOD, GrpcRpcService
from flintlock.runtime.rpc.messages import ACK, Acknowledge
from flintlock.runtime.rpc.service import oneway
from flintlock.testing.waiting import wait_until


class EchoGateway(Protocol):
    async def echo(self, value: Any) -> Any: ...

    async def block(self) -> Acknowledge: ...

    async def fail(self, kind: str) -> Acknowledge: ...

    @oneway
    async def note(self, value: Any) -> None: ...


class OtherGateway(Protocol):
    async def something_else(self) -> None: ...


class Echo(RpcEndpoint):
    """Implements EchoGateway and counts how often its handlers ran."""

    def __init__(self, endpoint_id: str = "echo") -> None:
        super().__init__(endpoint_id)
        self.calls = 0
        self.notes: list[Any] = []
        self.unblock = asyncio.Event()

    async def echo(self, value: Any) -> Any:
        self.calls += 1
        return value

    async def block(self) -> Acknowledge:
        self.calls += 1
        await self.unblock.wait()
        return ACK

    async def fail(self, kind: str) -> Acknowledge:
        self.calls += 1
        if kind == "fencing":
            raise FencingTokenMismatch("stale fencing token 7")
        if kind == "not-found":
            raise FlinkJobNotFoundException("abc")
        raise KeyError(kind)

    async def note(self, value: Any) -> None:
        self.calls += 1
        self.notes.append(value)


def run(body: Callable[[], Awaitable[None]], timeout_s: float = 30.0) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(), timeout_s)
        current = asyncio.current_task()
        leftover = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        assert not leftover, f"tasks left after close: {leftover}"

    asyncio.run(main())


@asynccontextmanager
async def two_services(server_kwargs: dict[str, Any] | None = None,
                       client_kwargs: dict[str, Any] | None = None,
                       **kwargs: Any) -> AsyncIterator[tuple[GrpcRpcService, GrpcRpcService, Echo]]:
    """``server`` serves an Echo endpoint; ``client`` calls it; both close afterwards.

    ``kwargs`` go to both services, ``server_kwargs`` / ``client_kwargs`` to one of them."""
    server = GrpcRpcService(secret=None, **kwargs, **(server_kwargs or {}))
    client = GrpcRpcService(secret=None, **kwargs, **(client_kwargs or {}))
    await server.start()
    await client.start()
    echo = Echo()
    server.register(echo)
    await echo.start()
    try:
        yield server, client, echo
    finally:
        echo.unblock.set()
        await echo.stop()
        await client.close()
        await server.close()


def test_request_response_and_addresses() -> None:
    async def body() -> None:
        async with two_services() as (server, client, echo):
            assert echo.address == f"grpc://127.0.0.1:{server.port}/echo" and server.port > 0
            assert client.port != server.port
            gateway = await client.connect(echo.address, EchoGateway)
            value = {"job": JobID.generate(), "payload": b"\x00" * 10, "n": (1, 2.5, None)}
            assert await gateway.echo(value) == value
            assert await gateway.echo(value) is not value  # it really crossed the wire
            with pytest.raises(AttributeError, match="no RPC method 'stop'"):
                gateway.stop  # noqa: B018
            assert repr(gateway) == f"<EchoGateway at {echo.address}>"

    run(body)


def test_advertised_host_goes_into_addresses() -> None:
    async def body() -> None:
        service = GrpcRpcService(secret="s", advertised_host="localhost")
        with pytest.raises(RuntimeError, match="start"):
            service.register(Echo())
        await service.start()
        echo = Echo()
        assert service.register(echo) == f"grpc://localhost:{service.port}/echo"
        with pytest.raises(ValueError, match="already registered"):
            service.register(Echo())
        await service.close()

    run(body)


def test_oneway_is_fire_and_forget() -> None:
    async def body() -> None:
        async with two_services() as (_server, client, echo):
            gateway = await client.connect(echo.address, EchoGateway)
            assert await gateway.note("a") is None
            assert await gateway.note("b") is None
            await wait_until(
                lambda: sorted(echo.notes) == ["a", "b"], 5.0, describe=lambda: echo.notes
            )

    run(body)


def test_timeout_raises_rpc_timeout() -> None:
    async def body() -> None:
        async with two_services() as (_server, client, echo):
            gateway = await client.connect(echo.address, EchoGateway, timeout_s=0.2)
            with pytest.raises(RpcTimeout, match=r"EchoGateway\.block to .* timed out after 0\.2s"):
                await gateway.block()
            with pytest.raises(RpcTimeout, match="timed out after 0.1s"):
                await gateway.echo(1, timeout=0.1)  # queued behind the blocked handler
            echo.unblock.set()
            assert await gateway.echo(2, timeout=5) == 2

    run(body)


def test_unknown_endpoint_and_stopped_endpoint_are_unreachable() -> None:
    async def body() -> None:
        async with two_services() as (server, client, echo):
            with pytest.raises(
                RecipientUnreachable, match=f"no running endpoint at .*:{server.port}/nope"
            ):
                await client.connect(f"grpc://127.0.0.1:{server.port}/nope", EchoGateway)
            with pytest.raises(RecipientUnreachable, match="not a grpc://"):
                await client.connect("inproc://echo", EchoGateway)
            gateway = await client.connect(echo.address, EchoGateway)
            await echo.stop()
            with pytest.raises(RecipientUnreachable, match="no running endpoint"):
                await gateway.echo(1)

    run(body)


def test_handshake_checks_the_gateway_methods() -> None:
    async def body() -> None:
        async with two_services() as (_server, client, echo):
            with pytest.raises(
                RpcException, match=r"does not implement OtherGateway methods \['something_else'\]"
            ):
                await client.connect(echo.address, OtherGateway)

    run(body)


def test_handler_exceptions_cross_the_wire() -> None:
    async def body() -> None:
        async with two_services() as (_server, client, echo):
            gateway = await client.connect(echo.address, EchoGateway)
            with pytest.raises(FencingTokenMismatch, match="stale fencing token 7") as info:
                await gateway.fail("fencing")
            assert "in fail" in info.value.remote_traceback  # type: ignore[attr-defined]
            with pytest.raises(RemoteError) as remote:
                await gateway.fail("other")
            assert (
                remote.value.type_name == "KeyError" and "in fail" in remote.value.remote_traceback
            )
            with pytest.raises(FlinkJobNotFoundException, match=r"Could not find Flink job \(abc\)"):
                await gateway.fail("not-found")
            assert await gateway.echo("still fine") == "still fine"

    run(body)


def test_encoding_failures_are_reported_and_refused_classes_never_reach_the_handler() -> None:
    async def body() -> None:
        async with two_services() as (_server, client, echo):
            gateway = await client.connect(echo.address, EchoGateway)
            with pytest.raises(CodecError, match="cannot encode the arguments of echo"):
                await gateway.echo(threading.Lock())
            with pytest.raises(CodecError, match="cannot encode the arguments of note"):
                await gateway.note(threading.Lock())  # one-way: still raised on the caller
            with pytest.raises(CodecError, match=r"refusing to unpickle fractions\.Fraction"):
                await gateway.echo(Fraction(1, 3))
            assert echo.calls == 0

    run(body)


def test_large_messages() -> None:
    async def body() -> None:
        async with two_services() as (_server, client, echo):
            gateway = await client.connect(echo.address, EchoGateway)
            big = bytes(range(256)) * (
                24 * 1024 * 1024 // 256
            )  # 24 MiB, above gRPC's 4 MiB default
            assert await gateway.echo(big) == big

    run(body)


def test_wrong_secret_is_rejected_and_the_handler_never_runs(tmp_path: pathlib.Path) -> None:
    async def body() -> None:
        async with two_services() as (server, _client, echo):
            intruder = GrpcRpcService(secret="not-the-cluster-secret")
            await intruder.start()
            try:
                with pytest.raises(RpcAuthenticationError, match=r"security\.cluster\.secret"):
                    await intruder.connect(echo.address, EchoGateway)
                # a raw call with a malicious pickle and a forged tag: UNAUTHENTICATED, nothing runs
                marker = tmp_path / "pwned"
                payload = pickle.dumps(_RunsShell(f"touch {marker}"))
                async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                    call = channel.unary_unary(RPC_METHOD)
                    with pytest.raises(grpc.aio.AioRpcError) as info:
                        await call(b"\x00" * 32 + payload, timeout=5)
                assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
                assert not marker.exists()
                assert echo.calls == 0
            finally:
                await intruder.close()

    run(body)


class _RunsShell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> Any:
        import os

        return (os.system, (self.command,))


def test_a_stopped_peer_is_unreachable() -> None:
    async def body() -> None:
        async with two_services() as (server, client, echo):
            gateway = await client.connect(echo.address, EchoGateway)
            await server.close()
            with pytest.raises(RecipientUnreachable, match="unreachable"):
                await gateway.echo(1, timeout=5)
            assert await gateway.note("dropped") is None  # one-way: no error, nothing waits
            with pytest.raises(RecipientUnreachable):
                await client.connect(echo.address, EchoGateway, timeout_s=5)

    run(body)


def test_calls_within_one_service_short_circuit() -> None:
    async def body() -> None:
        async with two_services() as (server, _client, echo):
            gateway = await server.connect(echo.address, EchoGateway)
            unpicklable = threading.Lock()
            assert await gateway.echo(unpicklable) is unpicklable  # no serialization, no network
            for alias in ("localhost", "127.0.0.1"):
                local = await server.connect(f"grpc://{alias}:{server.port}/echo", EchoGateway)
                assert await local.echo(unpicklable) is unpicklable
            await gateway.note("local")
            await wait_until(lambda: echo.notes == ["local"], 5.0)
            with pytest.raises(FencingTokenMismatch):
                await gateway.fail("fencing")
            with pytest.raises(RpcTimeout):
                await gateway.block(timeout=0.05)
            echo.unblock.set()
            with pytest.raises(RecipientUnreachable):
                await server.connect(f"grpc://127.0.0.1:{server.port}/nope", EchoGateway)

    run(body)


def test_close_is_idempotent_and_refuses_later_calls() -> None:
    async def body() -> None:
        async with two_services() as (_server, client, echo):
            gateway = await client.connect(echo.address, EchoGateway)
            await client.close()
            with pytest.raises(RecipientUnreachable, match="closed"):
                await gateway.echo(1)
        await client.close()

    run(body)


def test_network_binding_requires_a_secret() -> None:
    with pytest.raises(ValueError, match=r"set `security\.cluster\.secret`"):
        GrpcRpcService("0.0.0.0", 0, secret=None)
    GrpcRpcService("0.0.0.0", 0, secret="configured")  # constructing does not bind


def test_a_taken_port_is_an_error() -> None:
    async def body() -> None:
        first = GrpcRpcService(secret=None)
        await first.start()
        second = GrpcRpcService(port=first.port, secret=None)
        try:
            with pytest.raises(RuntimeError, match="cannot bind"):
                await second.start()
        finally:
            await second.close()
            await first.close()

    run(body)
