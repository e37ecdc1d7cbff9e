"""Call tokens: the gRPC server authenticates a call from its metadata before it reads the body.

Regression for issue 16, defect 2: unauthenticated 250 MB messages to ``/flintlock.Rpc/Call`` were
read whole before their HMAC tag was checked, which grew the JobManager by gigabytes. Now a call
without a valid ``x-flintlock-auth`` token is rejected with ``UNAUTHENTICATED`` and its body is
never read (checked on a server in a child process through its peak RSS), authenticated bodies are
bounded by ``max_message_bytes`` (``rpc.framesize``), and the payload tags still apply.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import grpc
import grpc.aio
import pytest

from flintlock.config import Configuration
from flintlock.config.configuration import IllegalConfigurationException
from flintlock.config.options import RPC_FRAMESIZE
from flintlock.runtime.rpc.auth import (
    CALL_TOKEN_MAX_SKEW_S,
    RpcAuthenticationError,
    RpcAuthenticator,
)
from flintlock.runtime.rpc.call_auth import (
    AUTH_METADATA_KEY,
    CallAuthInterceptor,
    RateLimitedWarning,
)
from flintlock.runtime.rpc.codec import (
    MAX_MESSAGE_BYTES,
    CodecError,
    RequestKind,
    RpcReply,
    RpcRequest,
    decode_reply,
    encode_reply,
    encode_request,
)
from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.rpc.grpc_service import RPC_METHOD, GrpcRpcService

SECRET = "auth-before-body-secret"
MiB = 1024 * 1024


# ---- call tokens ---------------------------------------------------------------------------------


def test_call_token_round_trip_and_shape() -> None:
    auth = RpcAuthenticator(SECRET)
    now = 1_700_000_000.123
    token = auth.call_token(RPC_METHOD, now)
    version, ms, nonce, mac = token.split(".")
    assert (version, ms) == ("v1", "1700000000123")
    assert len(nonce) == 32 and len(mac) == 64 and len(token) < 128
    auth.verify_call_token(token, RPC_METHOD, now)
    auth.verify_call_token(token.encode("ascii"), RPC_METHOD, now + 1.0)  # bytes metadata value
    RpcAuthenticator(SECRET).verify_call_token(token, RPC_METHOD, now)  # same secret elsewhere
    assert auth.call_token(RPC_METHOD, now) != token  # a fresh nonce each time
    auth.verify_call_token(auth.call_token(RPC_METHOD), RPC_METHOD)  # default clocks


@pytest.mark.parametrize("skew_s", [CALL_TOKEN_MAX_SKEW_S - 1, -(CALL_TOKEN_MAX_SKEW_S - 1)])
def test_call_token_within_the_skew_window_is_accepted(skew_s: float) -> None:
    auth = RpcAuthenticator(SECRET)
    auth.verify_call_token(auth.call_token(RPC_METHOD, 1_000_000.0), RPC_METHOD,
                           1_000_000.0 + skew_s)


@pytest.mark.parametrize("skew_s", [CALL_TOKEN_MAX_SKEW_S + 1, -(CALL_TOKEN_MAX_SKEW_S + 1)])
def test_expired_or_future_call_token_is_rejected(skew_s: float) -> None:
    auth = RpcAuthenticator(SECRET)
    token = auth.call_token(RPC_METHOD, 1_000_000.0)
    with pytest.raises(RpcAuthenticationError, match=r"stamped .* s from this host's clock"):
        auth.verify_call_token(token, RPC_METHOD, 1_000_000.0 + skew_s)


def test_call_token_of_another_secret_or_method_is_rejected() -> None:
    token = RpcAuthenticator("another-secret").call_token(RPC_METHOD)
    with pytest.raises(RpcAuthenticationError, match="does not match the cluster secret"):
        RpcAuthenticator(SECRET).verify_call_token(token, RPC_METHOD)
    auth = RpcAuthenticator(SECRET)
    with pytest.raises(RpcAuthenticationError, match="does not match the cluster secret"):
        auth.verify_call_token(auth.call_token("/other.Service/Method"), RPC_METHOD)


def test_tampered_call_token_is_rejected() -> None:
    auth = RpcAuthenticator(SECRET)
    now = 1_000_000.0
    version, ms, nonce, mac = auth.call_token(RPC_METHOD, now).split(".")
    flip = {"0": "1"}
    tampered = [
        f"{version}.{int(ms) + 1}.{nonce}.{mac}",  # a later timestamp
        f"{version}.{ms}.{flip.get(nonce[0], '0')}{nonce[1:]}.{mac}",  # another nonce
        f"{version}.{ms}.{nonce}.{mac[:-1]}{'0' if mac[-1] != '0' else '1'}",  # another MAC
    ]
    for token in tampered:
        with pytest.raises(RpcAuthenticationError, match="does not match the cluster secret"):
            auth.verify_call_token(token, RPC_METHOD, now)


@pytest.mark.parametrize("token", [
    None, "", b"", "garbage", "v1...", "v2.1.00.00",
    "v1.abc." + "0" * 32 + "." + "0" * 64,  # the timestamp is not a number
    "v1.1." + "0" * 32 + "." + "A" * 64,  # upper-case hex is not what call_token writes
    "v1.1." + "0" * 32 + "." + "0" * 63,
    "v1.1." + "0" * 32 + "." + "0" * 64 + ".extra",
    "v1.1." + "0" * 32 + "." + "0" * 64 + "\n",
    "x" * 100_000,
    b"\xff\xfe",
])
def test_malformed_call_token_is_rejected(token: Any) -> None:
    with pytest.raises(RpcAuthenticationError, match="no authentication token|malformed"):
        RpcAuthenticator(SECRET).verify_call_token(token, RPC_METHOD)


def test_rejection_warnings_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    clock = [100.0]
    logger = logging.getLogger("flintlock.test.ratelimit")
    warning = RateLimitedWarning(logger, interval_s=10.0, clock=lambda: clock[0])
    with caplog.at_level(logging.WARNING, logger=logger.name):
        assert warning.warn("rejected %s", "a")
        assert not any(warning.warn("rejected %s", "b") for _ in range(5))
        clock[0] += 9.9
        assert not warning.warn("rejected %s", "c")
        clock[0] += 0.1
        assert warning.warn("rejected %s", "d")
        clock[0] += 10.0
        assert warning.warn("rejected %s", "e")
    messages = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert messages == [
        "rejected a",
        "rejected d (6 more rejected call(s) not logged in the last 10 s)",
        "rejected e",
    ]


def test_framesize_option_and_its_flink_keys() -> None:
    assert Configuration().get(RPC_FRAMESIZE) == MAX_MESSAGE_BYTES == 256 * MiB
    assert Configuration({"rpc.framesize": "64m"}).get(RPC_FRAMESIZE) == 64 * MiB
    assert Configuration({"pekko.framesize": "10485760b"}).get(RPC_FRAMESIZE) == 10 * MiB
    assert Configuration({"akka.framesize": "1g"}).get(RPC_FRAMESIZE) == 1024 * MiB
    for bad in ("12", "2g", "lots"):
        with pytest.raises(IllegalConfigurationException, match="rpc.framesize"):
            Configuration({"rpc.framesize": bad}).get(RPC_FRAMESIZE)
    for bad in (100, 2**31):
        with pytest.raises(ValueError, match="rpc.framesize"):
            GrpcRpcService(secret=SECRET, max_message_bytes=bad)


# ---- in-process services -------------------------------------------------------------------------


class EchoGateway(Protocol):
    async def echo(self, value: Any) -> Any: ...


class SizedGateway(Protocol):
    async def echo(self, value: Any) -> Any: ...

    async def grow(self, n: int) -> bytes: ...


class Sized(RpcEndpoint):
    """Echoes values and returns bodies of a requested size; counts its calls."""

    def __init__(self) -> None:
        super().__init__("sized")
        self.calls = 0

    async def echo(self, value: Any) -> Any:
        self.calls += 1
        return value

    async def grow(self, n: int) -> bytes:
        self.calls += 1
        return b"x" * n


def run(body: Callable[[], Awaitable[None]], timeout_s: float = 60.0) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(), timeout_s)

    asyncio.run(main())


@asynccontextmanager
async def services(server_limit: int = MAX_MESSAGE_BYTES, client_limit: int = MAX_MESSAGE_BYTES,
                   ) -> AsyncIterator[tuple[GrpcRpcService, GrpcRpcService, Sized]]:
    server = GrpcRpcService(secret=SECRET, max_message_bytes=server_limit)
    client = GrpcRpcService(secret=SECRET, max_message_bytes=client_limit)
    await server.start()
    await client.start()
    endpoint = Sized()
    server.register(endpoint)
    await endpoint.start()
    try:
        yield server, client, endpoint
    finally:
        await endpoint.stop()
        await client.close()
        await server.close()


async def _raw_call(port: int, body: bytes, metadata: tuple[tuple[str, str], ...] | None,
                    ) -> grpc.aio.AioRpcError:
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        call = channel.unary_unary(RPC_METHOD)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(body, metadata=metadata, timeout=30)
    return info.value


def test_valid_token_with_a_wrong_payload_tag_is_still_rejected() -> None:
    async def body() -> None:
        async with services() as (server, _client, endpoint):
            token = RpcAuthenticator(SECRET).call_token(RPC_METHOD)
            payload = pickle.dumps(("flintlock-rpc", 2, "call", "sized", "echo", (1,), {}, None))
            err = await _raw_call(server.port, b"\x00" * 32 + payload,
                                  ((AUTH_METADATA_KEY, token),))
            assert err.code() is grpc.StatusCode.UNAUTHENTICATED
            assert "not signed with this cluster's secret" in (err.details() or "")
            assert endpoint.calls == 0

    run(body)


def test_unauthenticated_calls_are_rejected_from_metadata_and_logged_rate_limited(
        caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        async with services() as (server, client, endpoint):
            wrong = RpcAuthenticator("wrong").call_token(RPC_METHOD)
            with caplog.at_level(logging.WARNING, logger="flintlock.runtime.rpc.call_auth"):
                for metadata in (None, ((AUTH_METADATA_KEY, "garbage"),),
                                 ((AUTH_METADATA_KEY, wrong),)) * 4:
                    err = await _raw_call(server.port, b"\x00" * 64, metadata)
                    assert err.code() is grpc.StatusCode.UNAUTHENTICATED, err
                    assert "its message was not read" in (err.details() or "")
            # headers are bounded too (grpc.max_metadata_size)
            err = await _raw_call(server.port, b"", (("x-padding", "p" * 64 * 1024),))
            assert err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, err
            warnings = [r for r in caplog.records if r.name == "flintlock.runtime.rpc.call_auth"]
            assert len(warnings) == 1, [r.getMessage() for r in warnings]
            assert "Rejected an unauthenticated RPC call" in warnings[0].getMessage()
            # the service's own clients carry tokens
            gateway = await client.connect(endpoint.address, SizedGateway)
            assert await gateway.echo("hello") == "hello"
            assert endpoint.calls == 1

    run(body)


def test_intruder_service_gets_an_authentication_error() -> None:
    async def body() -> None:
        async with services() as (_server, _client, endpoint):
            intruder = GrpcRpcService(secret="wrong")
            await intruder.start()
            try:
                with pytest.raises(RpcAuthenticationError,
                                   match=r"unauthenticated .*security\.cluster\.secret"):
                    await intruder.connect(endpoint.address, SizedGateway)
            finally:
                await intruder.close()
            assert endpoint.calls == 0

    run(body)


def test_interceptor_rejects_tokens_outside_the_skew_window() -> None:
    auth = RpcAuthenticator(SECRET)
    interceptor = CallAuthInterceptor(auth, clock=lambda: 1_000_000.0)

    class Details:
        method = RPC_METHOD
        invocation_metadata = ((AUTH_METADATA_KEY, auth.call_token(RPC_METHOD, 1_000_000.0
                                                                    - CALL_TOKEN_MAX_SKEW_S - 1)),)

    async def continuation(_details: Any) -> Any:
        raise AssertionError("the service's handler must not be reached")

    async def body() -> None:
        details: Any = Details()
        handler = await interceptor.intercept_service(continuation, details)
        assert handler.request_streaming and not handler.response_streaming
        assert interceptor.rejected == 1

    run(body)


def test_authenticated_messages_are_bounded_by_max_message_bytes() -> None:
    async def body() -> None:
        async with services(server_limit=MiB) as (_server, client, endpoint):
            gateway = await client.connect(endpoint.address, SizedGateway)
            small = b"s" * (MiB // 2)
            assert await gateway.echo(small) == small
            # the server's gRPC refuses a request above its limit: RESOURCE_EXHAUSTED -> CodecError
            with pytest.raises(CodecError, match="message too large.*rpc.framesize"):
                await gateway.echo(b"b" * (2 * MiB))
            # a reply above the server's limit becomes a CodecError reply
            with pytest.raises(Exception, match="cannot encode the reply.*above the limit of "
                                                f"{MiB} bytes"):
                await gateway.grow(2 * MiB)
            assert len(await gateway.grow(MiB // 2)) == MiB // 2
        async with services(client_limit=MiB) as (_server, client, endpoint):
            gateway = await client.connect(endpoint.address, SizedGateway)
            # the sender checks its own limit before sending
            with pytest.raises(CodecError, match=f"above the limit of {MiB} bytes"):
                await gateway.echo(b"b" * (2 * MiB))
            # a reply above the client's receive limit: RESOURCE_EXHAUSTED -> CodecError
            with pytest.raises(CodecError, match="message too large"):
                await gateway.grow(2 * MiB)
            assert await gateway.echo(b"ok") == b"ok"

    run(body)


def test_codec_reply_limit() -> None:
    auth = RpcAuthenticator(SECRET)
    tag = b"\x01" * 32
    body = encode_reply(auth, tag, RpcReply.ok(b"v" * 2000), limit=4096)
    assert decode_reply(auth, tag, body).value == b"v" * 2000
    too_big = decode_reply(auth, tag, encode_reply(auth, tag, RpcReply.ok(b"v" * 5000), limit=4096))
    assert too_big.error is not None and "above the limit of 4096 bytes" in too_big.error.message
    request = RpcRequest(RequestKind.CALL, "e", "m", (b"a" * 5000,))
    encode_request(auth, request)  # the default limit is MAX_MESSAGE_BYTES
    with pytest.raises(CodecError, match=r"above the limit of 4096 bytes \(rpc.framesize\)"):
        encode_request(auth, request, limit=4096)


# ---- the regression: a server in a child process, its peak RSS -----------------------------------

_SERVER_SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from flintlock.runtime.rpc.endpoint import RpcEndpoint
    from flintlock.runtime.rpc.grpc_service import GrpcRpcService

    class Echo(RpcEndpoint):
        async def echo(self, value):
            return value

    async def main():
        rpc = GrpcRpcService(secret=sys.argv[1])
        await rpc.start()
        echo = Echo("echo")
        rpc.register(echo)
        await echo.start()
        print(rpc.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until EOF
        await echo.stop()
        await rpc.close()

    asyncio.run(main())
""")


