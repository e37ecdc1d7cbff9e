"""GrpcRpcService: the RpcService of JobManager and TaskManager processes, over gRPC (grpc.aio).

Same contract as ``InProcRpcService``, so Dispatcher, ResourceManager, JobMaster and TaskExecutor
run on it unchanged:

- ``await start()`` binds the server (``port=0``: an ephemeral port, see ``.port``).
- ``register(endpoint)`` returns ``grpc://<advertised_host or bind_host>:<port>/<endpoint_id>``.
- ``await connect(address, GatewayType)`` checks (one round trip) that a running endpoint with the
  gateway's methods lives there and returns a proxy whose attributes are the Protocol's methods.
  Each call has a deadline (the per-call ``timeout=`` keyword, the ``connect`` timeout, or the
  service's ``timeout_s``) and raises ``RpcTimeout`` when it passes; ``@oneway`` methods are sent
  in the background and return ``None`` at once; an address without a running endpoint, or a peer
  that is down, raises ``RecipientUnreachable``.
- Addresses served by this same service are called in process (no network, no serialization),
  like Flink's local actor calls; the behaviour is exactly ``InProcRpcService``'s.

One generic gRPC method ``/flintlock.Rpc/Call`` (bytes in, bytes out) carries every call; ``codec``
defines the bytes. Authentication with the cluster secret has two levels (``auth``): every call's
metadata carries a call token that ``call_auth.CallAuthInterceptor`` checks before the request
body is read (a peer without the secret gets ``UNAUTHENTICATED`` and cannot make this process
buffer a body), and every request and reply body carries an HMAC tag that is checked before
anything is unpickled. Bodies are bounded by ``max_message_bytes`` (``rpc.framesize``) on both
sides; a larger one fails with ``CodecError``. A handler's exception comes back as the same class
when it is a message-constructible ``FlintlockException`` subclass (``FencingTokenMismatch``,
``SlotAllocationException``, ``JobSubmissionException``, ...), otherwise as ``RemoteError``.

Ordering: calls from one process to one endpoint are independent gRPC calls; unlike in process,
two calls started one after the other (including ``@oneway`` ones) may be handled in either order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import grpc
import grpc.aio

from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.net.ssl_utils import PemFiles
from flintlock.runtime.rpc.auth import RpcAuthenticationError, RpcAuthenticator, resolve_secret
from flintlock.runtime.rpc.call_auth import CallAuthInterceptor, call_metadata
from flintlock.runtime.rpc.codec import (
    MAX_MESSAGE_BYTES,
    CodecError,
    ReplyStatus,
    RequestKind,
    RpcReply,
    RpcRequest,
    decode_reply,
    decode_request_payload,
    encode_reply,
    encode_request,
    verify_request,
)
from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.rpc.exceptions import (
    EndpointNotStartedError,
    RecipientUnreachable,
    RpcException,
    RpcTimeout,
)
from flintlock.runtime.rpc.service import DEFAULT_TIMEOUT_S, GatewayProxy, gateway_methods

if TYPE_CHECKING:
    from typing_extensions import TypeForm  # gateway Protocols (see rpc.service)

__all__ = ["RPC_METHOD", "GrpcRpcService", "format_address", "parse_address"]

log = logging.getLogger(__name__)

G = TypeVar("G")

RPC_METHOD = "/flintlock.Rpc/Call"
"""The one gRPC method of the transport (unary, bytes in and out)."""

_SCHEME = "grpc://"
_OFFLOAD_BYTES = 1 << 20  # decode bodies above 1 MiB in a worker thread
_SHUTDOWN_GRACE_S = 1.5
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

_MAX_METADATA_BYTES = 16 * 1024  # largest request headers accepted (a call token is ~115 bytes)
_MIN_MESSAGE_BYTES = 1024
_MAX_MESSAGE_LIMIT = 2**31 - 1 - 1024  # gRPC's limits are int32
_SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.so_reuseport", 0),  # a taken port is an error
    ("grpc.max_metadata_size", _MAX_METADATA_BYTES),
]
_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    # reconnect quickly to a peer that comes back (e.g. a TaskManager started before its JobManager)
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def _size_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    # a little slack above the codec's own check (which counts the whole body)
    return [("grpc.max_send_message_length", max_message_bytes + 1024),
            ("grpc.max_receive_message_length", max_message_bytes + 1024)]


def _credentials(tls: PemFiles | None) -> tuple[grpc.ServerCredentials | None,
                                                 grpc.ChannelCredentials | None]:
    """Mutual-TLS server and channel credentials from ``tls`` (None, None without TLS)."""
    if tls is None:
        return None, None
    chain, key = tls.certificate_chain_and_key()
    roots = tls.truststore_bytes()
    return (grpc.ssl_server_credentials([(key, chain)], root_certificates=roots,
                                        require_client_auth=True),
            grpc.ssl_channel_credentials(root_certificates=roots, private_key=key,
                                         certificate_chain=chain))


def format_address(host: str, port: int, endpoint_id: str = "") -> str:
    """``grpc://host:port/endpoint_id`` (IPv6 hosts in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{_SCHEME}{shown}:{port}/{endpoint_id}"


