"""Peak resident memory (RSS) of the benchmarked processes, sampled with psutil.

``MemorySampler`` samples every ``interval_s`` in a daemon thread. Each watched *role* (e.g.
``"flintlock-taskmanager-0"``, ``"pyspark-cold"``) is a set of root processes; a sample sums the
RSS of each root and of all its descendants (the Spark JVM is a child of the Python process that
starts it). Per role it keeps the peak RSS of the root process alone and of the whole tree, in
bytes. Short-lived processes (cold runs) are watched while they run; peaks are taken over all of
them. A role watched with ``tree=False`` (the harness itself, whose children are the other systems)
counts its root processes only. Sampling misses spikes shorter than the interval (0.2 s by default).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil

__all__ = ["MemorySampler"]


class MemorySampler:
    def __init__(self, interval_s: float = 0.2) -> None:
        self._interval = interval_s
        self._lock = threading.Lock()
        self._roles: dict[str, set[int]] = {}
        self._flat: set[str] = set()
        self._peaks: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def watch(self, role: str, pid: int, tree: bool = True) -> None:
        with self._lock:
            self._roles.setdefault(role, set()).add(pid)
            if not tree:
                self._flat.add(role)
        self.sample_once()

    def unwatch(self, role: str, pid: int) -> None:
        with self._lock:
            self._roles.get(role, set()).discard(pid)

    @contextmanager
    def watching(self, role: str, pid: int, tree: bool = True) -> Iterator[None]:
        self.watch(role, pid, tree)
        try:
            yield
        finally:
            self.unwatch(role, pid)

    def peaks(self) -> dict[str, dict[str, Any]]:
        """``{role: {"peak_rss_bytes", "peak_tree_rss_bytes", "processes"}}``."""
        with self._lock:
            return {role: dict(p) for role, p in sorted(self._peaks.items())}

    def sample_once(self) -> None:
        with self._lock:
            roles = {role: set(pids) for role, pids in self._roles.items()}
            flat = set(self._flat)
        for role, pids in roles.items():
            for pid in pids:
                own, tree, count = _tree_rss(pid, role not in flat)
                if count == 0:
                    continue
                with self._lock:
                    peak = self._peaks.setdefault(
                        role, {"peak_rss_bytes": 0, "peak_tree_rss_bytes": 0, "processes": 0})
                    peak["peak_rss_bytes"] = max(peak["peak_rss_bytes"], own)
                    peak["peak_tree_rss_bytes"] = max(peak["peak_tree_rss_bytes"], tree)
                    peak["processes"] = max(peak["processes"], count)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample_once()


def _tree_rss(pid: int, tree: bool = True) -> tuple[int, int, int]:
    """(RSS of ``pid``, RSS of ``pid`` and its descendants, number of processes) in bytes."""
    try:
        root = psutil.Process(pid)
        own = root.memory_info().rss
        children = root.children(recursive=True) if tree else []
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return 0, 0, 0
    tree, count = own, 1
    for child in children:
        try:
            tree += child.memory_info().rss
            count += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return own, tree, count