def _peak_rss_bytes(pid: int) -> int:
    """``VmHWM`` of a Linux process: its peak resident set size, bytes."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


@pytest.fixture
def server_process(tmp_path: pathlib.Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A GrpcRpcService with one ``echo`` endpoint in a child process; yields it and its port."""
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVER_SCRIPT, SECRET],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the child prints its port once it serves
        assert line.strip().isdigit(), f"no port from the server: {log_path.read_text()}"
        yield process, int(line)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        assert process.stdout is not None
        process.stdout.close()


@pytest.mark.process
@pytest.mark.skipif(not pathlib.Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_unauthenticated_large_bodies_are_never_read(
        server_process: tuple[subprocess.Popen[str], int]) -> None:
    process, port = server_process
    big = b"\x00" * (100 * MiB)
    metadatas: list[tuple[tuple[str, str], ...] | None] = [
        None,
        ((AUTH_METADATA_KEY, "v1.1.garbage"),),
        ((AUTH_METADATA_KEY, RpcAuthenticator("not-the-secret").call_token(RPC_METHOD)),),
    ]

    async def body() -> None:
        client = GrpcRpcService(secret=SECRET)
        await client.start()
        try:
            gateway = await client.connect(f"grpc://127.0.0.1:{port}/echo", EchoGateway)
            assert await gateway.echo(b"w" * MiB) == b"w" * MiB  # warm up the call path
            baseline = _peak_rss_bytes(process.pid)
            started = time.monotonic()
            for metadata in metadatas:
                err = await _raw_call(port, big, metadata)
                assert err.code() is grpc.StatusCode.UNAUTHENTICATED, err
            growth = _peak_rss_bytes(process.pid) - baseline
            assert growth < 64 * MiB, (
                f"the server's peak RSS grew by {growth / MiB:.0f} MiB for 3 unauthenticated "
                f"100 MiB calls ({time.monotonic() - started:.1f} s)")
            # the server still serves authenticated calls
            assert await gateway.echo("still up") == "still up"
            assert process.poll() is None
        finally:
            await client.close()

    run(body, timeout_s=90.0)
