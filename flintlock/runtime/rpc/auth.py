"""Authentication of gRPC RPC peers with the cluster secret (``security.cluster.secret``).

Every request and every reply of the gRPC transport carries an HMAC-SHA256 tag over its payload,
keyed with a key derived from the cluster secret. A receiver verifies the tag with
``hmac.compare_digest`` *before* it decodes (unpickles) anything, so bytes from a peer that does not
know the secret are never unpickled. The reply tag also covers the request tag, which binds each
reply to its request (an old reply cannot be passed off as the answer to a new call).

What this gives: peer authentication and payload integrity. What it does not give: confidentiality
(payloads travel in clear text) and protection against an on-path attacker replaying a captured
request. Run the cluster on a trusted network (or a VPN / service mesh with TLS) when that matters.

Secrets: a process that binds only to loopback may run without a configured secret; it then uses a
random secret generated once per process (``process_local_secret()``), which only peers in the same
process know, so it suits same-process tests and nothing else. Binding to any other interface
requires ``security.cluster.secret``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets

from flintlock.runtime.rpc.exceptions import RpcException

__all__ = [
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

    def __repr__(self) -> str:
        return "RpcAuthenticator(<secret>)"
