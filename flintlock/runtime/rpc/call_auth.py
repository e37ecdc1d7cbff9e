"""Call-level authentication of the gRPC transport: a token in metadata, checked before the body.

The client side adds ``(AUTH_METADATA_KEY, authenticator.call_token(method))`` to every call's
metadata. The server side installs ``CallAuthInterceptor``, a ``grpc.aio.ServerInterceptor`` that
checks the token in ``intercept_service`` from ``handler_call_details.invocation_metadata`` alone,
before grpc reads the request message:

- a valid token: the service's own handler runs (it then checks the payload tag, see ``codec``);
- a missing or invalid token: the interceptor returns a *stream-unary* handler whose behaviour
  aborts with ``UNAUTHENTICATED`` without iterating its request iterator. grpc aio reads the whole
  request message before it calls a unary-unary handler, but it reads a stream's messages only
  when the behaviour iterates them (``_handle_stream_unary_rpc`` in grpc's
  ``_cython/_cygrpc/aio/server.pyx.pxi``), so the body of an unauthenticated call is never read
  into memory; at most what HTTP/2 flow control lets the peer send ahead is buffered and dropped.

Rejections are logged at WARNING, at most once per ``REJECTION_LOG_INTERVAL_S`` (10 s) with the
number of rejections not logged since, so an unauthenticated peer cannot flood the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

from flintlock.runtime.rpc.auth import (
    CALL_TOKEN_MAX_SKEW_S,
    RpcAuthenticationError,
    RpcAuthenticator,
)

__all__ = [
    "AUTH_METADATA_KEY",
    "REJECTION_LOG_INTERVAL_S",
    "CallAuthInterceptor",
    "RateLimitedWarning",
    "call_metadata",
]

log = logging.getLogger(__name__)

AUTH_METADATA_KEY = "x-flintlock-auth"
"""The metadata key (lower case, as gRPC requires) that carries the call token."""

REJECTION_LOG_INTERVAL_S = 10.0
"""At most one warning about rejected calls per this many seconds."""


def call_metadata(auth: RpcAuthenticator, method: str) -> tuple[tuple[str, str], ...]:
    """The metadata to send with a call of the gRPC ``method``: one fresh call token."""
    return ((AUTH_METADATA_KEY, auth.call_token(method)),)


class RateLimitedWarning:
    """Logs a WARNING at most once per ``interval_s``, counting the messages it suppresses.

    Args:
        logger: where the warnings go.
        interval_s: least time between two warnings, seconds.
        clock: monotonic clock in seconds (tests pass a fake).

    Thread-safe; the count of suppressed messages is added to the next warning that is logged.
    """

    def __init__(self, logger: logging.Logger, interval_s: float = REJECTION_LOG_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._next_at: float | None = None
        self._suppressed = 0

    def warn(self, message: str, *args: Any) -> bool:
        """Log ``message % args`` unless a warning was logged less than ``interval_s`` ago.

        Returns:
            True if it was logged, False if it was counted as suppressed.
        """
        now = self._clock()
        with self._lock:
            if self._next_at is not None and now < self._next_at:
                self._suppressed += 1
                return False
            suppressed, self._suppressed = self._suppressed, 0
            self._next_at = now + self._interval_s
        if suppressed:
            message += " (%d more rejected call(s) not logged in the last %.0f s)"
            args = (*args, suppressed, self._interval_s)
        self._logger.warning(message, *args)
        return True


def _metadata_value(metadata: Any, key: str) -> str | bytes | None:
    for item in metadata or ():
        item_key, value = item[0], item[1]
        if item_key == key:
            return value  # type: ignore[no-any-return]
    return None


class CallAuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls whose metadata does not carry a valid call token, before reading the body.

    Args:
        auth: the authenticator of the service (holds the key derived from the cluster secret).
        clock: wall clock in seconds since the Unix epoch, for the token's skew check (tests pass
            a fake).

    A rejected call ends with ``grpc.StatusCode.UNAUTHENTICATED``; its request message is never
    read. Every method of the server is covered (the token is bound to the called method).
    """

    def __init__(self, auth: RpcAuthenticator,
                 clock: Callable[[], float] = time.time) -> None:
        self._auth = auth
        self._clock = clock
        self._warning = RateLimitedWarning(log)
        self.rejected = 0  #: calls rejected so far (for tests and diagnostics)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        token = _metadata_value(handler_call_details.invocation_metadata, AUTH_METADATA_KEY)
        try:
            self._auth.verify_call_token(token, method, self._clock())
        except RpcAuthenticationError as exc:
            self.rejected += 1
            return self._rejection(method, str(exc))
        return await continuation(handler_call_details)

    def _rejection(self, method: str, reason: str) -> grpc.RpcMethodHandler:
        details = (
            f"{reason}: the call is not authorised with this cluster's secret "
            "(security.cluster.secret differs or is unset, or the clocks differ by more than "
            f"{CALL_TOKEN_MAX_SKEW_S:.0f} s); its message was not read"
        )
        warning = self._warning

        async def reject(request_iterator: AsyncIterator[bytes],
                         context: grpc.aio.ServicerContext) -> bytes:
            # never iterate request_iterator: that would read the unauthenticated body
            warning.warn("Rejected an unauthenticated RPC call to %s from %s: %s", method,
                         context.peer(), reason)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, details)
            raise AssertionError("unreachable: abort raises")

        return grpc.stream_unary_rpc_method_handler(reject)
