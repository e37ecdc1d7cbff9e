"""``flintlock cluster start`` divides the host's cores among its TaskManagers' Spark servers."""

from __future__ import annotations

import pytest

from flintlock.client.standalone_cluster import _cpu_share
from flintlock.config import Configuration


@pytest.mark.parametrize(("cores", "task_managers", "share"), [(2, 2, 1), (8, 3, 2), (2, 4, 1),
                                                                (16, 1, 16)])
def test_each_task_manager_gets_its_share_of_the_cores(monkeypatch: pytest.MonkeyPatch,
                                                        cores: int, task_managers: int,
                                                        share: int) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    assert _cpu_share(Configuration(), task_managers) == ["-D", f"taskmanager.cpu.cores={share}"]


def test_configured_cores_or_a_remote_spark_are_left_alone() -> None:
    assert _cpu_share(Configuration({"taskmanager.cpu.cores": "3"}), 2) == []
    assert _cpu_share(Configuration({"spark.remote": "sc://127.0.0.1:15002"}), 2) == []
