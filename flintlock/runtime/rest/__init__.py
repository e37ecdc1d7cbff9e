"""Flink's REST API v1 served by the JobManager (FastAPI on uvicorn, in the JobManager's loop).

``create_app(dispatcher, configuration, secret=...)`` builds the app; ``RestServer(app, host,
port)`` serves it inside the running event loop. Job submission format:
``flintlock.runtime.rest.submission``.
"""

from __future__ import annotations

from flintlock.runtime.rest.app import create_app
from flintlock.runtime.rest.server import RestServer

__all__ = ["RestServer", "create_app"]
