"""What the JobManager and TaskManager processes share: secret, port files, signals, logging.

A process writes its bound ports to a *port file* (JSON, written atomically) once it serves, so a
launcher that asked for port 0 learns the real ports. SIGTERM and SIGINT stop it gracefully.
The cluster secret comes from ``security.cluster.secret`` or the ``FLINTLOCK_CLUSTER_SECRET``
environment variable (used by ``flintlock cluster start``, so the secret never shows in ``ps``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

from flintlock.config import Configuration
from flintlock.config.options import CLUSTER_SECRET

__all__ = [
    "SECRET_ENV",
    "cluster_secret",
    "configure_logging",
    "install_stop_signals",
    "resource_manager_address",
    "write_port_file",
]

SECRET_ENV = "FLINTLOCK_CLUSTER_SECRET"


def resource_manager_address(host: str, port: int) -> str:
    """The RPC address TaskManagers register at."""
    return f"grpc://{host}:{port}/resourcemanager"


def cluster_secret(configuration: Configuration) -> str | None:
    secret = configuration.get(CLUSTER_SECRET) or os.environ.get(SECRET_ENV)
    return str(secret) if secret else None


def write_port_file(path: str | os.PathLike[str] | None, **values: Any) -> None:
    """Atomically write ``{"pid": ..., **values}`` as JSON to ``path`` (no-op when None)."""
    if path is None:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), **values}))
    os.replace(tmp, target)


def install_stop_signals(stop: asyncio.Event) -> None:
    """SIGTERM / SIGINT set ``stop`` (on the running loop)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


def configure_logging(verbose: bool = True) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
