"""RestServer: uvicorn serving the REST app inside the JobManager's running event loop.

The socket is bound in ``start()`` (so a busy port raises ``OSError`` there, and port 0 picks a
free port, exposed as ``port``); uvicorn then serves it as a task of the current loop. uvicorn does
not touch signal handlers or logging configuration: the JobManager process owns both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator

import uvicorn
from fastapi import FastAPI

__all__ = ["RestServer"]

log = logging.getLogger(__name__)


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class RestServer:
    """Serves ``app`` on ``host:port`` in the current asyncio loop.

    Args:
        app: the app from ``create_app``.
        host: interface to bind (``rest.bind-address``).
        port: port to bind (``rest.port``); 0 picks a free port.
        shutdown_timeout_s: how long ``stop()`` waits for open requests.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 8081,
                 shutdown_timeout_s: float = 5.0) -> None:
        self.app = app
        self.host = host
        self._requested_port = port
        self._shutdown_timeout_s = shutdown_timeout_s
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
        return f"http://{host}:{self.port}"

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
        config = uvicorn.Config(
            self.app, log_config=None, access_log=False, lifespan="off",
            timeout_graceful_shutdown=max(1, int(self._shutdown_timeout_s)),
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
