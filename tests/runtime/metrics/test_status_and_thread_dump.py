"""Flink's ``Status.*`` metrics of a Python process and its thread dumps (issue 17)."""

from __future__ import annotations

import gc
import re
import sys
import threading

from flintlock.config import Configuration
from flintlock.runtime.metrics.status import (
    GC_PREFIX,
    JOB_MANAGER_DASHBOARD_METRICS,
    TASK_MANAGER_DASHBOARD_METRICS,
    CpuLoadSampler,
    garbage_collectors,
    memory_limit_bytes,
    python_status_values,
)
from flintlock.runtime.taskexecutor.process_status import (
    MEMORY_CONFIGURATION_KEYS,
    registration_resources,
    task_manager_status,
)
from flintlock.runtime.thread_dump import stringify_thread, thread_dump


def test_python_status_answers_every_name_the_dashboard_pages_read():
    values = python_status_values()
    assert set(JOB_MANAGER_DASHBOARD_METRICS) <= set(values)
    assert values["Status.JVM.Memory.Heap.Used"] > 1_000_000  # a Python process uses MBs
    assert values["Status.JVM.Memory.Heap.Committed"] >= values["Status.JVM.Memory.Heap.Used"]
    assert values["Status.JVM.Memory.Heap.Max"] == memory_limit_bytes() > 0
    assert values["Status.JVM.Memory.NonHeap.Used"] > 0  # the interpreter's shared libraries
    assert values["Status.JVM.Memory.NonHeap.Max"] == values["Status.JVM.Memory.Metaspace.Max"] == -1
    assert values["Status.JVM.Threads.Count"] >= threading.active_count()
    assert values["Status.JVM.CPU.Time"] > 0 and 0.0 <= values["Status.JVM.CPU.Load"] <= 1.0
    assert values["Status.JVM.Memory.Direct.MemoryUsed"] == values[
        "Status.JVM.Memory.Direct.TotalCapacity"]


def test_python_garbage_collections_are_counted_and_timed():
    python_status_values()  # installs the timer
    before = python_status_values()
    for _ in range(3):
        gc.collect()
    after = python_status_values()
    name = f"{GC_PREFIX}Python_gen2"
    assert after[f"{name}.Count"] >= before[f"{name}.Count"] + 3
    assert after[f"{name}.Time"] >= before[f"{name}.Time"]
    collectors = garbage_collectors(after)
    assert [c["name"] for c in collectors] == ["Python_gen0", "Python_gen1", "Python_gen2"]
    assert collectors[2]["count"] == int(after[f"{name}.Count"])
    assert garbage_collectors({f"{GC_PREFIX}G1_Young_Generation.Count": 4.0,
                               f"{GC_PREFIX}G1_Young_Generation.Time": 31.0,
                               "Status.JVM.Threads.Count": 9.0}) == [
        {"name": "G1_Young_Generation", "count": 4, "time": 31}]


def test_cpu_load_is_the_share_of_the_cores_used_between_readings(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("flintlock.runtime.metrics.status.time.monotonic", lambda: clock[0])
    sampler = CpuLoadSampler()
    assert sampler.load("p", cpu_s=10.0, cores=4, since_s=10.0) == 0.25  # 10 s CPU in 10 s x 4
    clock[0] = 102.0
    assert sampler.load("p", cpu_s=14.0, cores=4, since_s=0) == 0.5  # 4 s CPU in 2 s x 4
    clock[0] = 102.1  # too soon: the previous load
    assert sampler.load("p", cpu_s=20.0, cores=4, since_s=0) == 0.5
    clock[0] = 103.0
    assert sampler.load("p", cpu_s=99.0, cores=4, since_s=0) == 1.0  # capped


def test_a_task_manager_without_spark_reports_its_python_process_and_no_shuffle_buffers():
    status = task_manager_status()
    assert set(TASK_MANAGER_DASHBOARD_METRICS) <= set(status)
    assert status["Status.Shuffle.Netty.TotalMemory"] == 0.0
    resources = registration_resources(Configuration({"taskmanager.cpu.cores": "3"}))
    assert resources["cpu_cores"] == 3.0
    assert list(resources["memory"]) == list(MEMORY_CONFIGURATION_KEYS)
    assert resources["hardware"]["physicalMemory"] > 0 and resources["hardware"]["cpuCores"] >= 1


def test_thread_dump_shows_each_thread_with_its_stack_innermost_first():
    release = threading.Event()
    started = threading.Event()

    def park_here() -> None:
        started.set()
        release.wait(30)

    worker = threading.Thread(target=park_here, name="parked worker", daemon=True)
    worker.start()
    started.wait(5)
    try:
        dump = {info.thread_name: info.stringified for info in thread_dump(50)}
    finally:
        release.set()
        worker.join(5)
    assert list(dump)[0] == "MainThread"
    parked = dump["parked worker"]
    header, first, *rest = parked.split("\n")
    assert re.fullmatch(r'"parked worker" Id=\d+ TIMED_WAITING', header), header
    assert first.startswith("\tat threading.Condition.wait(threading.py:")
    assert any("park_here(test_status_and_thread_dump.py:" in line for line in rest)
    assert parked.endswith("\n\n")
    main = dump["MainThread"]
    assert main.startswith('"MainThread" Id=') and " RUNNABLE\n" in main.split("\n")[0] + "\n"
    assert "test_thread_dump_shows_each_thread_with_its_stack_innermost_first" in main


def test_a_deep_stack_is_cut_at_max_depth():
    def recurse(n: int) -> str:
        if n == 0:
            return stringify_thread("deep", 7, sys._getframe(), 5)
        return recurse(n - 1)

    text = recurse(20)
    lines = text.split("\n")
    assert lines[0] == '"deep" Id=7 RUNNABLE'
    assert len([ln for ln in lines if ln.startswith("\tat ")]) == 5
    assert lines[6] == "\t..." and text.endswith("\t...\n\n")
    assert stringify_thread("idle", 1, None, 5) == '"idle" Id=1 RUNNABLE\n\n'
