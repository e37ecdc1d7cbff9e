"""Which JobManagers are up and which leads (FILE and ZooKeeper registries), the named error for
two clusters on one cluster-id, and ``/jobmanager/high-availability`` in REST."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flintlock.config import Configuration
from flintlock.runtime.highavailability.job_managers import (
    ClusterIdConflictException,
    FileJobManagerRegistry,
    JobManagerRecord,
    check_same_cluster,
    describe,
    secret_digest,
)
from flintlock.runtime.highavailability.leader import LeaderInformation
from flintlock.runtime.highavailability.services import create_ha_services
from flintlock.testing.zookeeper import ZooKeeperServer


def _record(port: int, storage: str = "/ha", secret: str | None = "s") -> JobManagerRecord:
    return JobManagerRecord.of_this_process(f"127.0.0.1:{port}", storage, secret)


def test_records_round_trip_and_carry_no_secret() -> None:
    record = _record(6123, secret="top-secret")
    assert JobManagerRecord.from_json(record.to_json()) == record
    assert "top-secret" not in record.to_json()
    assert record.secret == secret_digest("top-secret") != secret_digest("other")
    assert secret_digest(None) == "" and len(record.secret) == 16
    with pytest.raises(ValueError, match="not a JobManager record"):
        JobManagerRecord.from_json('{"id": 1}')


def test_file_registry_lists_live_job_managers_and_forgets_dead_ones(tmp_path: Path) -> None:
    registry, other = FileJobManagerRegistry(tmp_path), FileJobManagerRegistry(tmp_path)
    assert registry.records() == []
    mine = _record(6123)
    registry.register(mine)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    gone = dataclasses.replace(_record(6124), id="gone", pid=int(dead.stdout))
    other.register(gone)  # its process has ended: skipped, its file removed
    (tmp_path / "jobmanagers" / "junk.json").write_text("not json")
    assert registry.records() == [mine]
    assert not (tmp_path / "jobmanagers" / "gone.json").exists()
    registry.unregister()
    assert registry.records() == []


def test_another_clusters_job_managers_are_named() -> None:
    up = [_record(6123, "/ha-a", "s")]
    check_same_cluster(_record(6124, "/ha-a", "s"), up, "/default", "where")  # same cluster
    with pytest.raises(ClusterIdConflictException,
                       match=r"cluster-id /default at zk node /f is in use by another cluster: "
                             r"JobManager .* with a different high-availability.storageDir\. "
                             r"Give this cluster its own high-availability.cluster-id"):
        check_same_cluster(_record(6124, "/ha-b", "s"), up, "/default", "zk node /f")
    with pytest.raises(ClusterIdConflictException, match="different security.cluster.secret"):
        check_same_cluster(_record(6124, "/ha-a", "t"), up, "/default", "zk node /f")


def test_describe_marks_the_leader_by_its_rpc_address() -> None:
    a, b = _record(6123), _record(6124)
    leader = LeaderInformation("c" * 32, {"dispatcher": "grpc://127.0.0.1:6124/dispatcher",
                                          "rest": "http://127.0.0.1:8081"})
    doc = describe("FILE", "/default", "/ha", leader, [a, b])
    assert doc["leader"] == {"session-id": "c" * 32, "rest": "http://127.0.0.1:8081",
                             "rpc-address": "127.0.0.1:6124"}
    assert [(j["rpc-address"], j["role"]) for j in doc["jobmanagers"]] == [
        ("127.0.0.1:6123", "standby"), ("127.0.0.1:6124", "leader")]
    assert describe("FILE", "/default", "/ha", None, [a])["jobmanagers"][0]["role"] == "standby"


def _zk(zookeeper: ZooKeeperServer, storage: Path) -> Any:
    return create_ha_services(Configuration({
        "high-availability.type": "zookeeper", "high-availability.zookeeper.quorum":
        zookeeper.quorum, "high-availability.storageDir": str(storage),
        "high-availability.cluster-id": "/shared-id"}))


@pytest.mark.process
def test_zookeeper_registry_nodes_go_with_their_session(zookeeper: ZooKeeperServer,
                                                        tmp_path: Path) -> None:
    first, second, viewer = (_zk(zookeeper, tmp_path / "a") for _ in range(3))
    try:
        a, b = _record(6123, first.storage_dir), _record(6124, first.storage_dir)
        first.job_manager_registry().register(a)
        second.job_manager_registry().register(b)
        assert set(viewer.job_manager_registry().records()) == {a, b}
        doc = viewer.describe()
        assert doc["type"] == "ZOOKEEPER" and doc["cluster-id"] == "/shared-id"
        assert doc["leader"] is None and len(doc["jobmanagers"]) == 2
        second.close()  # its session ends: its node is gone
        assert viewer.job_manager_registry().records() == [a]
        intruder = _record(6125, str(tmp_path / "b"))
        with pytest.raises(ClusterIdConflictException, match="/shared-id at ZooKeeper"):
            check_same_cluster(intruder, viewer.job_manager_registry().records(),
                               viewer.cluster_id, viewer.where())
    finally:
        for services in (first, second, viewer):
            services.close()


def test_a_zombie_is_not_alive() -> None:
    """A killed JobManager whose parent has not reaped it yet must not look alive (its port
    file and registry entry would otherwise keep naming it)."""
    from flintlock.runtime.processes import pid_alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        assert not pid_alive(child.pid)
    finally:
        child.wait()
    assert not pid_alive(child.pid) and pid_alive(os.getpid())
