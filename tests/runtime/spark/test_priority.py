"""The embedded Spark server's lower CPU priority (``taskmanager.spark.nice``; STYLE layer 1).

No Spark here: ``new_session_gateway`` is checked with a stand-in for PySpark's
``launch_gateway`` that starts a ``sleep`` the way PySpark starts its JVM.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from flintlock.config import Configuration, IllegalConfigurationException
from flintlock.config.options import TM_SPARK_NICE
from flintlock.runtime.spark.priority import call_niced, new_session_gateway

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux nice semantics")


def _thread_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@linux
def test_call_niced_runs_in_a_niced_thread_and_leaves_the_caller_alone() -> None:
    before = _thread_nice()
    assert call_niced(3, _thread_nice) == min(before + 3, 19)
    assert _thread_nice() == before
    assert call_niced(0, _thread_nice) == before


def test_call_niced_reraises_in_the_caller() -> None:
    def fail() -> None:
        raise RuntimeError("the JVM did not start")

    with pytest.raises(RuntimeError, match="the JVM did not start"):
        call_niced(2, fail)


@linux
def test_the_gateway_starts_in_a_session_of_its_own_with_a_niced_autogroup(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.core import context as spark_context

    started: list[subprocess.Popen[bytes]] = []

    def launch_gateway(conf: Any = None, popen_kwargs: dict[str, Any] | None = None) -> Any:
        proc = subprocess.Popen(["sleep", "30"], **(popen_kwargs or {}))
        started.append(proc)
        return SimpleNamespace(proc=proc)

    monkeypatch.setattr(spark_context, "launch_gateway", launch_gateway)
    try:
        with new_session_gateway(7):
            spark_context.launch_gateway(None)
        assert spark_context.launch_gateway is launch_gateway  # restored
        (proc,) = started
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)
        autogroup = Path(f"/proc/{proc.pid}/autogroup")
        if autogroup.exists():  # a kernel with autogroup scheduling
            assert autogroup.read_text().split()[-1] == "7", autogroup.read_text()
        with new_session_gateway(0):  # 0: PySpark's own launch, same session
            spark_context.launch_gateway(None)
        assert os.getsid(started[1].pid) == os.getsid(0)
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("value", ["20", "-1", "low"])
def test_a_nice_value_outside_0_to_19_is_refused(value: str) -> None:
    with pytest.raises(IllegalConfigurationException, match="taskmanager.spark.nice"):
        Configuration({"taskmanager.spark.nice": value}).get(TM_SPARK_NICE)
    assert Configuration({"taskmanager.spark.nice": "0"}).get(TM_SPARK_NICE) == 0
    assert Configuration({}).get(TM_SPARK_NICE) == 10
