"""Wire format of the gRPC RPC transport: the only module that knows how calls look as bytes.

One gRPC method (``/flintlock.Rpc/Call``, bytes in, bytes out) carries every call. Bodies::

    request body = TAG_req (32 bytes) || P_req
        P_req   = pickle(("flintlock-rpc", 1, kind, endpoint_id, method, args, kwargs))
        kind    = "call" | "oneway" | "handshake"  (handshake: args = the gateway's method names)
        TAG_req = HMAC-SHA256(K, "flintlock-rpc/1 request\\0" || P_req)
    reply body   = TAG_rep (32 bytes) || P_rep
        P_rep   = pickle(("ok", value))
                | pickle(("error", module, qualname, message, traceback_text))
                | pickle(("unreachable", message))
        TAG_rep = HMAC-SHA256(K, "flintlock-rpc/1 reply\\0" || TAG_req || P_rep)
    K = HMAC-SHA256(security.cluster.secret, "flintlock rpc key v1")      (see ``auth.py``)

Every call also carries a call token in its metadata (``x-flintlock-auth``, see ``auth.py`` and
``call_auth.py``), which the server checks before it reads the body; bodies are bounded by
``rpc.framesize`` (``MAX_MESSAGE_BYTES`` by default) on both sides.

Rules:
- A body is unpickled only after its tag verified (``hmac.compare_digest``): nothing is unpickled
  from a peer that does not know the cluster secret.
- Unpickling is restricted (defense in depth): only classes of ``flintlock.*`` modules, the safe
  builtin types (``int``, ``str``, ``bytes``, ``tuple``, ``dict``, ``set``, ...) and classes of
  ``collections``, ``enum``, ``datetime``, ``decimal``, ``uuid`` and ``pathlib`` are resolved;
  functions and every other global are refused with ``CodecError``. Gateway messages are frozen
  dataclasses of ``flintlock`` modules, so they pass; user code travels as opaque ``bytes``
  (``invokable_payload``) and is never unpickled here.
- Exceptions never travel pickled: a handler's exception becomes ``("error", module, qualname,
  message, traceback)``; ``WireError.to_exception`` turns it back into an exception on the caller
  side (same class for message-constructible ``FlintlockException`` subclasses, else
  ``RemoteError``).
"""

from __future__ import annotations

import enum
import importlib
import io
import pickle
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, cast

from flintlock.exceptions import FlintlockException
from flintlock.runtime.rpc.auth import MAC_SIZE, RpcAuthenticationError, RpcAuthenticator
from flintlock.runtime.rpc.exceptions import RemoteError, RpcException

__all__ = [
    "MAX_MESSAGE_BYTES",
    "WIRE_VERSION",
    "CodecError",
    "ReplyStatus",
    "RequestKind",
    "RestrictedUnpickler",
    "RpcReply",
    "RpcRequest",
    "WireError",
    "decode_reply",
    "decode_request",
    "decode_request_payload",
    "dumps",
    "encode_reply",
    "encode_request",
    "loads",
    "verify_request",
]

WIRE_VERSION = 2
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Default largest request or reply body (bytes), the default of ``rpc.framesize``; a
``GrpcRpcService`` sets gRPC's send/receive limits to its configured value."""

_MAGIC = "flintlock-rpc"
_PICKLE_PROTOCOL = 5

_SAFE_BUILTINS = frozenset({
    "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int", "list",
    "range", "set", "slice", "str", "tuple",
})
_SAFE_STDLIB_MODULES = frozenset({"collections", "datetime", "decimal", "enum", "pathlib", "uuid"})


class CodecError(RpcException):
    """A call or reply could not be encoded or decoded (unpicklable value, refused class, ...)."""


class RequestKind(enum.Enum):
    """What a request asks for."""

    CALL = "call"  #: run the handler and reply with its result or error
    ONEWAY = "oneway"  #: queue the handler in the endpoint's mailbox and reply at once
    HANDSHAKE = "handshake"  #: check that the endpoint runs and has the gateway's methods


class ReplyStatus(enum.Enum):
    """How a request ended."""

    OK = "ok"  #: ``value`` holds the handler's result
    ERROR = "error"  #: ``error`` holds the handler's (or the server's) exception
    UNREACHABLE = "unreachable"  #: no running endpoint with that id; ``message`` says which


