"""Authentication of gRPC RPC peers with the cluster secret (``security.cluster.secret``).

Two levels, both keyed with ``K = HMAC-SHA256(secret, "flintlock rpc key v1")``:

1. **Call token (metadata, checked before any body is read).** Every gRPC call carries the header
   ``x-flintlock-auth: v1.<unix ms>.<nonce hex>.<HMAC-SHA256 hex>`` (``call_token``). The server's
   interceptor (``call_auth.CallAuthInterceptor``) checks it from the call's metadata alone; a call
   without a valid token is answered ``UNAUTHENTICATED`` without reading its request message, so a
   peer that does not know the secret cannot make the server buffer a body (Flink's RPC endpoints
   likewise authenticate the connection before accepting frames). A token is accepted while its
   timestamp is within ``CALL_TOKEN_MAX_SKEW_S`` (5 minutes) of the receiver's clock, so the
   clocks of JobManager and TaskManager hosts must agree within 5 minutes (NTP).
2. **Payload tags (integrity, checked before anything is unpickled).** Every request and every
   reply carries an HMAC-SHA256 tag over its payload. A receiver verifies the tag with
   ``hmac.compare_digest`` *before* it decodes (unpickles) anything, so bytes from a peer that
   does not know the secret are never unpickled. The reply tag also covers the request tag, which
   binds each reply to its request (an old reply cannot be passed off as the answer to a new
   call).

What this gives: peer authentication, payload integrity, and no unauthenticated body reads. What it
does not give by itself: confidentiality (payloads and tokens travel in clear text) and protection
against an on-path attacker replaying a captured request, or a captured call token within its
5-minute window (which lets that attacker make the server read bodies up to ``rpc.framesize``
bytes, which the payload tag then rejects). ``security.ssl.internal.enabled`` adds both: mutual
TLS encrypts every call and admits only peers with a certificate of the cluster's CA
(``net.ssl_utils``).

Secrets: a process that binds only to loopback may run without a configured secret; it then uses a
random secret generated once per process (``process_local_secret()``), which only peers in the same
process know, so it suits same-process tests and nothing else. Binding to any other interface
requires ``security.cluster.secret``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import time

from flintlock.runtime.rpc.exceptions import RpcException

__all__ = [
    "CALL_TOKEN_MAX_SKEW_S",
    "MAC_SIZE",
    "RpcAuthenticationError",
    "RpcAuthenticator",
    "is_loopback_host",
    "process_local_secret",
    "resolve_secret",
]

MAC_SIZE = 32
"""Bytes of an HMAC-SHA256 tag."""

_KEY_CONTEXT = b"flintlock rpc key v1"
_REQUEST_CONTEXT = b"flintlock-rpc/1 request\x00"
_REPLY_CONTEXT = b"flintlock-rpc/1 reply\x00"
_CALL_CONTEXT = b"flintlock-rpc/1 call\x00"

CALL_TOKEN_MAX_SKEW_S = 300.0
"""Largest difference (seconds) between a call token's timestamp and the receiver's clock."""

_TOKEN_VERSION = "v1"
_NONCE_BYTES = 16
_MAX_TOKEN_CHARS = 256  # a real token is ~115 characters
_TOKEN = re.compile(r"v1\.([0-9]{1,16})\.([0-9a-f]{32})\.([0-9a-f]{64})")

_process_secret: str | None = None


class RpcAuthenticationError(RpcException):
    """A peer did not prove the cluster secret (or this process is misconfigured).

    Raised on the caller side when the remote rejected the call as unauthenticated, or when a
    reply carries a wrong tag. The fix is the same ``security.cluster.secret`` on every process.
    """


def process_local_secret() -> str:
    """The random secret of this process (generated once; never leaves the process)."""
    global _process_secret
    if _process_secret is None:
        _process_secret = secrets.token_hex(32)
    return _process_secret


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``).

    ``0.0.0.0``, ``::`` and the empty string (all interfaces) are not loopback.
    """
    text = host.strip().strip("[]").lower()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def resolve_secret(secret: str | None, bind_host: str) -> str:
    """The secret a transport bound to ``bind_host`` uses.

    Args:
        secret: the configured ``security.cluster.secret`` (``None`` when unset).
        bind_host: the interface the server binds.

    Returns:
        ``secret``, or the per-process secret when it is ``None`` and ``bind_host`` is loopback.

    Raises:
        ValueError: ``secret`` is ``None`` or empty and ``bind_host`` is not a loopback address.
    """
    if secret is not None:
        if not secret:
            raise ValueError("security.cluster.secret must not be empty")
        return secret
    if is_loopback_host(bind_host):
        return process_local_secret()
    raise ValueError(
        f"RPC would listen on {bind_host!r}, which is reachable from other hosts, without a "
        "cluster secret: set `security.cluster.secret` (or the FLINTLOCK_CLUSTER_SECRET "
        "environment variable) to the same value on every JobManager and TaskManager, or bind "
        "to 127.0.0.1"
    )


