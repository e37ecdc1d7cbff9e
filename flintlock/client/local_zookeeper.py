"""A ZooKeeper server for trying high availability on one machine (``flintlock cluster start
--zookeeper``), from Debian's ``zookeeper`` package: ``ZooKeeperServerMain <port> <data dir>`` on
127.0.0.1, a daemon of the cluster like its JobManagers (``<state>/zookeeper.pid``; ``cluster
stop`` stops it after them). Production clusters use their own ensemble
(``high-availability.zookeeper.quorum``)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

__all__ = ["ZOOKEEPER_JARS", "LocalZooKeeperException", "free_port", "start_local_zookeeper",
           "zookeeper_command"]

#: Debian's jars (``zookeeper``, ``libzookeeper-java``) and their dependencies
ZOOKEEPER_JARS = Path("/usr/share/java")


class LocalZooKeeperException(RuntimeError):
    """The local ZooKeeper cannot run (package missing, or it did not come up)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def zookeeper_command(port: int, data_dir: Path) -> list[str]:
    """The command line of a standalone ZooKeeper server on 127.0.0.1:``port``.

    Raises:
        LocalZooKeeperException: Debian's ``zookeeper`` package is not installed.
    """
    if not (ZOOKEEPER_JARS / "zookeeper.jar").exists():
        raise LocalZooKeeperException(
            "a local ZooKeeper needs Debian's zookeeper package (apt-get install zookeeper), "
            f"which puts zookeeper.jar into {ZOOKEEPER_JARS}; or configure an ensemble with "
            "-D high-availability.type=ZOOKEEPER -D high-availability.zookeeper.quorum=host:port")
    classpath = f"{ZOOKEEPER_JARS / 'zookeeper.jar'}:{ZOOKEEPER_JARS / 'zookeeper-jute.jar'}:" \
                f"{ZOOKEEPER_JARS}/*"
    return ["java", "-Xmx256m", "-cp", classpath, "-Dzookeeper.admin.enableServer=false",
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(port), str(data_dir)]


def start_local_zookeeper(state: Path, timeout_s: float = 60.0) -> str:
    """Start ZooKeeper as a daemon of the cluster in ``state``; returns its quorum
    (``127.0.0.1:<port>``) once it accepts connections.

    Raises:
        LocalZooKeeperException: the package is missing, or it exited or did not come up
            (its log is ``<state>/log/zookeeper.log``).
    """
    port = free_port()
    command = zookeeper_command(port, state / "zookeeper")
    (state / "log").mkdir(parents=True, exist_ok=True)
    with open(state / "log" / "zookeeper.log", "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    (state / "zookeeper.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LocalZooKeeperException(
                f"ZooKeeper exited with code {proc.returncode}; see {state / 'log' / 'zookeeper.log'}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return f"127.0.0.1:{port}"
        time.sleep(0.1)
    raise LocalZooKeeperException(
        f"ZooKeeper did not accept connections within {timeout_s:.0f} s; see "
        f"{state / 'log' / 'zookeeper.log'}")
