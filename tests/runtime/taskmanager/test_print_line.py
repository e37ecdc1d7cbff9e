"""Layer 1: print sinks of several subtasks write whole lines (``invokable.print_line``)."""

from __future__ import annotations

import sys
import threading

from flintlock.runtime.taskmanager.invokable import RuntimeEnvironment, print_line


class _SlowStream:
    """A stdout that takes its time over every character, so that unsynchronised writers
    would interleave."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, data: str) -> int:
        for char in data:
            self.text += char
            threading.Event().wait(0.0001)  # hand the GIL over between characters
        return len(data)

    def flush(self) -> None:
        pass


def test_lines_printed_by_several_threads_at_once_stay_whole(monkeypatch):
    stream = _SlowStream()
    monkeypatch.setattr(sys, "stdout", stream)
    start = threading.Barrier(4)

    def subtask(index: int) -> None:
        start.wait()
        for n in range(10):
            print_line(f"{index + 1}> Row(word='w{index}-{n}')")

    threads = [threading.Thread(target=subtask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = stream.text.splitlines()
    assert sorted(lines) == sorted(f"{i + 1}> Row(word='w{i}-{n}')" for i in range(4)
                                   for n in range(10))
    assert stream.text.endswith("\n")


def test_print_sinks_write_through_print_line_by_default():
    assert RuntimeEnvironment.__dataclass_fields__["print_fn"].default is print_line
