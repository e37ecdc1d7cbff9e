"""A real ZooKeeper server (Debian's package) per test module that asks for ``zookeeper``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flintlock.testing.zookeeper import ZooKeeperServer, require_zookeeper


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    require_zookeeper()
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()
