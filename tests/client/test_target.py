"""Where ``flintlock run`` runs: the configured cluster, a running one in the state dir, or local."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from flintlock.client.target import resolve_execution_target
from flintlock.config import Configuration


def _state(tmp_path: Path, pid: int, rest_port: int = 41234) -> Path:
    """A state directory as ``flintlock cluster start`` leaves it (pid and port files)."""
    (tmp_path / "jobmanager.pid").write_text(str(pid))
    (tmp_path / "jobmanager.port").write_text(json.dumps({"rest_port": rest_port, "rpc_port": 1}))
    return tmp_path


def _resolve(**values: str) -> tuple[str, str]:
    conf, where = resolve_execution_target(Configuration(values))
    assert conf.get_raw("execution.target") == where.kind
    return where.kind, where.description


@pytest.fixture(autouse=True)
def _no_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINTLOCK_CONF_DIR", raising=False)
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)


def test_a_cluster_left_running_in_the_state_directory_is_used(tmp_path: Path) -> None:
    state = _state(tmp_path, os.getpid())
    kind, text = _resolve(**{"cluster.state-dir": str(state)})
    assert kind == "remote"
    assert "http://localhost:41234" in text and str(state) in text and "--target local" in text


def test_no_cluster_or_a_dead_one_runs_locally(tmp_path: Path) -> None:
    assert _resolve(**{"cluster.state-dir": str(tmp_path)})[0] == "local"
    dead = subprocess.Popen(["true"])
    dead.wait()
    state = _state(tmp_path, dead.pid)
    kind, text = _resolve(**{"cluster.state-dir": str(state)})
    assert kind == "local" and "flintlock cluster start" in text


def test_explicit_choices_win_over_a_running_cluster(tmp_path: Path) -> None:
    state = str(_state(tmp_path, os.getpid()))
    assert _resolve(**{"cluster.state-dir": state, "execution.target": "local"})[0] == "local"
    kind, text = _resolve(**{"cluster.state-dir": state, "rest.address": "10.0.0.7",
                             "rest.port": "8081"})
    assert kind == "remote" and "http://10.0.0.7:8081" in text


def test_config_yaml_names_the_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "config.yaml").write_text("rest:\n  address: 127.0.0.2\n  port: 18081\n")
    monkeypatch.setenv("FLINTLOCK_CONF_DIR", str(conf_dir))
    kind, text = _resolve(**{"cluster.state-dir": str(tmp_path)})
    assert kind == "remote" and "http://127.0.0.2:18081" in text
    (conf_dir / "config.yaml").write_text("execution:\n  target: local\nrest:\n  port: 18081\n")
    assert _resolve(**{"cluster.state-dir": str(tmp_path)})[0] == "local"
