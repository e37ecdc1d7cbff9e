"""RestServer connection limits: request-head timeout, connection limit, their options (issue 16,
defect 6). Real uvicorn on an ephemeral port, raw sockets for half-sent requests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from flintlock.config import Configuration
from flintlock.config.configuration import IllegalConfigurationException
from flintlock.runtime.rest.server import RestServer, server_options

HEADER_TIMEOUT_S = 0.5
#: how much later than the timeout a closed connection may be seen (a loaded 2-core machine)
MARGIN_S = 5.0


def _app(gate: asyncio.Event | None = None, entered: list[int] | None = None) -> FastAPI:
    """``GET /ping``; ``GET /block`` counts itself in ``entered`` and waits for ``gate``;
    ``POST /echo`` answers its body's length."""
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    @app.get("/block")
    async def block() -> dict[str, str]:
        assert gate is not None and entered is not None
        entered.append(1)
        await gate.wait()
        return {"released": "yes"}

    @app.post("/echo")
    async def echo(body: dict[str, Any]) -> dict[str, int]:
        return {"keys": len(body)}

    return app


def _serve(test: Callable[[RestServer], Awaitable[None]], app: FastAPI | None = None,
           **limits: Any) -> None:
    async def main() -> None:
        server = RestServer(app or _app(), port=0, **limits)
        await server.start()
        try:
            await test(server)
        finally:
            await server.stop()

    asyncio.run(main())


async def _closed_after(reader: asyncio.StreamReader, deadline_s: float) -> None:
    """Returns once the server closed the connection (EOF); fails after ``deadline_s``."""
    data = await asyncio.wait_for(reader.read(), deadline_s)
    assert data == b"", data  # closed without an answer


async def _wait_for(condition: Callable[[], bool], deadline_s: float = MARGIN_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_a_half_sent_request_head_is_closed_after_the_header_timeout():
    async def test(server: RestServer) -> None:
        start = time.monotonic()
        silent = await asyncio.open_connection("127.0.0.1", server.port)
        partial = await asyncio.open_connection("127.0.0.1", server.port)
        partial[1].write(b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for reader, writer in (silent, partial):
            await _closed_after(reader, HEADER_TIMEOUT_S + MARGIN_S)
            assert time.monotonic() - start >= HEADER_TIMEOUT_S * 0.9
            writer.close()
        # a normal request on a new connection is served
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            assert (await client.get("/ping")).json() == {"pong": "yes"}

    _serve(test, header_timeout_s=HEADER_TIMEOUT_S)


def test_a_head_sent_byte_by_byte_does_not_extend_the_timeout():
    async def test(server: RestServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        head = b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Pad: " + b"a" * 1000

        async def dribble() -> None:
            for i in range(len(head)):  # one byte every 20 ms: 20 s for the whole head
                writer.write(head[i:i + 1])
                await asyncio.sleep(0.02)

        dribbler = asyncio.create_task(dribble())
        start = time.monotonic()
        try:
            await _closed_after(reader, HEADER_TIMEOUT_S + MARGIN_S)
        finally:
            dribbler.cancel()
            writer.close()
        assert time.monotonic() - start >= HEADER_TIMEOUT_S * 0.9

    _serve(test, header_timeout_s=HEADER_TIMEOUT_S)


def test_kept_alive_connections_and_slow_bodies_are_not_cut_by_the_header_timeout():
    async def test(server: RestServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 8\r\n\r\n{\"a\":")
        await asyncio.sleep(HEADER_TIMEOUT_S * 2)  # the head is complete: only the body is slow
        writer.write(b" 1}")
        assert b'{"keys":1}' in await asyncio.wait_for(reader.readuntil(b"}"), MARGIN_S)
        # the same connection, kept alive: a second request within the idle timeout
        writer.write(b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert b'{"pong":"yes"}' in await asyncio.wait_for(reader.readuntil(b"}"), MARGIN_S)
        # the next request's head, started and never finished: closed by the header timeout
        writer.write(b"GET /pi")
        await _closed_after(reader, HEADER_TIMEOUT_S + MARGIN_S)
        writer.close()

    _serve(test, header_timeout_s=HEADER_TIMEOUT_S, idle_timeout_s=30.0)


def test_accepted_connections_send_without_nagles_delay():
    """Every accepted connection has TCP_NODELAY: uvicorn writes a response's head and body
    apart, and with Nagle's algorithm on, each response after the first on a kept-alive
    connection waited ~40 ms for the client's delayed ACK."""
    import socket

    async def test(server: RestServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert b'{"pong":"yes"}' in await asyncio.wait_for(reader.readuntil(b"}"), MARGIN_S)
        uvicorn_server = server._server
        assert uvicorn_server is not None
        (connection,) = uvicorn_server.server_state.connections
        sock = connection.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        writer.close()

    _serve(test)


def test_requests_beyond_max_connections_get_503():
    gate = asyncio.Event()
    entered: list[int] = []

    async def test(server: RestServer) -> None:
        blocked = [asyncio.create_task(_get(server.url, "/block")) for _ in range(2)]
        await _wait_for(lambda: len(entered) == 2)
        r = await _get(server.url, "/ping")
        assert r.status_code == 503  # two connections served at once, a third is one too many
        gate.set()
        for task in blocked:
            assert (await task).json() == {"released": "yes"}
        deadline = time.monotonic() + MARGIN_S  # the closed connections leave asynchronously
        while (r := await _get(server.url, "/ping")).status_code == 503:
            assert time.monotonic() < deadline
        assert r.json() == {"pong": "yes"}

    _serve(test, _app(gate, entered), max_connections=2)


async def _get(base_url: str, path: str) -> httpx.Response:
    """One GET on its own connection, closed after the answer."""
    async with httpx.AsyncClient(base_url=base_url, timeout=MARGIN_S * 2) as client:
        return await client.get(path)


def test_the_limits_come_from_the_configuration():
    assert server_options(Configuration()) == {
        "header_timeout_s": 10.0, "idle_timeout_s": 5.0, "max_connections": 256,
        "ssl_settings": {}}
    conf = Configuration({"rest.server.header-timeout": "2 s", "rest.server.idle-timeout": "1 min",
                          "rest.server.max-connections": "8"})
    assert server_options(conf) == {
        "header_timeout_s": 2.0, "idle_timeout_s": 60.0, "max_connections": 8,
        "ssl_settings": {}}
    for key, bad in (("rest.server.header-timeout", "0 s"), ("rest.server.max-connections", "0"),
                     ("rest.server.idle-timeout", "soon")):
        with pytest.raises(IllegalConfigurationException, match=key):
            Configuration({key: bad})
    with pytest.raises(ValueError):
        RestServer(FastAPI(), header_timeout_s=0)
