"""The helpers of ``benchmarks.streaming.examples_run`` (no cluster, no Spark): reading the word
count's printed windows back, and dropping text chunks the way the file source expects."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from benchmarks.streaming.examples_run import _drop_text, _printed_counts


def test_printed_windows_are_summed_per_word_over_every_taskmanager(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.mkdir()
    (log / "taskmanager-1.log").write_text(
        "INFO some log line count=99\n"
        "1> Row(word='the', window_start=datetime.datetime(2026, 12, 1, 0, 0), count=3)\n"
        # two subtasks printing at once can share a line
        "2> Row(word=\"o'er\", window_start=datetime.datetime(2026, 12, 1, 0, 0), count=1)"
        "1> Row(word='the', window_start=datetime.datetime(2026, 12, 1, 0, 5), count=2)\n")
    (log / "taskmanager-2.log").write_text(
        "1> Row(word='and', window_start=datetime.datetime(2026, 12, 1, 0, 0), count=4)\n")
    (log / "jobmanager.log").write_text(
        "1> Row(word='the', window_start=datetime.datetime(2026, 12, 1, 0, 0), count=50)\n")
    counts = _printed_counts(SimpleNamespace(state_dir=tmp_path))  # type: ignore[arg-type]
    assert counts == Counter({"the": 5, "and": 4, "o'er": 1})


def test_chunks_are_renamed_into_place_and_remembered(tmp_path: Path) -> None:
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.txt").write_text("\n".join(f"line {i}" for i in range(150)))
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    dropped: list[str] = []
    _drop_text(tmp_path, incoming, 0.01, threading.Event(), dropped)
    assert [p.name for p in incoming.iterdir()] == ["chunk-00000.txt"]  # no hidden file left
    assert dropped == ["\n".join(f"line {i}" for i in range(100))]
    assert (incoming / "chunk-00000.txt").read_text() == dropped[0]
