"""The execution-time based slow task detector (pure; Flink's worked rules, fact sheet 7.5)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flintlock.config import Configuration
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.scheduler.slowtaskdetector.execution_time_based import (
    AttemptTimes,
    SlowTaskDetectorSettings,
    VertexAttempts,
    find_slow_tasks,
)

V = JobVertexID("a" * 32)
S = ExecutionState
NOW = 1_000_000
SETTINGS = SlowTaskDetectorSettings(0.75, 1.5, 0)


def _attempt(index: int, state: ExecutionState, ran_ms: int, attempt: int = 0) -> AttemptTimes:
    """An attempt of subtask ``index`` that ran ``ran_ms`` (until now, or until it finished)."""
    attempt_id = ExecutionAttemptID(ExecutionVertexID(V, index), attempt, "n")
    if state is S.FINISHED:
        return AttemptTimes(attempt_id, state, NOW - 500_000, NOW - 500_000 + ran_ms)
    return AttemptTimes(attempt_id, state, NOW - ran_ms)


def _vertex(*subtasks: AttemptTimes) -> VertexAttempts:
    return VertexAttempts(len(subtasks), [[a] for a in subtasks])


def test_a_subtask_is_slow_past_the_multiplied_median_of_the_fastest_finished_ones():
    # 4 subtasks, ratio 0.75: 3 must have finished; baseline = median(10, 20, 30) = 20 s
    vertex = _vertex(_attempt(0, S.FINISHED, 10_000), _attempt(1, S.FINISHED, 30_000),
                     _attempt(2, S.FINISHED, 20_000), _attempt(3, S.RUNNING, 29_999))
    assert find_slow_tasks([vertex], SETTINGS, NOW) == []
    slow = _vertex(*vertex.subtasks[0], *vertex.subtasks[1], *vertex.subtasks[2],
                   _attempt(3, S.RUNNING, 30_000))  # 1.5 x 20 s
    assert find_slow_tasks([slow], SETTINGS, NOW) == [slow.subtasks[3][0].attempt_id]


def test_nothing_is_slow_before_enough_subtasks_finished():
    vertex = _vertex(_attempt(0, S.FINISHED, 1_000), _attempt(1, S.FINISHED, 1_000),
                     _attempt(2, S.RUNNING, 900_000), _attempt(3, S.RUNNING, 900_000))
    assert find_slow_tasks([vertex], SETTINGS, NOW) == []


def test_the_lower_bound_protects_short_jobs_and_a_zero_share_needs_no_finished_subtask():
    vertex = _vertex(_attempt(0, S.FINISHED, 100), _attempt(1, S.FINISHED, 100),
                     _attempt(2, S.FINISHED, 100), _attempt(3, S.RUNNING, 59_999))
    bounded = SlowTaskDetectorSettings(0.75, 1.5, 60_000)
    assert find_slow_tasks([vertex], bounded, NOW) == []
    assert find_slow_tasks([vertex], bounded, NOW + 1) == [vertex.subtasks[3][0].attempt_id]
    alone = _vertex(_attempt(0, S.RUNNING, 60_000))  # round(1 * 0.0) = 0 finished needed
    assert find_slow_tasks([alone], SlowTaskDetectorSettings(0.0, 1.5, 60_000), NOW) == [
        alone.subtasks[0][0].attempt_id]


def test_only_running_attempts_of_unfinished_subtasks_are_slow():
    finished = [_attempt(i, S.FINISHED, 1_000) for i in range(3)]
    speculated = [_attempt(3, S.RUNNING, 50_000), _attempt(3, S.RUNNING, 40_000, attempt=1)]
    won = [_attempt(4, S.FINISHED, 5_000, attempt=1), _attempt(4, S.CANCELING, 50_000)]
    waiting = [_attempt(5, S.SCHEDULED, 50_000)]
    vertex = VertexAttempts(6, [[a] for a in finished] + [speculated, won, waiting])
    slow = find_slow_tasks([vertex], SETTINGS, NOW)
    assert slow == [speculated[0].attempt_id, speculated[1].attempt_id]


def test_settings_come_from_flinks_keys():
    conf = Configuration({"slow-task-detector.execution-time.baseline-ratio": "0.5",
                          "slow-task-detector.execution-time.baseline-multiplier": "2",
                          "slow-task-detector.execution-time.baseline-lower-bound": "10 s"})
    assert SlowTaskDetectorSettings.from_configuration(conf) == SlowTaskDetectorSettings(
        0.5, 2.0, 10_000)
    assert SlowTaskDetectorSettings.from_configuration(Configuration()) == (
        SlowTaskDetectorSettings(0.75, 1.5, 60_000))


@given(st.lists(st.integers(1, 100_000), min_size=1, max_size=20), st.integers(0, 200_000))
def test_a_subtask_running_no_longer_than_every_finished_one_is_never_slow(times, extra):
    """Whatever the finished times, an attempt that has run less than the fastest finished
    one times the multiplier is not slow; one beyond the slowest finished one times the
    multiplier always is (once enough finished)."""
    finished = [_attempt(i, S.FINISHED, t) for i, t in enumerate(times)]
    quick = _attempt(len(times), S.RUNNING, int(min(times) * 1.5) - 1)
    late = _attempt(len(times) + 1, S.RUNNING, int(max(times) * 1.5) + 1 + extra)
    vertex = VertexAttempts(len(times) + 2, [[a] for a in (*finished, quick, late)])
    slow = find_slow_tasks([vertex], SlowTaskDetectorSettings(0.5, 1.5, 0), NOW)
    assert quick.attempt_id not in slow
    if len(times) >= round((len(times) + 2) * 0.5):
        assert late.attempt_id in slow
