"""Which running subtasks are slow (pure; Flink ``ExecutionTimeBasedSlowTaskDetector``).

Every ``slow-task-detector.check-interval`` the speculative scheduler asks, per job vertex that is
expanded and not finished, for the attempts that run much longer than their finished siblings:

- ``n = round(parallelism * baseline-ratio)`` subtasks must have FINISHED; the baseline is the
  median execution time of the ``n`` fastest finished ones (none needed when ``n`` is 0: the
  baseline is 0; fewer finished than ``n``: nothing is slow yet);
- an attempt is slow when it is DEPLOYING, INITIALIZING or RUNNING, and its execution time (now
  minus its DEPLOYING timestamp, ms) is at least ``max(baseline * baseline-multiplier,
  baseline-lower-bound)``.

Flink weights times by input bytes when sizes are known; flintlock learns a subtask's input size
only when it ends, so times are compared as they are.

``next_slow_at_ms`` is when the next running attempt crosses its vertex's threshold, given the
baselines known now: the speculative scheduler checks again then instead of at its next
periodic check, so a slow subtask is found the moment it qualifies (Flink checks only every
``check-interval``; the decisions are the same, made up to one interval sooner).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flintlock.config.batch_execution_options import (
    SLOW_TASK_BASELINE_LOWER_BOUND,
    SLOW_TASK_BASELINE_MULTIPLIER,
    SLOW_TASK_BASELINE_RATIO,
)
from flintlock.config.configuration import Configuration
from flintlock.runtime.ids import ExecutionAttemptID
from flintlock.runtime.jobgraph.types import ExecutionState

__all__ = [
    "AttemptTimes",
    "SlowTaskDetectorSettings",
    "VertexAttempts",
    "find_slow_tasks",
    "next_slow_at_ms",
]

_RUNNING = (ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING)


@dataclass(frozen=True)
class SlowTaskDetectorSettings:
    """``slow-task-detector.execution-time.*`` (ms for the lower bound)."""

    baseline_ratio: float = 0.75
    baseline_multiplier: float = 1.5
    baseline_lower_bound_ms: int = 60_000

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> SlowTaskDetectorSettings:
        return cls(configuration.get(SLOW_TASK_BASELINE_RATIO),
                   configuration.get(SLOW_TASK_BASELINE_MULTIPLIER),
                   round(configuration.get(SLOW_TASK_BASELINE_LOWER_BOUND) * 1000))


@dataclass(frozen=True)
class AttemptTimes:
    """One attempt: its state, and the epoch ms it entered DEPLOYING and ended (0: not yet)."""

    attempt_id: ExecutionAttemptID
    state: ExecutionState
    deploying_ms: int
    end_ms: int = 0

    def execution_time_ms(self, now_ms: int) -> int:
        if not self.deploying_ms:
            return 0
        return max(0, (self.end_ms or now_ms) - self.deploying_ms)


@dataclass(frozen=True)
class VertexAttempts:
    """An expanded job vertex that has not finished: its parallelism and, per subtask, its
    current attempts (the original and any speculative ones)."""

    parallelism: int
    subtasks: Sequence[Sequence[AttemptTimes]]


def _baseline_ms(vertex: VertexAttempts, settings: SlowTaskDetectorSettings,
                 now_ms: int) -> float | None:
    """The vertex's baseline time (ms), or None while too few subtasks finished."""
    needed = round(vertex.parallelism * settings.baseline_ratio)
    if needed == 0:
        return 0.0
    finished = sorted(a.execution_time_ms(now_ms) for attempts in vertex.subtasks
                      for a in attempts if a.state is ExecutionState.FINISHED)
    if len(finished) < needed:
        return None
    fastest = finished[:needed]
    middle = len(fastest) // 2
    median = (fastest[middle] if len(fastest) % 2
              else (fastest[middle - 1] + fastest[middle]) / 2)
    return float(median)


def _threshold_ms(vertex: VertexAttempts, settings: SlowTaskDetectorSettings,
                  now_ms: int) -> float | None:
    """The execution time (ms) from which the vertex's running attempts are slow, or None while
    too few subtasks finished."""
    baseline = _baseline_ms(vertex, settings, now_ms)
    if baseline is None:
        return None
    return max(baseline * settings.baseline_multiplier, settings.baseline_lower_bound_ms)


def _unfinished_running(vertex: VertexAttempts) -> list[AttemptTimes]:
    """The running attempts of the vertex's subtasks that no attempt has finished yet."""
    return [a for attempts in vertex.subtasks
            if not any(a.state is ExecutionState.FINISHED for a in attempts)
            for a in attempts if a.state in _RUNNING]


def find_slow_tasks(vertices: Iterable[VertexAttempts], settings: SlowTaskDetectorSettings,
                    now_ms: int) -> list[ExecutionAttemptID]:
    """The slow attempts of ``vertices`` at ``now_ms`` (see the module docstring), in the
    order given."""
    slow: list[ExecutionAttemptID] = []
    for vertex in vertices:
        threshold = _threshold_ms(vertex, settings, now_ms)
        if threshold is None:
            continue
        slow += [a.attempt_id for a in _unfinished_running(vertex)
                 if a.execution_time_ms(now_ms) >= threshold]
    return slow


def next_slow_at_ms(vertices: Iterable[VertexAttempts], settings: SlowTaskDetectorSettings,
                    now_ms: int) -> int | None:
    """The earliest epoch ms after ``now_ms`` at which a running attempt of ``vertices`` that is
    not slow yet becomes slow under the baselines known at ``now_ms``; None when none will
    (no baseline yet, or nothing running that is not slow already). Attempts still without a
    DEPLOYING timestamp are left out."""
    upcoming = [a.deploying_ms + math.ceil(threshold)
                for vertex in vertices
                if (threshold := _threshold_ms(vertex, settings, now_ms)) is not None
                for a in _unfinished_running(vertex)
                if a.deploying_ms and a.execution_time_ms(now_ms) < threshold]
    return min(upcoming, default=None)