@dataclass(frozen=True, slots=True)
class RpcRequest:
    """A decoded request.

    Attributes:
        kind: call, oneway or handshake.
        endpoint_id: target endpoint within the server.
        method: handler name (for a handshake: the gateway's name, for messages).
        args: positional arguments (for a handshake: the gateway's method names).
        kwargs: keyword arguments.
        fencing_token: the caller's token for a fenced target (Flink's ``FencedMessage``): the
            leader id of the ResourceManager / Dispatcher or the JobMasterId it believes in;
            ``None`` from an unfenced gateway.
    """

    kind: RequestKind
    endpoint_id: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    fencing_token: str | None = None


@dataclass(frozen=True, slots=True)
class WireError:
    """An exception as it crosses the wire: class location, message and traceback text."""

    module: str
    qualname: str
    message: str
    traceback: str = ""

    @property
    def type_name(self) -> str:
        """``module.qualname`` (just ``qualname`` for builtins), as ``SerializedError`` names it."""
        return self.qualname if self.module == "builtins" else f"{self.module}.{self.qualname}"

    @classmethod
    def from_exception(cls, exc: BaseException) -> WireError:
        exc_type = type(exc)
        text = "".join(traceback.format_exception(exc_type, exc, exc.__traceback__))
        return cls(exc_type.__module__, exc_type.__qualname__, str(exc), text)

    def to_exception(self) -> Exception:
        """The exception to raise on the caller side.

        The remote class itself when it is a ``FlintlockException`` subclass defined in a loaded
        ``flintlock`` module whose constructor takes the message alone and reproduces it
        (``str(cls(message)) == message``); such an exception gets a ``remote_traceback``
        attribute. Otherwise a ``RemoteError(type_name, message, traceback)``. Nothing is imported
        or unpickled to decide this.
        """
        cls = _remote_exception_class(self.module, self.qualname)
        if cls is not None:
            try:
                exc = cls(self.message)
            except Exception:
                exc = None
            if exc is not None and str(exc) == self.message:
                exc.remote_traceback = self.traceback  # type: ignore[attr-defined]
                return exc
        return RemoteError(self.type_name, self.message, self.traceback)


@dataclass(frozen=True, slots=True)
class RpcReply:
    """A decoded reply: ``value`` when OK, ``error`` when ERROR, ``message`` when UNREACHABLE."""

    status: ReplyStatus
    value: Any = None
    error: WireError | None = None
    message: str = ""

    @classmethod
    def ok(cls, value: Any) -> RpcReply:
        return cls(ReplyStatus.OK, value)

    @classmethod
    def failed(cls, exc: BaseException) -> RpcReply:
        return cls(ReplyStatus.ERROR, error=WireError.from_exception(exc))

    @classmethod
    def unreachable(cls, message: str) -> RpcReply:
        return cls(ReplyStatus.UNREACHABLE, message=message)


# ---- restricted pickle ---------------------------------------------------------------------------


def _is_flintlock_module(module: str) -> bool:
    return module == "flintlock" or module.startswith("flintlock.")


def _refuse(module: str, name: str, why: str) -> CodecError:
    return CodecError(
        f"refusing to unpickle {module}.{name}: {why}. The RPC codec only loads classes of "
        "flintlock modules, safe builtin types and classes of collections, enum, datetime, "
        "decimal, uuid and pathlib; send anything else (user objects) as opaque bytes"
    )


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only allow-listed classes (never functions or modules).

    Allowed: classes whose ``__module__`` is ``flintlock`` or ``flintlock.*`` (looked up in a
    ``flintlock`` module, which is imported if needed); the builtin types ``bool``, ``int``,
    ``float``, ``complex``, ``str``, ``bytes``, ``bytearray``, ``tuple``, ``list``, ``dict``,
    ``set``, ``frozenset``, ``slice``, ``range``; classes defined in ``collections``, ``enum``,
    ``datetime``, ``decimal``, ``uuid`` and ``pathlib``.

    Raises:
        CodecError: from ``load()`` for any other global (e.g. ``os.system``, ``builtins.eval``,
            ``subprocess.Popen``, a class re-exported by a flintlock module from elsewhere).
    """

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins":
            if name not in _SAFE_BUILTINS:
                raise _refuse(module, name, "not a safe builtin type")
        elif not (_is_flintlock_module(module) or module in _SAFE_STDLIB_MODULES):
            raise _refuse(module, name, "module not allowed")
        try:
            obj: Any = importlib.import_module(module)
        except ImportError as exc:
            raise _refuse(module, name, f"module cannot be imported ({exc})") from None
        for part in name.split("."):
            if not part or part.startswith("__"):
                raise _refuse(module, name, "not a class name")
            obj = getattr(obj, part, None)
            if not isinstance(obj, type):
                raise _refuse(module, name, "not a class")
        owner = obj.__module__
        if module == "builtins" or module in _SAFE_STDLIB_MODULES:
            ok = owner == module
        else:
            ok = _is_flintlock_module(owner)
        if not ok:
            raise _refuse(module, name, f"class is defined in {owner!r}")
        return obj


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` (protocol 5).

    Raises:
        CodecError: ``obj`` holds something pickle cannot serialise (a lock, a lambda, ...).
    """
    try:
        return pickle.dumps(obj, protocol=_PICKLE_PROTOCOL)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise CodecError(f"cannot encode {type(obj).__name__}: {why}") from exc


