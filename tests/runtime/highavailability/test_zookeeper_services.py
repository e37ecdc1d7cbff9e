"""Leader election and retrieval through a real ZooKeeper server (Debian's package): one leader
at a time, the next one after it stops, leadership given up when ZooKeeper stops answering, a
clear error for an unreachable quorum."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flintlock.config import Configuration
from flintlock.runtime.highavailability.leader import LeaderInformation
from flintlock.runtime.highavailability.services import create_ha_services
from flintlock.runtime.highavailability.zookeeper_services import (
    ZooKeeperConnectionException,
    connect,
)
from flintlock.testing.leadership import RecordingContender, RecordingListener
from flintlock.testing.waiting import wait_until_sync
from flintlock.testing.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.process]


def _services(zookeeper: ZooKeeperServer, tmp_path: Path, cluster: str, **more: str) -> Any:
    return create_ha_services(Configuration({
        "high-availability.type": "zookeeper", "high-availability.zookeeper.quorum":
        zookeeper.quorum, "high-availability.storageDir": str(tmp_path),
        "high-availability.cluster-id": cluster, **more}))


def test_one_leader_at_a_time_and_the_next_after_it_stops(zookeeper: ZooKeeperServer,
                                                          tmp_path: Path) -> None:
    # separate services: separate ZooKeeper sessions, as separate JobManager processes have
    first, second, client = (_services(zookeeper, tmp_path, "/one") for _ in range(3))
    a, b, listener = RecordingContender(), RecordingContender(), RecordingListener()
    election_a = first.leader_election_service()
    election_a.start(a)
    wait_until_sync(lambda: a.events, 10)
    election_b = second.leader_election_service()
    election_b.start(b)
    retrieval = client.leader_retrieval_service()
    retrieval.start(listener)
    try:
        info_a = LeaderInformation(a.session, {"rest": "http://127.0.0.1:1"})
        assert election_a.confirm_leadership(a.session, info_a)
        wait_until_sync(lambda: listener.seen and listener.seen[-1] == info_a, 10,
                        describe=lambda: listener.seen)
        assert client.current_leader() == info_a and b.events == []
        election_a.stop()  # withdraws its information, releases the latch
        wait_until_sync(lambda: b.events, 10)
        assert b.events[0].startswith("granted") and b.session != a.session
        info_b = LeaderInformation(b.session, {"rest": "http://127.0.0.1:2"})
        assert election_b.confirm_leadership(b.session, info_b)
        wait_until_sync(lambda: listener.seen[-1] == info_b, 10, describe=lambda: listener.seen)
    finally:
        retrieval.stop()
        election_b.stop()
        election_a.stop()
        for services in (first, second, client):
            services.close()
    assert a.events[1:] == [] and b.events[1:] == []  # nobody was revoked


def test_a_leader_gives_up_when_zookeeper_stops_answering(zookeeper: ZooKeeperServer,
                                                          tmp_path: Path) -> None:
    services = _services(zookeeper, tmp_path, "/two",
                         **{"high-availability.zookeeper.client.session-timeout": "4 s"})
    contender = RecordingContender()
    election = services.leader_election_service()
    election.start(contender)
    try:
        wait_until_sync(lambda: contender.events, 10)
        zookeeper.suspend()
        try:
            wait_until_sync(lambda: "revoked" in contender.events, 30,
                            describe=lambda: contender.events)
            assert not election.has_leadership(contender.session)
        finally:
            zookeeper.resume()
    finally:
        election.stop()
        services.close()


def test_a_leader_that_missed_its_deposition_is_not_confirmed_by_zookeeper(
        zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """What a paused leader sees before kazoo tells it the session expired: its own state says
    it leads, ZooKeeper holds a newer leader's information. ``verify_leadership`` (run before
    every sink commit and result record) believes ZooKeeper."""
    services = _services(zookeeper, tmp_path, "/three")
    contender = RecordingContender()
    election = services.leader_election_service()
    election.start(contender)
    try:
        wait_until_sync(lambda: contender.events, 10)
        session = contender.session
        assert not election.verify_leadership(session)  # not published yet
        assert election.confirm_leadership(session, LeaderInformation(session, {}))
        assert election.verify_leadership(session) and not election.verify_leadership("other")
        newer = LeaderInformation("f" * 32, {"rest": "http://127.0.0.1:3"})
        election.client.set(f"{election.base}/leader/connection_info", newer.to_json().encode())
        assert election.has_leadership(session)  # the local view, not yet told
        assert not election.verify_leadership(session)
    finally:
        election.stop()
        services.close()


def test_an_unreachable_quorum_is_named_after_its_retries() -> None:
    with pytest.raises(ZooKeeperConnectionException,
                       match=r"127.0.0.1:1 \(2 attempts of 0.5 s; high-availability.zookeeper"):
        connect("127.0.0.1:1", 4.0, 0.5, 0.05, 2)


def test_job_graphs_are_listed_by_their_zookeeper_pointers(zookeeper: ZooKeeperServer,
                                                           tmp_path: Path) -> None:
    from flintlock.runtime.highavailability.job_graph_store import (
        FileSystemJobGraphStore,
        JobGraphStoreException,
    )
    from flintlock.runtime.highavailability.zookeeper_job_graph_store import (
        ZooKeeperJobGraphStore,
    )
    from tests.runtime.highavailability.test_job_stores import _graph

    services = _services(zookeeper, tmp_path, "/graphs")
    try:
        store = services.job_graph_store()
        assert isinstance(store, ZooKeeperJobGraphStore)
        a, b, orphan = _graph("a"), _graph("b"), _graph("orphan")
        store.put_job_graph(a)
        store.put_job_graph(b)
        store.files.put_job_graph(orphan)  # its JobManager died before the pointer was written
        assert store.job_ids() == sorted([a.job_id, b.job_id], key=str)
        assert store.recover_job_graph(a.job_id).name == "a"
        data, _ = services._zookeeper()[0].get(f"{store.path}/{a.job_id}")
        assert str(a.job_id) in data.decode()  # the pointer names the file
        (Path(store.files.uri) / f"submittedJobGraph-{b.job_id}").unlink()  # the file is lost
        with pytest.raises(JobGraphStoreException, match=f"JobGraph of job {b.job_id}"):
            store.recover_job_graph(b.job_id)
        with pytest.raises(JobGraphStoreException, match="no JobGraph pointer"):
            store.recover_job_graph(orphan.job_id)
        store.remove_job_graph(a.job_id)
        store.remove_job_graph(b.job_id)
        assert store.job_ids() == []
        assert FileSystemJobGraphStore(store.files.uri).job_ids() == [orphan.job_id]
    finally:
        services.close()
