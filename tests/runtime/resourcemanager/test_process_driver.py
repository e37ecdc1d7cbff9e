"""ProcessResourceManagerDriver with a stand-in interpreter (a shell script): what a worker is
given, how it is stopped, what its end reports (no TaskManager, no Spark)."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
import yaml

from flintlock.config import Configuration
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.resourcemanager.active.process_driver import ProcessResourceManagerDriver
from flintlock.runtime.resourcemanager.active.worker_tracker import WorkerResourceSpec
from flintlock.testing.waiting import wait_until

SPEC = WorkerResourceSpec(number_of_slots=3, cpu_cores=2)

#: prints what it was started with, then sleeps (SIGTERM ends it) or exits with code $EXIT_WITH
FAKE_PYTHON = """#!/bin/sh
echo "args: $*"
echo "conf: $FLINTLOCK_CONF_DIR"
[ "$FLINTLOCK_CLUSTER_SECRET" = "s3cr3t-value" ] && echo "secret: from the environment"
echo "parent: $FLINTLOCK_PARENT_PID"
if [ -n "$EXIT_WITH" ]; then echo "boom: cannot import flintlock"; exit "$EXIT_WITH"; fi
exec sleep 30
"""


class Handler:
    def __init__(self) -> None:
        self.terminated: list[tuple[ResourceID, str]] = []

    def on_worker_terminated(self, resource_id: ResourceID, diagnostics: str) -> None:
        self.terminated.append((resource_id, diagnostics))

    def on_error(self, error: BaseException) -> None:
        raise AssertionError(error)


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "python"
    path.write_text(FAKE_PYTHON)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _driver(tmp_path: Path, python: Path, **extra: str) -> ProcessResourceManagerDriver:
    return ProcessResourceManagerDriver(Configuration({
        "resourcemanager.process.python": str(python), "env.log.dir": str(tmp_path / "log"),
        "security.cluster.secret": "s3cr3t-value", "resourcemanager.type": "active",
        "metrics.reporter.prom.port": "9249", "spark.sql.shuffle.partitions": "7", **extra}),
        grace_s=5)


def test_a_worker_gets_its_configuration_and_secret_and_is_stopped_with_sigterm(
        tmp_path: Path, fake_python: Path) -> None:
    async def main() -> None:
        driver, handler = _driver(tmp_path, fake_python), Handler()
        await driver.initialize(handler, "127.0.0.1", 6123)
        rid = ResourceID("taskmanager-abc-1")
        await driver.request_resource(rid, SPEC)
        out = tmp_path / "log" / "flintlock-taskmanager-taskmanager-abc-1.out"
        await wait_until(lambda: "parent:" in out.read_text(), describe=out.read_text)
        text = out.read_text()
        assert "args: -m flintlock -v taskmanager" in text
        assert "secret: from the environment" in text
        conf_file = Path(text.split("conf: ")[1].split()[0]) / "config.yaml"
        assert stat.S_IMODE(conf_file.stat().st_mode) == 0o600
        conf = yaml.safe_load(conf_file.read_text())
        assert "s3cr3t-value" not in conf_file.read_text()  # never in a file
        assert conf["taskmanager.resource-id"] == "taskmanager-abc-1"
        assert conf["taskmanager.numberOfTaskSlots"] == "3" and conf["taskmanager.cpu.cores"] == "2"
        assert conf["jobmanager.rpc.address"] == "127.0.0.1"
        assert conf["jobmanager.rpc.port"] == "6123"
        assert conf["metrics.reporter.prom.port"] == "0"  # the JobManager's port is taken
        assert conf["spark.sql.shuffle.partitions"] == "7"
        assert "resourcemanager.type" not in conf
        assert conf["taskmanager.spark.warm-up"] == "false"  # a job waits for its slots
        assert f"parent: {os.getpid()}" in text  # it ends with this process (exit_with_parent)
        assert driver.describe(rid)["output"] == str(out)
        await driver.release_resource(rid)
        await wait_until(lambda: handler.terminated, describe=lambda: driver.running)
        assert handler.terminated[0][0] == rid
        assert handler.terminated[0][1].endswith("stopped with code -15")
        await driver.terminate()
        assert not conf_file.exists()  # the work directory is removed

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_worker_that_exits_reports_its_code_and_last_output(tmp_path: Path,
                                                              fake_python: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXIT_WITH", "3")

    async def main() -> None:
        driver, handler = _driver(tmp_path, fake_python), Handler()
        await driver.initialize(handler, "127.0.0.1", 6123)
        await driver.request_resource(ResourceID("tm-1"), SPEC)
        await wait_until(lambda: handler.terminated)
        [(rid, diagnostics)] = handler.terminated
        assert rid == ResourceID("tm-1")
        assert "exited with code 3" in diagnostics
        assert diagnostics.endswith("boom: cannot import flintlock")
        await driver.terminate()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_missing_interpreter_fails_the_request_with_its_path(tmp_path: Path) -> None:
    async def main() -> None:
        driver = _driver(tmp_path, tmp_path / "no" / "python3")
        await driver.initialize(Handler(), "127.0.0.1", 6123)
        with pytest.raises(FileNotFoundError, match="no/python3"):
            await driver.request_resource(ResourceID("tm-1"), SPEC)
        assert driver.running == []
        await driver.terminate()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_worker_sized_for_slots_with_memory_gets_a_spark_heap_that_holds_them(
        tmp_path: Path, fake_python: Path) -> None:
    mib = 1024 * 1024
    driver = _driver(tmp_path, fake_python)
    sized = WorkerResourceSpec(2, 3, task_heap_memory=800 * mib, task_off_heap_memory=64 * mib,
                               managed_memory=300 * mib)
    conf = driver._worker_configuration(ResourceID("taskmanager-abc-2"), sized)
    heap_mb = int(conf["spark.driver.memory"].removesuffix("m"))
    # the heap's task part (0.4 of what is above the 300 MiB Spark reserves) holds 800 MiB
    assert (heap_mb / 1.15 - 300) * 0.4 >= 800 - 1 and heap_mb < 2800
    assert conf["spark.memory.offHeap.enabled"] == "true"
    assert conf["spark.memory.offHeap.size"] == str(64 * mib)
    assert conf["taskmanager.cpu.cores"] == "3"
    # a default worker keeps the Spark server's default heap; a larger configured one is kept
    assert "spark.driver.memory" not in driver._worker_configuration(ResourceID("t-3"), SPEC)
    big = _driver(tmp_path, fake_python, **{"spark.driver.memory": "8g"})
    assert big._worker_configuration(ResourceID("t-4"), sized)["spark.driver.memory"] == "8g"


def test_a_configured_warm_up_is_kept(tmp_path: Path, fake_python: Path) -> None:
    driver = _driver(tmp_path, fake_python, **{"taskmanager.spark.warm-up": "true"})
    conf = driver._worker_configuration(ResourceID("taskmanager-abc-2"), SPEC)
    assert conf["taskmanager.spark.warm-up"] == "true"