def loads(data: bytes | memoryview) -> Any:
    """Unpickle ``data`` with ``RestrictedUnpickler``.

    Raises:
        CodecError: a refused class, or bytes that are not a valid pickle.
    """
    try:
        return RestrictedUnpickler(io.BytesIO(data)).load()
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"cannot decode RPC payload: {type(exc).__name__}: {exc}") from exc


# ---- requests and replies ----------------------------------------------------------------------


def encode_request(auth: RpcAuthenticator, request: RpcRequest,
                   limit: int = MAX_MESSAGE_BYTES) -> tuple[bytes, bytes]:
    """Encode and tag a request.

    Args:
        auth: signs the body.
        request: what to send.
        limit: largest body in bytes (the sender's ``rpc.framesize``).

    Returns:
        ``(body, tag)``; keep ``tag`` to verify the reply with ``decode_reply``.

    Raises:
        CodecError: an argument cannot be pickled, or the body exceeds ``limit`` bytes.
    """
    try:
        payload = dumps((_MAGIC, WIRE_VERSION, request.kind.value, request.endpoint_id,
                         request.method, tuple(request.args), dict(request.kwargs),
                         request.fencing_token))
    except CodecError as exc:
        raise CodecError(f"cannot encode the arguments of {request.method}: {exc}") from exc
    if len(payload) + MAC_SIZE > limit:
        raise CodecError(f"the request {request.method} is {len(payload) + MAC_SIZE} bytes, "
                         f"above the limit of {limit} bytes (rpc.framesize)")
    tag = auth.request_tag(payload)
    return tag + payload, tag


def verify_request(auth: RpcAuthenticator, body: bytes) -> tuple[bytes, memoryview]:
    """Check a request body's tag without decoding anything.

    Returns:
        ``(tag, payload)``; ``tag`` keys the reply, ``payload`` goes to ``decode_request_payload``.

    Raises:
        RpcAuthenticationError: no tag, or a tag that does not verify.
    """
    if len(body) < MAC_SIZE:
        raise RpcAuthenticationError("the request carries no authentication tag")
    view = memoryview(body)
    tag, payload = bytes(view[:MAC_SIZE]), view[MAC_SIZE:]
    if not auth.verify_request(tag, payload):
        raise RpcAuthenticationError("the request's authentication tag does not match the cluster "
                                     "secret")
    return tag, payload


def decode_request_payload(payload: bytes | memoryview) -> RpcRequest:
    """Decode a verified request payload (see ``verify_request``).

    Raises:
        CodecError: the payload is malformed, of another wire version, or refers to a refused
            class.
    """
    decoded = loads(payload)
    if not isinstance(decoded, tuple) or len(decoded) < 2 or decoded[0] != _MAGIC:
        raise CodecError("not a flintlock RPC request")
    if decoded[1] != WIRE_VERSION:
        raise CodecError(f"unsupported RPC wire version {decoded[1]!r} (this process speaks "
                         f"{WIRE_VERSION}); run the same flintlock version on every process")
    if len(decoded) != 8:
        raise CodecError("not a flintlock RPC request")
    _, _, kind, endpoint_id, method, args, kwargs, token = decoded
    if not (isinstance(endpoint_id, str) and isinstance(method, str) and isinstance(args, tuple)
            and isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs)
            and (token is None or isinstance(token, str))):
        raise CodecError("malformed flintlock RPC request")
    try:
        request_kind = RequestKind(kind)
    except ValueError:
        raise CodecError(f"unknown RPC request kind {kind!r}") from None
    return RpcRequest(request_kind, endpoint_id, method, args, kwargs, token)


