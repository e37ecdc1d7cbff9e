"""A standalone ZooKeeper server for tests, from Debian's ``zookeeper`` package
(``apt-get install zookeeper``; ``.ci/run`` installs it): ``ZooKeeperServerMain <port>
<data dir>`` on 127.0.0.1, with ``suspend()`` / ``resume()`` (SIGSTOP / SIGCONT) to cut every
client off without ending their sessions' server side at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from flintlock.client.local_zookeeper import ZOOKEEPER_JARS, free_port, zookeeper_command
from flintlock.testing.waiting import wait_until_sync

__all__ = ["ZOOKEEPER_JARS", "ZooKeeperServer", "require_zookeeper", "zookeeper_available"]



def zookeeper_available() -> bool:
    return (ZOOKEEPER_JARS / "zookeeper.jar").exists()


def require_zookeeper() -> None:
    """Skip the calling test (in CI, ``CI=true``, fail it) when the package is missing."""
    import pytest

    if zookeeper_available():
        return
    reason = "ZooKeeper tests need Debian's zookeeper package (apt-get install zookeeper)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " — CI must provide it", pytrace=False)
    pytest.skip(reason)


class ZooKeeperServer:
    """One ZooKeeper server process; ``quorum`` is its ``host:port``."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.quorum = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> ZooKeeperServer:
        """Start it and wait until it accepts TCP connections.

        Raises:
            AssertionError: it did not come up (its log is in ``<data dir>/zookeeper.log``).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "zookeeper.log", "ab")
        self.process = subprocess.Popen(zookeeper_command(self.port, self.data_dir / "data"),
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()

        def accepting() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"ZooKeeper exited with {self.process.returncode}: "
                                     f"{(self.data_dir / 'zookeeper.log').read_text()[-2000:]}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until_sync(accepting, timeout_s, interval_s=0.1)
        return self

    def suspend(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGCONT)
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
