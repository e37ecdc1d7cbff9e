"""LogDirectory (allowlisted, ranged reads), task log files and the thread output capture."""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path

import pytest

from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobID, JobVertexID
from flintlock.runtime.logs import LogDirectory, LogFileNotFoundException, task_log_file_name_of
from flintlock.runtime.logs.capture import capture_thread_output
from flintlock.runtime.logs.files import MAX_LOG_CHUNK_BYTES
from flintlock.runtime.logs.task_logs import TaskLogWriter, open_task_log

JOB = JobID("0123456789abcdef0123456789abcdef")
VERTEX = JobVertexID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")


def test_task_log_file_name_carries_job_vertex_subtask_and_attempt():
    attempt = ExecutionAttemptID(ExecutionVertexID(VERTEX, 3), 2, "n0nce")
    assert task_log_file_name_of(JOB, attempt) == f"task-{JOB}-{VERTEX}-3-2.log"


def test_reads_ranges_of_registered_files_only(tmp_path: Path):
    logs = LogDirectory(tmp_path)
    logs.register("a.log").write_bytes(b"0123456789")
    (tmp_path / "secret.txt").write_bytes(b"not served")
    assert logs.read("a.log", 2, 3).data == b"234"
    tail = logs.read("a.log", -4, 100)
    assert (tail.start, tail.data, tail.size, tail.end) == (6, b"6789", 10, 10)
    assert logs.read("a.log", 50, 5).data == b""
    with pytest.raises(LogFileNotFoundException, match="No log file named 'secret.txt'"):
        logs.read("secret.txt")
    assert [i.name for i in logs.list_logs()] == ["a.log"]


@pytest.mark.parametrize("name", ["../a.log", "/etc/passwd", "..", ".hidden", "a/b.log", "",
                                  "a" * 300, "a\x00.log"])
def test_rejects_names_that_could_leave_the_directory(tmp_path: Path, name: str):
    logs = LogDirectory(tmp_path)
    with pytest.raises(LogFileNotFoundException, match="Invalid log file name"):
        logs.read(name)
    with pytest.raises(LogFileNotFoundException):
        logs.register(name)


def test_chunks_are_bounded(tmp_path: Path):
    logs = LogDirectory(tmp_path)
    logs.register("big.log").write_bytes(b"x" * (MAX_LOG_CHUNK_BYTES + 10))
    assert len(logs.read("big.log", 0, 10 * MAX_LOG_CHUNK_BYTES).data) == MAX_LOG_CHUNK_BYTES


def test_main_log_and_eviction_of_the_oldest_file(tmp_path: Path):
    logs = LogDirectory(tmp_path, max_files=2)
    with pytest.raises(LogFileNotFoundException, match="has no log file"):
        logs.read(None)
    logs.set_main_log("main.log").write_text("process\n")
    for name in ("t1.log", "t2.log", "t3.log"):
        logs.register(name).write_text(name)
    assert not (tmp_path / "t1.log").exists()
    assert {i.name for i in logs.list_logs()} == {"main.log", "t2.log", "t3.log"}
    assert logs.read(None).data == b"process\n"


def test_owned_temporary_directory_is_removed_on_close():
    logs = LogDirectory.temporary("flintlock-test-logs-")
    path = logs.path
    logs.register("x.log").write_text("x")
    logs.close()
    assert not path.exists()


def test_task_log_writer_is_bounded(tmp_path: Path):
    writer = TaskLogWriter(tmp_path / "t.log", max_bytes=100)
    writer.write("a" * 60)
    writer.write("b" * 60)
    writer.write("c" * 10)
    writer.close()
    text = (tmp_path / "t.log").read_text()
    assert text == "a" * 60 + "\n[task log truncated at 100 bytes]\n"
    writer.write("after close is ignored")


def test_capture_routes_only_the_capturing_threads_output(tmp_path: Path):
    logs = LogDirectory(tmp_path)
    attempt = ExecutionAttemptID(ExecutionVertexID(VERTEX, 0), 0, "n0nce")
    writer = open_task_log(logs, JOB, "job", attempt, "Map (1/1)#0", "tm-1")
    logger = logging.getLogger("flintlock.test.capture")
    logger.setLevel(logging.INFO)
    original_stdout = sys.stdout
    other_done = threading.Event()

    def other_thread() -> None:
        print("printed by another thread")
        logger.info("logged by another thread")
        other_done.set()

    with capture_thread_output(writer):
        print("printed by the task")
        logger.warning("logged by the task: %s", 42)
        other = threading.Thread(target=other_thread)
        other.start()
        other.join()
    writer.close()
    assert other_done.is_set()
    assert sys.stdout is original_stdout  # restored after the last capture
    text = logs.read(f"task-{JOB}-{VERTEX}-0-0.log").data.decode()
    assert "Task Map (1/1)#0" in text and "on TaskManager tm-1" in text
    assert "printed by the task" in text
    assert "WARNING flintlock.test.capture" in text and "logged by the task: 42" in text
    assert "another thread" not in text
