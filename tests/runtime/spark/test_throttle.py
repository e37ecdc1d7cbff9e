"""The slow-node fault's throttle (``runtime/spark/throttle.py``): the duty cycle, and a process
tree stopped and continued by it, then left running (Linux's ``/proc``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from flintlock.runtime.processes import descendants
from flintlock.runtime.spark.throttle import DutyCycle, ProcessTreeThrottle
from flintlock.testing.waiting import wait_until_sync

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads Linux's /proc")


def test_the_duty_cycle_runs_one_factor_th_of_each_period() -> None:
    cycle = DutyCycle.for_slowdown(5.0, period_s=0.1)
    assert cycle.run_s == pytest.approx(0.02)
    assert cycle.stop_s == pytest.approx(0.08)
    assert DutyCycle.for_slowdown(1.0).stop_s == 0.0
    with pytest.raises(ValueError, match="at least 1"):
        DutyCycle.for_slowdown(0.5)
    with pytest.raises(ValueError, match="positive"):
        DutyCycle.for_slowdown(2.0, period_s=0)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0].decode()


@pytest.fixture
def tree() -> object:
    """A shell with a busy child (``root``, ``child``): the shape of a Spark JVM and its Python
    daemon."""
    root = subprocess.Popen(["sh", "-c", "while :; do :; done & echo $!; wait"],
                            stdout=subprocess.PIPE, start_new_session=True)
    assert root.stdout is not None
    child = int(root.stdout.readline())
    yield root.pid, child
    os.killpg(root.pid, signal.SIGKILL)
    root.wait()


def test_descendants_lists_children_and_not_the_root(tree: tuple[int, int]) -> None:
    root, child = tree
    assert descendants(root) == [child]
    assert descendants(child) == []


def test_the_tree_is_stopped_in_turns_and_runs_again_after_stop(tree: tuple[int, int]) -> None:
    root, child = tree
    throttle = ProcessTreeThrottle(root, DutyCycle.for_slowdown(20.0))
    throttle.start()
    try:
        seen: list[tuple[str, str]] = []

        def both_stopped() -> bool:
            seen.append((_state(root), _state(child)))
            return seen[-1] == ("T", "T")

        wait_until_sync(both_stopped, timeout_s=10, interval_s=0.005, describe=lambda: seen[-20:])
        seen.clear()

        def child_ran() -> bool:  # the busy child is seen running between the stops
            seen.append((_state(root), _state(child)))
            return seen[-1][1] == "R"

        wait_until_sync(child_ran, timeout_s=10, interval_s=0.001, describe=lambda: seen[-20:])
    finally:
        throttle.stop()
    states = [(_state(root), _state(child)) for _ in range(200)]
    assert all("T" not in s for s in states), states
    throttle.stop()  # idempotent


def test_a_throttle_whose_root_ended_stops_cycling(tree: tuple[int, int]) -> None:
    root, child = tree
    throttle = ProcessTreeThrottle(root, DutyCycle.for_slowdown(2.0))
    throttle.start()
    os.killpg(root, signal.SIGKILL)
    assert throttle._thread is not None
    throttle._thread.join(timeout=10)
    assert not throttle._thread.is_alive(), "the throttle still cycles a tree that ended"
    throttle.stop()


@pytest.mark.spark
def test_a_task_manager_with_the_throttle_fault_stops_its_embedded_spark_server_in_turns(
        spark, caplog: pytest.LogCaptureFixture) -> None:
    """The TaskManager entrypoint's wiring: ``throttle`` mode cycles this process's embedded
    server (the test session's), ``wait`` mode and no fault leave it alone."""
    from flintlock.config import Configuration
    from flintlock.runtime.entrypoint.task_manager import _slow_node_throttle
    from flintlock.runtime.spark.session import embedded_server_pid

    pid = embedded_server_pid()
    if pid is None:
        pytest.skip("the test session's Spark is not an embedded server of this process")

    def conf(**settings: str) -> Configuration:
        c = Configuration()
        for key, value in settings.items():
            c.set_string(key, value)
        return c

    assert _slow_node_throttle(conf()) is None
    assert _slow_node_throttle(conf(**{"$internal.fault.task-slowdown": "5"})) is None  # wait
    throttle = _slow_node_throttle(conf(**{"$internal.fault.task-slowdown": "10",
                                           "$internal.fault.task-slowdown.mode": "throttle"}))
    assert throttle is not None
    try:
        seen: list[str] = []
        wait_until_sync(lambda: seen.append(_state(pid)) or seen[-1] == "T", timeout_s=10,
                        interval_s=0.005, describe=lambda: seen[-20:])
    finally:
        throttle.stop()
    assert "T" not in [_state(pid) for _ in range(100)]
    assert spark.range(3).count() == 3  # the server answers again
