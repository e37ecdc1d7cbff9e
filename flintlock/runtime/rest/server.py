"""RestServer: uvicorn serving the REST app inside the JobManager's running event loop.

The socket is bound in ``start()`` (so a busy port raises ``OSError`` there, and port 0 picks a
free port, exposed as ``port``); uvicorn then serves it as a task of the current loop. uvicorn does
not touch signal handlers or logging configuration: the JobManager process owns both.

Connection limits (so half-sent requests cannot hold connections forever):

- header timeout (``rest.server.header-timeout``): a request head (request line and headers) must
  be complete within this time of the connection opening, or of the first byte of a later request
  on a kept-alive connection; otherwise the connection is closed. uvicorn has no such timeout of
  its own; ``_HeaderTimeoutProtocol`` adds it to uvicorn's h11 protocol.
- idle timeout (``rest.server.idle-timeout``): a kept-alive connection with no new request is
  closed after this time (uvicorn's ``timeout_keep_alive``, whole seconds).
- connection limit (``rest.server.max-connections``): a request that arrives while more
  connections than this are open (its own included), or more requests than this are in flight,
  is answered ``503 Service Unavailable`` (uvicorn's ``limit_concurrency``, plus one since uvicorn
  counts the requesting connection). Connections are still accepted past the limit; the header
  timeout bounds how long one that sends nothing holds its socket.
- request heads are at most 16 KiB (h11's default); a larger one is answered 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
from collections.abc import Generator, Mapping
from typing import Any, cast

import h11
import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.h11_impl import H11Protocol

from flintlock.config import Configuration
from flintlock.config.options import (
    REST_SERVER_HEADER_TIMEOUT,
    REST_SERVER_IDLE_TIMEOUT,
    REST_SERVER_MAX_CONNECTIONS,
)
from flintlock.runtime.net.ssl_utils import rest_server_settings

__all__ = ["RestServer", "server_options"]

log = logging.getLogger(__name__)

_HEADER_TIMEOUT_S = cast(float, REST_SERVER_HEADER_TIMEOUT.default)
_IDLE_TIMEOUT_S = cast(float, REST_SERVER_IDLE_TIMEOUT.default)
_MAX_CONNECTIONS = cast(int, REST_SERVER_MAX_CONNECTIONS.default)


def server_options(configuration: Configuration) -> dict[str, Any]:
    """``RestServer`` keywords from the configuration: ``header_timeout_s``, ``idle_timeout_s``
    (seconds, ``rest.server.header-timeout`` / ``.idle-timeout``), ``max_connections``
    (``rest.server.max-connections``) and ``ssl_settings`` (``security.ssl.rest.*``).

    Raises:
        IllegalConfigurationException: REST TLS is enabled with a missing or unreadable keystore.
    """
    return {
        "header_timeout_s": float(configuration.get(REST_SERVER_HEADER_TIMEOUT)),
        "idle_timeout_s": float(configuration.get(REST_SERVER_IDLE_TIMEOUT)),
        "max_connections": int(configuration.get(REST_SERVER_MAX_CONNECTIONS)),
        "ssl_settings": rest_server_settings(configuration),
    }


class _RestConfig(uvicorn.Config):
    """uvicorn's ``Config`` with the header timeout ``_HeaderTimeoutProtocol`` reads (seconds)."""

    def __init__(self, app: Any, *, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(app, http=_HeaderTimeoutProtocol, **kwargs)
        self.header_timeout_s = header_timeout_s


class _HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol that closes a connection whose request head is late.

    A timer runs while the connection waits for the rest of a request head: from
    ``connection_made``, and on a kept-alive connection from the first byte of the next request
    (before that byte uvicorn's keep-alive timeout applies). It stops once h11 has the whole head
    (its peer state leaves ``IDLE``); when it fires first, the transport is closed.
    """

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._header_timeout_s = float(getattr(config, "header_timeout_s", 0.0))
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        _no_delay(transport)
        super().connection_made(transport)
        self._update_head_timer(waiting=True)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._update_head_timer(waiting=True)
        super().data_received(data)
        self._update_head_timer(waiting=False)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._update_head_timer(waiting=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _update_head_timer(self, waiting: bool) -> None:
        """Run the timer while part of a head is here (or ``waiting`` for one), else stop it."""
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            self._cancel_head_timer()
        elif self._head_timer is None and self._header_timeout_s > 0 and (
            waiting or self.conn.trailing_data[0]
        ):
            self._head_timer = self.loop.call_later(self._header_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.debug("closing a REST connection from %s: no complete request head within %s s",
                      self.client, self._header_timeout_s)
            self.transport.close()


def _no_delay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off on an accepted connection (``TCP_NODELAY``).

    asyncio sets it on TCP transports only when the socket's ``proto`` is ``IPPROTO_TCP``, and a
    socket accepted from ``socket.create_server`` has proto 0. uvicorn writes a response's head
    and body separately, so with Nagle on, every response after the first on a kept-alive
    connection waited for the client's delayed ACK: 44 ms per request (measured here), where
    the first one took 2 ms.
    """
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class RestServer:
    """Serves ``app`` on ``host:port`` in the current asyncio loop.

    Args:
        app: the app from ``create_app`` (or ``create_standby_app``).
        host: interface to bind (``rest.bind-address``).
        port: port to bind (``rest.port``); 0 picks a free port.
        shutdown_timeout_s: how long ``stop()`` waits for open requests.
        header_timeout_s: seconds a connection has to deliver a complete request head
            (``rest.server.header-timeout``; see the module docstring).
        idle_timeout_s: seconds a kept-alive connection may wait for its next request
            (``rest.server.idle-timeout``; rounded up to whole seconds).
        max_connections: connections served at once (``rest.server.max-connections``); a
            request arriving beyond that is answered 503.
        ssl_settings: uvicorn's ``ssl_*`` keywords (``net.ssl_utils.rest_server_settings``);
            empty or None: plain http.

    Raises:
        ValueError: a timeout that is not positive, or ``max_connections < 1``.
    """

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 8081,
                 shutdown_timeout_s: float = 5.0, *,
                 header_timeout_s: float = _HEADER_TIMEOUT_S,
                 idle_timeout_s: float = _IDLE_TIMEOUT_S,
                 max_connections: int = _MAX_CONNECTIONS,
                 ssl_settings: Mapping[str, Any] | None = None) -> None:
        if not (header_timeout_s > 0 and idle_timeout_s > 0):
            raise ValueError(f"REST server timeouts must be positive, got header timeout "
                             f"{header_timeout_s} s and idle timeout {idle_timeout_s} s")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.app = app
        self.host = host
        self._requested_port = port
        self._shutdown_timeout_s = shutdown_timeout_s
        self._header_timeout_s = float(header_timeout_s)
        self._idle_timeout_s = float(idle_timeout_s)
        self._max_connections = int(max_connections)
        self._ssl_settings = dict(ssl_settings or {})
        self._server: _EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port (after ``start()``)."""
        if self._port is None:
            raise RuntimeError("RestServer is not started")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self._ssl_settings else "http"
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        """Bind, start serving, and return once uvicorn accepts connections.

        Raises:
            OSError: the address cannot be bound.
            RuntimeError: uvicorn stopped during startup.
        """
        if self._task is not None:
            raise RuntimeError("RestServer already started")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self._requested_port), family=family)
        self._port = int(sock.getsockname()[1])
        config = _RestConfig(
            self.app, header_timeout_s=self._header_timeout_s, log_config=None,
            access_log=False, lifespan="off",
            timeout_graceful_shutdown=max(1, int(self._shutdown_timeout_s)),
            timeout_keep_alive=max(1, math.ceil(self._idle_timeout_s)),
            # uvicorn counts the connection making the request: +1 serves max_connections
            limit_concurrency=self._max_connections + 1,
            **self._ssl_settings,
        )
        self._server = _EmbeddedServer(config)
        self._task = asyncio.get_running_loop().create_task(
            self._server.serve(sockets=[sock]), name=f"rest-server:{self._port}"
        )
        while not self._server.started:
            if self._task.done():
                sock.close()
                exc = self._task.exception()
                self._task = None
                raise RuntimeError(f"REST server failed to start on {self.host}:{self._port}") from exc
            await asyncio.sleep(0.005)
        log.info("REST server listening on %s", self.url)

    async def stop(self) -> None:
        """Stop accepting connections, let open requests finish, and wait for uvicorn to exit."""
        if self._task is None or self._server is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self._shutdown_timeout_s + 1.0)
        except asyncio.TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        finally:
            self._task = None
        log.info("REST server on port %s stopped", self._port)