def decode_request(auth: RpcAuthenticator, body: bytes) -> tuple[RpcRequest, bytes]:
    """Verify, then decode a request body (``verify_request`` + ``decode_request_payload``).

    Returns:
        ``(request, tag)``; ``tag`` keys the reply.

    Raises:
        RpcAuthenticationError: no tag, or a tag that does not verify (nothing was unpickled).
        CodecError: the payload is malformed or refers to a refused class.
    """
    tag, payload = verify_request(auth, body)
    return decode_request_payload(payload), tag


def encode_reply(auth: RpcAuthenticator, request_tag: bytes, reply: RpcReply,
                 limit: int = MAX_MESSAGE_BYTES) -> bytes:
    """Encode and tag a reply to the request tagged ``request_tag``.

    A result that cannot be pickled (or whose body would exceed ``limit`` bytes, the sender's
    ``rpc.framesize``) becomes an ERROR reply carrying a ``CodecError``, so the caller learns why
    instead of timing out.
    """
    if reply.status is ReplyStatus.OK:
        try:
            payload = dumps(("ok", reply.value))
            if len(payload) + MAC_SIZE > limit:
                raise CodecError(f"the reply is {len(payload) + MAC_SIZE} bytes, above the "
                                 f"limit of {limit} bytes (rpc.framesize)")
        except CodecError as exc:
            payload = _encode_error(WireError.from_exception(
                CodecError(f"cannot encode the reply: {exc}")))
    elif reply.status is ReplyStatus.ERROR:
        assert reply.error is not None
        payload = _encode_error(reply.error)
    else:
        payload = dumps(("unreachable", reply.message))
    return auth.reply_tag(request_tag, payload) + payload


def _encode_error(error: WireError) -> bytes:
    return dumps(("error", error.module, error.qualname, error.message, error.traceback))


def decode_reply(auth: RpcAuthenticator, request_tag: bytes, body: bytes) -> RpcReply:
    """Verify and decode a reply body.

    Raises:
        RpcAuthenticationError: the reply's tag does not verify (the peer does not know the
            secret, or the reply belongs to another request); nothing was unpickled.
        CodecError: the payload is malformed or refers to a refused class.
    """
    if len(body) < MAC_SIZE:
        raise RpcAuthenticationError("the reply carries no authentication tag")
    view = memoryview(body)
    tag, payload = bytes(view[:MAC_SIZE]), view[MAC_SIZE:]
    if not auth.verify_reply(request_tag, tag, payload):
        raise RpcAuthenticationError("the reply's authentication tag does not match the cluster "
                                     "secret")
    decoded = loads(payload)
    if isinstance(decoded, tuple) and decoded:
        if decoded[0] == "ok" and len(decoded) == 2:
            return RpcReply.ok(decoded[1])
        if (decoded[0] == "error" and len(decoded) == 5
                and all(isinstance(x, str) for x in decoded[1:])):
            return RpcReply(ReplyStatus.ERROR, error=WireError(*decoded[1:]))
        if decoded[0] == "unreachable" and len(decoded) == 2 and isinstance(decoded[1], str):
            return RpcReply.unreachable(decoded[1])
    raise CodecError("not a flintlock RPC reply")


# ---- exceptions back to classes ----------------------------------------------------------------


def _remote_exception_class(module: str, qualname: str) -> type[Exception] | None:
    """The ``FlintlockException`` subclass ``module.qualname`` if this process has loaded it."""
    if not _is_flintlock_module(module):
        return None
    obj: Any = sys.modules.get(module)
    if obj is None:
        return None
    for part in qualname.split("."):
        if not part or part.startswith("_"):
            return None
        obj = getattr(obj, part, None)
        if not isinstance(obj, type):
            return None
    if (not issubclass(obj, FlintlockException) or obj.__module__ != module
            or obj is RemoteError):
        return None
    return cast("type[Exception]", obj)