class RpcAuthenticator:
    """Computes and checks the HMAC-SHA256 tags of requests and replies.

    Args:
        secret: the cluster secret (any non-empty string; UTF-8 encoded). The HMAC key is derived
            from it (``HMAC-SHA256(secret, "flintlock rpc key v1")``) so the RPC tags cannot be
            confused with other uses of the same secret.

    Raises:
        ValueError: ``secret`` is empty.
    """

    __slots__ = ("_key",)

    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("the cluster secret must not be empty")
        self._key = hmac.new(secret.encode("utf-8"), _KEY_CONTEXT, hashlib.sha256).digest()

    def request_tag(self, payload: bytes | memoryview) -> bytes:
        """The 32-byte tag of a request payload."""
        mac = hmac.new(self._key, _REQUEST_CONTEXT, hashlib.sha256)
        mac.update(payload)
        return mac.digest()

    def reply_tag(self, request_tag: bytes, payload: bytes | memoryview) -> bytes:
        """The 32-byte tag of a reply payload answering the request tagged ``request_tag``."""
        mac = hmac.new(self._key, _REPLY_CONTEXT, hashlib.sha256)
        mac.update(request_tag)
        mac.update(payload)
        return mac.digest()

    def verify_request(self, tag: bytes, payload: bytes | memoryview) -> bool:
        """Constant-time check of a request tag."""
        return hmac.compare_digest(tag, self.request_tag(payload))

    def verify_reply(self, request_tag: bytes, tag: bytes, payload: bytes | memoryview) -> bool:
        """Constant-time check of a reply tag."""
        return hmac.compare_digest(tag, self.reply_tag(request_tag, payload))

    def call_token(self, method: str, now: float | None = None) -> str:
        """A fresh call token for the gRPC ``method`` (sent as call metadata, see the module doc).

        Args:
            method: the gRPC method path the token is for (e.g. ``/flintlock.Rpc/Call``).
            now: the time to stamp, seconds since the Unix epoch (default: ``time.time()``).

        Returns:
            ``"v1.<unix ms>.<32 hex nonce>.<64 hex HMAC-SHA256(K, context || method || ms ||
            nonce)>"`` (ASCII, about 115 characters).
        """
        ms = str(int((time.time() if now is None else now) * 1000))
        nonce = secrets.token_hex(_NONCE_BYTES)
        return f"{_TOKEN_VERSION}.{ms}.{nonce}.{self._token_mac(method, ms, nonce)}"

    def verify_call_token(self, token: str | bytes | None, method: str,
                          now: float | None = None) -> None:
        """Check a call token from metadata (cheap: a regex and one HMAC over ~100 bytes).

        Args:
            token: the ``x-flintlock-auth`` metadata value (``None`` when absent).
            method: the gRPC method path the call is for.
            now: the receiver's time, seconds since the Unix epoch (default: ``time.time()``).

        Raises:
            RpcAuthenticationError: the token is missing, malformed, not made with this cluster's
                secret for ``method`` (constant-time check), or stamped more than
                ``CALL_TOKEN_MAX_SKEW_S`` seconds away from ``now``; the message says which.
        """
        if token is None or token == "" or token == b"":
            raise RpcAuthenticationError("the call carries no authentication token")
        if isinstance(token, bytes):
            try:
                token = token.decode("ascii")
            except UnicodeDecodeError:
                raise RpcAuthenticationError("the call's authentication token is malformed") \
                    from None
        match = _TOKEN.fullmatch(token) if len(token) <= _MAX_TOKEN_CHARS else None
        if match is None:
            raise RpcAuthenticationError("the call's authentication token is malformed")
        ms, nonce, mac = match.groups()
        if not hmac.compare_digest(mac, self._token_mac(method, ms, nonce)):
            raise RpcAuthenticationError("the call's authentication token does not match the "
                                         "cluster secret")
        skew_s = int(ms) / 1000.0 - (time.time() if now is None else now)
        if abs(skew_s) > CALL_TOKEN_MAX_SKEW_S:
            raise RpcAuthenticationError(
                f"the call's authentication token is stamped {skew_s:+.0f} s from this host's "
                f"clock (allowed: +-{CALL_TOKEN_MAX_SKEW_S:.0f} s); synchronise the clocks "
                "(NTP)")

    def _token_mac(self, method: str, ms: str, nonce: str) -> str:
        mac = hmac.new(self._key, _CALL_CONTEXT, hashlib.sha256)
        mac.update(method.encode("utf-8", "surrogateescape") + b"\x00" + ms.encode("ascii")
                   + b"\x00" + nonce.encode("ascii"))
        return mac.hexdigest()

    def __repr__(self) -> str:
        return "RpcAuthenticator(<secret>)"
