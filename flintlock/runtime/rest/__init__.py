"""Flink's REST API v1 served by the JobManager (FastAPI on uvicorn, in the JobManager's loop).

``create_app(dispatcher, configuration, secret=...)`` builds the app; ``RestServer(app, host,
port)`` serves it inside the running event loop. Job submission format:
``flintlock.runtime.rest.submission``.

``create_app`` and ``RestServer`` are imported on first use: a client that only needs the
submission format (``flintlock run --target remote``) does not pay for importing FastAPI
(~0.5 s).
"""

from __future__ import annotations

from typing import Any

__all__ = ["RestServer", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from flintlock.runtime.rest.app import create_app

        return create_app
    if name == "RestServer":
        from flintlock.runtime.rest.server import RestServer

        return RestServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