def parse_address(address: str) -> tuple[str, int, str]:
    """Split ``grpc://host:port/endpoint_id`` into ``(host, port, endpoint_id)``.

    ``endpoint_id`` is everything after the first ``/`` that follows ``host:port``.

    Raises:
        ValueError: ``address`` is not of that form.
    """
    if not address.startswith(_SCHEME):
        raise ValueError(f"{address!r} is not a {_SCHEME}host:port/endpoint address")
    hostport, sep, endpoint_id = address[len(_SCHEME):].partition("/")
    host, colon, port_text = hostport.rpartition(":")
    if not sep or not endpoint_id or not colon or not host or not port_text.isdigit():
        raise ValueError(f"{address!r} is not a {_SCHEME}host:port/endpoint address")
    return host.strip("[]"), int(port_text), endpoint_id


def _target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_rpc_method(endpoint: RpcEndpoint, name: str) -> bool:
    """Handlers are public methods of the endpoint that the RpcEndpoint base does not define."""
    if not name or name.startswith("_") or hasattr(RpcEndpoint, name):
        return False
    return callable(getattr(endpoint, name, None))


class _GrpcGateway(GatewayProxy):
    """Proxy whose attributes are the gateway Protocol's methods, local or over gRPC."""

    def __init__(self, service: GrpcRpcService, address: str, gateway_type: TypeForm[Any],
                 timeout_s: float, local: bool, fencing_token: str | None) -> None:
        super().__init__(address, gateway_type, timeout_s, fencing_token)
        host, port, endpoint_id = parse_address(address)
        self._service = service
        self._target = _target(host, port)
        self._endpoint_id = endpoint_id
        self._local = local

    def _make_call(self, name: str, is_oneway: bool) -> Callable[..., Any]:
        what = f"{self._gateway_name}.{name}"

        async def call(*args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
            timeout_s = timeout or self._timeout_s
            if self._local:
                return await self._service._call_local(
                    self._address, self._endpoint_id, name, is_oneway, args, kwargs, timeout_s,
                    what, self._fencing_token)
            kind = RequestKind.ONEWAY if is_oneway else RequestKind.CALL
            request = RpcRequest(kind, self._endpoint_id, name, args, kwargs,
                                 self._fencing_token)
            if is_oneway:
                self._service._send_oneway(self._target, self._address, request, timeout_s, what)
                return None
            return await self._service._invoke(self._target, self._address, request, timeout_s,
                                               what)

        return call

    def __repr__(self) -> str:
        return f"<{self._gateway_name} at {self._address}>"


class GrpcRpcService:
    """Endpoints of one process, served and reached over gRPC.

    Args:
        bind_host: interface the server listens on (``127.0.0.1`` unless configured; ``0.0.0.0``
            for all interfaces).
        port: TCP port; ``0`` picks a free one (read it from ``.port`` after ``start()``).
        secret: the cluster secret (``security.cluster.secret``); every peer must use the same.
            ``None`` is allowed only for a loopback ``bind_host``: the service then uses a random
            secret generated once per process, so only services of this process can talk to it
            (same-process tests).
        advertised_host: the host put into registered addresses (what peers connect to); defaults
            to ``bind_host``.
        timeout_s: default deadline of a call (``rpc.ask-timeout``), seconds.
        tls: mutual TLS material (``security.ssl.internal.*``, ``net.ssl_utils``): the server
            requires client certificates chaining to its truststore and channels verify the
            server's; None: plain TCP (the cluster secret still authenticates every call).
        max_message_bytes: largest request or reply body this service sends or accepts, bytes
            (``rpc.framesize``, Flink's ``pekko.framesize``); only callers whose call token
            verified can make the server read a body at all.

    Raises:
        ValueError: ``secret`` is ``None`` (or empty) and ``bind_host`` is not a loopback address
            (the message says to set ``security.cluster.secret``), or ``max_message_bytes`` is
            below 1 KiB or above 2 GiB - 1 KiB - 1.
    """

    def __init__(
        self,
        bind_host: str = "127.0.0.1",
        port: int = 0,
        *,
        secret: str | None,
        advertised_host: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        tls: PemFiles | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"invalid RPC port {port}")
        if not _MIN_MESSAGE_BYTES <= max_message_bytes <= _MAX_MESSAGE_LIMIT:
            raise ValueError(f"rpc.framesize must be between {_MIN_MESSAGE_BYTES} and "
                             f"{_MAX_MESSAGE_LIMIT} bytes, not {max_message_bytes}")
        self._max_message_bytes = max_message_bytes
        self._server_credentials, self._channel_credentials = _credentials(tls)
        self._auth = RpcAuthenticator(resolve_secret(secret, bind_host))
        self._bind_host = bind_host
        self._requested_port = port
        self._advertised_host = advertised_host or bind_host
        self._timeout_s = timeout_s
        self._port: int | None = None
        self._server: grpc.aio.Server | None = None
        self._endpoints: dict[str, RpcEndpoint] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._closed = False
        local = {self._advertised_host, bind_host}
        if local & _LOOPBACK_NAMES or bind_host in ("0.0.0.0", "::", ""):
            local |= _LOOPBACK_NAMES
        self._local_hosts = frozenset(h.strip("[]") for h in local)

    # ---- life cycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind and start the gRPC server.

        Raises:
            RuntimeError: the service was closed, or the address cannot be bound (e.g. the port
                is taken).
        """
        if self._closed:
            raise RuntimeError("GrpcRpcService is closed")
        if self._server is not None:
            return
        server = grpc.aio.server(
            interceptors=(CallAuthInterceptor(self._auth),),  # before any body is read
            options=[*_SERVER_OPTIONS, *_size_options(self._max_message_bytes)],
        )
        handler = grpc.unary_unary_rpc_method_handler(self._handle)  # bytes in/out: no serializers
        service, _, method = RPC_METHOD.strip("/").partition("/")
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {method: handler}),)
        )
        target = _target(self._bind_host, self._requested_port)
        try:
            if self._server_credentials is None:
                bound = server.add_insecure_port(target)
            else:
                bound = server.add_secure_port(target, self._server_credentials)
        except RuntimeError as exc:
            raise RuntimeError(f"cannot bind the RPC server to {target}: {exc}") from exc
        if not bound:
            raise RuntimeError(f"cannot bind the RPC server to {target}")
        await server.start()
        self._server = server
        self._port = bound
        log.info("RPC service listening on %s (advertised as %s)", _target(self._bind_host, bound),
                 format_address(self._advertised_host, bound))

    async def close(self) -> None:
        """Stop the server (in-flight calls get 1.5 s), cancel one-way sends, close channels.

        Idempotent; afterwards ``connect`` and remote calls raise ``RecipientUnreachable``.
        """
        self._closed = True
        pending = list(self._background)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        if self._server is not None:
            await self._server.stop(_SHUTDOWN_GRACE_S)
            self._server = None
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
        self._endpoints.clear()

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: before ``start()``.
        """
        if self._port is None:
            raise RuntimeError("GrpcRpcService is not started: await start() first")
        return self._port

    @property
    def address_prefix(self) -> str:
        """``grpc://<advertised host>:<port>/`` (after ``start()``)."""
        return format_address(self._advertised_host, self.port)

    # ---- endpoints -------------------------------------------------------------------------------

    def register(self, endpoint: RpcEndpoint) -> str:
        """Serve ``endpoint``; returns its address (also stored in ``endpoint.address``).

        Raises:
            RuntimeError: the service is not started (the port is not known yet).
            ValueError: another endpoint with the same id is registered.
        """
        if self._port is None:
            raise RuntimeError("GrpcRpcService is not started: await start() before creating "
                               "endpoints")
        current = self._endpoints.get(endpoint.endpoint_id)
        if current is not None and current is not endpoint:
            raise ValueError(f"an endpoint is already registered as {endpoint.endpoint_id!r}")
        self._endpoints[endpoint.endpoint_id] = endpoint
        endpoint.address = format_address(self._advertised_host, self._port, endpoint.endpoint_id)
        return endpoint.address

    def unregister(self, endpoint: RpcEndpoint) -> None:
        if self._endpoints.get(endpoint.endpoint_id) is endpoint:
            del self._endpoints[endpoint.endpoint_id]

    def lookup(self, address: str) -> RpcEndpoint:
        """The running endpoint of this service at ``address``.

        Raises:
            RecipientUnreachable: none is registered there, or it is not running.
        """
        try:
            host, port, endpoint_id = parse_address(address)
        except ValueError as exc:
            raise RecipientUnreachable(str(exc)) from None
        if not self._is_local(host, port):
            raise RecipientUnreachable(f"{address} is not served by this RPC service")
        return self._local_endpoint(endpoint_id, address)

    def _local_endpoint(self, endpoint_id: str, address: str) -> RpcEndpoint:
        endpoint = self._endpoints.get(endpoint_id)
        if endpoint is None or not endpoint.is_running:
            raise RecipientUnreachable(f"no running endpoint at {address}")
        return endpoint

    def _is_local(self, host: str, port: int) -> bool:
        return self._port is not None and port == self._port and host in self._local_hosts

    # ---- client side -----------------------------------------------------------------------------

    async def connect(
        self, address: str, gateway_type: TypeForm[G], timeout_s: float | None = None,
        *, fencing_token: str | None = None,
    ) -> G:
        """A gateway to the endpoint at ``address``.

        Args:
            address: ``grpc://host:port/endpoint_id``.
            gateway_type: the gateway Protocol; the proxy exposes exactly its methods.
            timeout_s: default deadline of the proxy's calls and of this check (seconds).
            fencing_token: carried by every call (``FencedRpcEndpoint``); None: unfenced.

        Raises:
            RecipientUnreachable: the address is malformed, the peer is down, or no running
                endpoint is registered there.
            RpcTimeout: the peer did not answer the check in time.
            RpcAuthenticationError: the peer uses another cluster secret.
            RpcException: the endpoint there lacks some of the gateway's methods.
        """
        try:
            host, port, endpoint_id = parse_address(address)
        except ValueError as exc:
            raise RecipientUnreachable(str(exc)) from None
        timeout = timeout_s or self._timeout_s
        local = self._is_local(host, port)
        if local:
            self._local_endpoint(endpoint_id, address)
        else:
            methods = tuple(sorted(gateway_methods(gateway_type)))
            request = RpcRequest(RequestKind.HANDSHAKE, endpoint_id, gateway_type.__name__, methods)
            await self._invoke(_target(host, port), address, request, timeout,
                               f"connect({gateway_type.__name__})")
        return cast(G, _GrpcGateway(self, address, gateway_type, timeout, local, fencing_token))

    async def _call_local(self, address: str, endpoint_id: str, method: str, is_oneway: bool,
                          args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float,
                          what: str, fencing_token: str | None) -> Any:
        """Exactly ``InProcRpcService``'s call: straight into the endpoint's mailbox."""
        endpoint = self._local_endpoint(endpoint_id, address)
        if is_oneway:
            endpoint.deliver_oneway(method, args, kwargs, fencing_token)
            return None
        try:
            return await asyncio.wait_for(
                endpoint.dispatch(method, args, kwargs, fencing_token), timeout_s)
        except asyncio.TimeoutError:
            raise RpcTimeout(f"{what} to {address} timed out after {timeout_s:.1f}s") from None

    def _channel(self, target: str) -> grpc.aio.Channel:
        if self._closed:
            raise RecipientUnreachable("the RPC service is closed")
        channel = self._channels.get(target)
        if channel is None:
            options = [*_CHANNEL_OPTIONS, *_size_options(self._max_message_bytes)]
            if self._channel_credentials is None:
                channel = grpc.aio.insecure_channel(target, options=options)
            else:
                channel = grpc.aio.secure_channel(target, self._channel_credentials,
                                                  options=options)
            self._channels[target] = channel
        return channel

    async def _invoke(self, target: str, address: str, request: RpcRequest, timeout_s: float,
                      what: str) -> Any:
        """Send ``request`` and return the handler's result (or raise its error)."""
        body, tag = encode_request(self._auth, request, self._max_message_bytes)
        return await self._exchange(target, address, body, tag, timeout_s, what)

    async def _exchange(self, target: str, address: str, body: bytes, tag: bytes,
                        timeout_s: float, what: str) -> Any:
        call = self._channel(target).unary_unary(RPC_METHOD)
        try:
            reply_body = await call(body, timeout=timeout_s,
                                    metadata=call_metadata(self._auth, RPC_METHOD))
        except grpc.aio.AioRpcError as err:
            raise _call_error(err, what, address, timeout_s, self._max_message_bytes) from None
        if len(reply_body) > _OFFLOAD_BYTES:
            reply = await run_blocking(decode_reply, self._auth, tag, reply_body)
        else:
            reply = decode_reply(self._auth, tag, reply_body)
        if reply.status is ReplyStatus.OK:
            return reply.value
        if reply.status is ReplyStatus.UNREACHABLE:
            raise RecipientUnreachable(reply.message)
        assert reply.error is not None
        raise reply.error.to_exception()

    def _send_oneway(self, target: str, address: str, request: RpcRequest, timeout_s: float,
                     what: str) -> None:
        """Encode now (an unencodable argument raises ``CodecError`` here); send in background."""
        body, tag = encode_request(self._auth, request, self._max_message_bytes)
        if self._closed:
            return

        async def send() -> None:
            try:
                await self._exchange(target, address, body, tag, timeout_s, what)
            except asyncio.CancelledError:
                raise
            except RpcAuthenticationError as exc:
                log.warning("one-way %s to %s was rejected: %s", what, address, exc)
            except Exception as exc:
                log.debug("one-way %s to %s failed: %s", what, address, exc)

        task = asyncio.get_running_loop().create_task(send(), name=f"rpc-oneway-{request.method}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- server side -----------------------------------------------------------------------------

    async def _handle(self, body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        # the call token in the metadata was verified (CallAuthInterceptor) before ``body`` was read
        try:
            tag, payload = verify_request(self._auth, body)
        except RpcAuthenticationError as exc:
            log.warning("Rejected an RPC call from %s: %s", context.peer(), exc)
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "the call is not signed with this cluster's secret (security.cluster.secret "
                "differs or is unset); nothing was decoded",
            )
            raise  # unreachable: abort raises
        try:
            if len(payload) > _OFFLOAD_BYTES:
                request = await run_blocking(decode_request_payload, payload)
            else:
                request = decode_request_payload(payload)
        except CodecError as exc:
            log.warning("Cannot decode an RPC call from %s: %s", context.peer(), exc)
            return encode_reply(self._auth, tag, RpcReply.failed(exc), self._max_message_bytes)
        reply = await self._serve(request)
        return encode_reply(self._auth, tag, reply, self._max_message_bytes)

    async def _serve(self, request: RpcRequest) -> RpcReply:
        endpoint = self._endpoints.get(request.endpoint_id)
        if endpoint is None or not endpoint.is_running:
            where = format_address(self._advertised_host, self.port, request.endpoint_id)
            return RpcReply.unreachable(f"no running endpoint at {where}")
        if request.kind is RequestKind.HANDSHAKE:
            missing = [m for m in request.args if not _is_rpc_method(endpoint, str(m))]
            if missing:
                return RpcReply.failed(RpcException(
                    f"endpoint {request.endpoint_id} ({type(endpoint).__name__}) does not "
                    f"implement {request.method} methods {missing}"
                ))
            return RpcReply.ok(None)
        method = request.method
        if not _is_rpc_method(endpoint, method):
            return RpcReply.failed(RpcException(
                f"{type(endpoint).__name__} {request.endpoint_id} has no RPC method {method!r}"
            ))
        if request.kind is RequestKind.ONEWAY:
            endpoint.deliver_oneway(method, request.args, request.kwargs, request.fencing_token)
            return RpcReply.ok(None)
        try:
            value = await endpoint.dispatch(method, request.args, request.kwargs,
                                            request.fencing_token)
        except EndpointNotStartedError as exc:
            if not endpoint.is_running:
                return RpcReply.unreachable(f"endpoint {request.endpoint_id} stopped: {exc}")
            return RpcReply.failed(exc)
        except Exception as exc:
            log.debug("RPC %s.%s failed: %r", request.endpoint_id, method, exc)
            return RpcReply.failed(exc)
        return RpcReply.ok(value)

    def __repr__(self) -> str:
        port = self._port if self._port is not None else self._requested_port
        where = _target(self._bind_host, port)
        return f"GrpcRpcService({where}, {len(self._endpoints)} endpoint(s))"


def _call_error(err: grpc.aio.AioRpcError, what: str, address: str, timeout_s: float,
                limit: int) -> Exception:
    """The flintlock exception for a failed gRPC call."""
    code, details = err.code(), err.details()
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RpcTimeout(f"{what} to {address} timed out after {timeout_s:.1f}s")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                grpc.StatusCode.UNIMPLEMENTED):
        return RecipientUnreachable(f"{what}: {address} is unreachable ({code.name}: {details})")
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return RpcAuthenticationError(
            f"{what}: {address} rejected the call as unauthenticated ({details}). Set the same "
            "security.cluster.secret on every JobManager and TaskManager"
        )
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return CodecError(f"{what} to {address}: message too large ({details}); this process's "
                          f"limit is {limit} bytes, the peer's may be lower (rpc.framesize)")
    return RpcException(f"{what} to {address} failed: {code.name}: {details}")
