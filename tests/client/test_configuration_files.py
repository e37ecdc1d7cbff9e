"""config.yaml and -D: Flink keys, validated, with the documented precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from flintlock import StreamExecutionEnvironment
from flintlock.client.context import ClientContext, client_context
from flintlock.config import (
    Configuration,
    IllegalConfigurationException,
    load_cluster_configuration,
)


def test_config_yaml_nested_and_flat_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.yaml").write_text(
        "parallelism:\n  default: 3\nheartbeat.timeout: 5 s\nspark.sql.shuffle.partitions: 4\n"
    )
    monkeypatch.setenv("FLINTLOCK_CONF_DIR", str(tmp_path))
    conf = load_cluster_configuration()
    assert conf.get_raw("parallelism.default") == 3
    assert conf.spark_settings() == {"spark.sql.shuffle.partitions": "4"}
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_parallelism() == 3
    # command-line overrides win over config.yaml; the program's own setter wins over both
    with client_context(ClientContext(overrides=Configuration({"parallelism.default": 5}))):
        env = StreamExecutionEnvironment.get_execution_environment()
        assert env.get_parallelism() == 5
        env.set_parallelism(7)
        assert env.get_parallelism() == 7


def test_bad_config_yaml_names_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("taskmanager.numberOfTaskSlots: many\n")
    with pytest.raises(IllegalConfigurationException) as info:
        load_cluster_configuration(str(tmp_path))
    assert "config.yaml" in str(info.value)
    assert "taskmanager.numberOfTaskSlots" in str(info.value) and "many" in str(info.value)
    (tmp_path / "config.yaml").write_text("heartbeat:\n  intervall: 1 s\n")
    with pytest.raises(IllegalConfigurationException, match="Did you mean 'heartbeat.interval'"):
        load_cluster_configuration(str(tmp_path))
