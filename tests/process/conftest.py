"""One standalone session cluster (2 TaskManagers x 2 slots) shared by the process tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cluster_helpers import start_cluster


@pytest.fixture(scope="session")
def session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield from start_cluster(tmp_path_factory.mktemp("cluster-state"), task_managers=2)
