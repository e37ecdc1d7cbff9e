"""``cluster start`` with several JobManagers: the high-availability settings it adds and keeps
for clients, and how a client finds the leader's REST from the state directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flintlock.client.standalone_cluster import (
    HA_SETTINGS_FILE,
    StandaloneClusterException,
    _high_availability,
    leader_rest_endpoint,
)
from flintlock.config import Configuration
from flintlock.runtime.highavailability.file_services import FileLeaderElectionService
from flintlock.runtime.highavailability.leader import LeaderInformation
from flintlock.testing.leadership import RecordingContender
from flintlock.testing.waiting import wait_until_sync


def test_several_job_managers_get_file_high_availability_under_the_state_directory(
        tmp_path: Path) -> None:
    assert _high_availability(Configuration({}), [], tmp_path, 1) == ([], None)
    args, settings = _high_availability(Configuration({}), [], tmp_path, 2)
    assert args == ["-D", "high-availability.type=FILE",
                    "-D", f"high-availability.storageDir={tmp_path / 'ha'}",
                    "-D", "jobmanager.rpc.port=0"]
    assert settings == {"high-availability.type": "FILE",
                        "high-availability.storageDir": str(tmp_path / "ha")}
    configured = Configuration({"high-availability.type": "ZOOKEEPER",
                                "high-availability.zookeeper.quorum": "zk:2181",
                                "high-availability.storageDir": "/shared/ha"})
    args, settings = _high_availability(configured, ["jobmanager.rpc.port=7000"], tmp_path, 2)
    assert args == [] and settings is not None
    assert settings["high-availability.zookeeper.quorum"] == "zk:2181"
    with pytest.raises(StandaloneClusterException, match="zookeeper.quorum"):
        _high_availability(Configuration({"high-availability.type": "ZOOKEEPER",
                                          "high-availability.storageDir": "/x"}), [], tmp_path, 2)


def test_a_client_finds_the_leaders_rest_from_the_state_directory(tmp_path: Path) -> None:
    assert leader_rest_endpoint(tmp_path) is None  # no high availability here
    _, settings = _high_availability(Configuration({}), [], tmp_path, 2)
    (tmp_path / HA_SETTINGS_FILE).write_text(json.dumps(settings))
    assert leader_rest_endpoint(tmp_path) is None  # nobody leads yet
    election, contender = FileLeaderElectionService(tmp_path / "ha" / "default"), \
        RecordingContender()
    election.start(contender)
    try:
        wait_until_sync(lambda: contender.events, 5)
        election.confirm_leadership(contender.session, LeaderInformation(
            contender.session, {"rest": "http://127.0.0.1:8123"}))
        assert leader_rest_endpoint(tmp_path) == ("127.0.0.1", 8123)
    finally:
        election.stop()
