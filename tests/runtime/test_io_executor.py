"""The process's I/O pool and the serial executors on it (STYLE layer 1)."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from flintlock.runtime.io_executor import SerialExecutor, io_executor, prestart_io_threads


def test_prestarted_pool_has_all_its_threads_before_any_work() -> None:
    size = prestart_io_threads()
    names = [t.name for t in threading.enumerate() if t.name.startswith("flintlock-io")]
    assert len(names) == size >= 1, names
    # submitting now starts no thread: the number stays
    io_executor().submit(lambda: None).result(10)
    assert len([t for t in threading.enumerate() if t.name.startswith("flintlock-io")]) == size


def test_serial_executor_runs_one_at_a_time_in_submission_order() -> None:
    pool = concurrent.futures.ThreadPoolExecutor(4)
    serial = SerialExecutor(pool)
    running = 0
    most = 0
    order: list[int] = []
    lock = threading.Lock()
    gate = threading.Event()

    def work(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        if i == 0:
            gate.wait(10)  # the first holds the queue while the others are submitted
        order.append(i)
        with lock:
            running -= 1
        return i * i

    futures = [serial.submit(work, i) for i in range(20)]
    gate.set()
    assert [f.result(10) for f in futures] == [i * i for i in range(20)]
    assert order == list(range(20)) and most == 1
    pool.shutdown()


def test_serial_executor_hands_errors_to_the_future_and_goes_on() -> None:
    serial = SerialExecutor()

    def fail() -> None:
        raise ValueError("storage is gone")

    failed = serial.submit(fail)
    after = serial.submit(lambda: "next")
    with pytest.raises(ValueError, match="storage is gone"):
        failed.result(10)
    assert after.result(10) == "next"


def test_shutdown_refuses_new_work_but_runs_what_was_submitted() -> None:
    serial = SerialExecutor()
    gate = threading.Event()
    first = serial.submit(gate.wait, 10)
    queued = serial.submit(lambda: "queued")
    serial.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        serial.submit(lambda: "late")
    gate.set()
    assert first.result(10) is True and queued.result(10) == "queued"
