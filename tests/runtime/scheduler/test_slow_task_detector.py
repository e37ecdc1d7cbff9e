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
    next_slow_at_ms,
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


def test_the_next_check_is_due_when_the_first_running_attempt_crosses_the_threshold():
    # 5 subtasks, ratio 0.6: 3 finished; baseline median(1, 2, 3) s = 2 s, threshold 3 s;
    # subtask 3 ran 2.5 s, subtask 4 ran 1 s
    settings = SlowTaskDetectorSettings(0.6, 1.5, 0)
    finished = [_attempt(i, S.FINISHED, t) for i, t in enumerate((1_000, 2_000, 3_000))]
    vertex = VertexAttempts(5, [[a] for a in finished] + [[_attempt(3, S.RUNNING, 2_500)],
                                                          [_attempt(4, S.RUNNING, 1_000)]])
    assert next_slow_at_ms([vertex], settings, NOW) == NOW + 500
    assert find_slow_tasks([vertex], settings, NOW + 499) == []
    assert find_slow_tasks([vertex], settings, NOW + 500) == [vertex.subtasks[3][0].attempt_id]
    # past subtask 3's crossing, the next one is subtask 4's
    assert next_slow_at_ms([vertex], settings, NOW + 500) == NOW + 2_000


def test_no_next_check_without_a_baseline_or_with_nothing_left_to_become_slow():
    waiting = _vertex(_attempt(0, S.FINISHED, 1_000), _attempt(1, S.RUNNING, 500),
                      _attempt(2, S.RUNNING, 500), _attempt(3, S.RUNNING, 500))
    assert next_slow_at_ms([waiting], SETTINGS, NOW) is None  # 1 of the 3 needed finished
    all_slow = _vertex(*[_attempt(i, S.FINISHED, 1_000) for i in range(3)],
                       _attempt(3, S.RUNNING, 5_000))
    assert next_slow_at_ms([all_slow], SETTINGS, NOW) is None
    assert next_slow_at_ms([], SETTINGS, NOW) is None


@given(st.lists(st.integers(1, 100_000), min_size=1, max_size=12),
       st.lists(st.integers(0, 300_000), min_size=1, max_size=6),
       st.sampled_from([0, 1_000, 60_000]))
def test_nothing_new_is_slow_before_the_next_check_and_something_is_at_it(finished_ms, running_ms,
                                                                         lower_bound):
    """With the attempts' states unchanged, the slow set stays what it is now until
    ``next_slow_at_ms`` and grows at it."""
    settings = SlowTaskDetectorSettings(0.5, 1.5, lower_bound)
    attempts = [_attempt(i, S.FINISHED, t) for i, t in enumerate(finished_ms)]
    attempts += [_attempt(len(finished_ms) + i, S.RUNNING, t) for i, t in enumerate(running_ms)]
    vertex = _vertex(*attempts)
    now_slow = set(find_slow_tasks([vertex], settings, NOW))
    at = next_slow_at_ms([vertex], settings, NOW)
    if at is None:
        assert set(find_slow_tasks([vertex], settings, NOW + 10_000_000)) == now_slow
        return
    assert at > NOW
    assert set(find_slow_tasks([vertex], settings, at - 1)) == now_slow
    assert set(find_slow_tasks([vertex], settings, at)) > now_slow
