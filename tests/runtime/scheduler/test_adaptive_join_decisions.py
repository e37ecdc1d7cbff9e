"""Layer 1: the AdaptiveBatchScheduler's run-time join decisions (stored bytes in, parallelism and
per-subtask reads out): adaptive broadcast joins and skewed-join splits (Flink FLIP-470)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flintlock.config.configuration import Configuration, IllegalConfigurationException
from flintlock.runtime.executiongraph.intermediate_result import ConsumedSubpartitions
from flintlock.runtime.scheduler.adaptivebatch.adaptive_join import (
    AdaptiveJoinSettings,
    JoinInput,
    broadcast_side,
    decide_adaptive_join,
    skewed_subpartitions,
)

MB = 1 << 20
NO_SKEW = AdaptiveJoinSettings(skew_strategy="NONE")


def uniform(producers: int, subpartitions: int, size: int) -> JoinInput:
    return JoinInput(tuple((size,) * subpartitions for _ in range(producers)))


def pairs_read(decision, left: JoinInput, right: JoinInput) -> dict[tuple[int, int, int], int]:  # type: ignore[no-untyped-def]
    """(subpartition k, left producer p, right producer q) -> how many subtasks read both
    left (p, k) and right (q, k): every pair of rows that may match must meet exactly once."""
    seen: dict[tuple[int, int, int], int] = {}
    for lr, rr in zip(decision.input_infos["left"], decision.input_infos["right"], strict=True):
        for k in range(max(lr.subpartition_start, rr.subpartition_start),
                       min(lr.subpartition_end, rr.subpartition_end) + 1):
            for p, q in itertools.product(lr.partition_numbers, rr.partition_numbers):
                seen[(k, p, q)] = seen.get((k, p, q), 0) + 1
    return seen


def every_pair(left: JoinInput, right: JoinInput) -> set[tuple[int, int, int]]:
    return set(itertools.product(range(left.num_subpartitions), range(left.producers),
                                 range(right.producers)))


# ---- broadcast ----------------------------------------------------------------------------------

def test_a_small_right_side_is_broadcast_and_the_left_side_alone_sizes_the_vertex() -> None:
    left = uniform(2, 4, 8 * MB)      # 64 MiB in 4 subpartitions of 16 MiB
    right = uniform(3, 4, 50_000)     # 600 kB: under the 1 MiB default threshold
    d = decide_adaptive_join("inner", left, right, NO_SKEW, 1, 4, 16 * MB)
    assert d is not None and d.broadcast_side == "right"
    # the build side counts against the volume (600 kB), so each 16 MiB subpartition is alone
    assert d.parallelism == 4
    assert d.input_infos["left"] == tuple(ConsumedSubpartitions((0, 1), k, k) for k in range(4))
    assert d.input_infos["right"] == (ConsumedSubpartitions((0, 1, 2), 0, 3),) * 4
    assert d.operator_strategy == "BROADCAST_HASH_JOIN (adaptive, right side 600000 bytes)"
    assert "right side stored 600000 bytes" in d.reason
    assert set(pairs_read(d, left, right).values()) == {1}
    assert set(pairs_read(d, left, right)) == every_pair(left, right)


def test_the_threshold_is_inclusive_and_minus_one_turns_it_off() -> None:
    left, right = uniform(1, 2, 5 * MB), uniform(1, 2, 500)
    at = AdaptiveJoinSettings(broadcast_threshold=1000, skew_strategy="NONE")
    below = AdaptiveJoinSettings(broadcast_threshold=999, skew_strategy="NONE")
    off = AdaptiveJoinSettings(broadcast_threshold=-1, skew_strategy="NONE")
    assert decide_adaptive_join("inner", left, right, at, 1, 2, 16 * MB).broadcast_side == "right"
    assert decide_adaptive_join("inner", left, right, below, 1, 2, 16 * MB) is None
    assert decide_adaptive_join("inner", left, right, off, 1, 2, 16 * MB) is None


def test_strategy_none_leaves_the_join_to_the_compiler() -> None:
    none = AdaptiveJoinSettings(broadcast_strategy="NONE", skew_strategy="NONE")
    assert decide_adaptive_join("inner", uniform(1, 2, MB), uniform(1, 2, 1), none, 1, 2, MB) is None


@pytest.mark.parametrize(("how", "left_bytes", "right_bytes", "side"), [
    ("inner", 10, 20, "left"),     # the smaller eligible side
    ("inner", 20, 10, "right"),
    ("left", 10, 20, "right"),     # a left join keeps its left rows: only the right may broadcast
    ("semi", 10, 20, "right"),
    ("anti", 10, 20, "right"),
    ("right", 20, 10, "left"),
    ("full", 1, 1, ""),            # a full join keeps both sides' rows
    ("left", 10, 2000, ""),        # the eligible side is above the threshold
])
def test_which_side_a_join_type_may_broadcast(how: str, left_bytes: int, right_bytes: int,
                                              side: str) -> None:
    assert broadcast_side(how, left_bytes, right_bytes, 1000) == side


def test_settings_come_from_flinks_keys() -> None:
    s = AdaptiveJoinSettings.from_configuration(Configuration({
        "table.optimizer.adaptive-broadcast-join.strategy": "runtime_only",
        "table.optimizer.join.broadcast-threshold": "10m",
        "table.optimizer.skewed-join-optimization.strategy": "NONE",
        "table.optimizer.skewed-join-optimization.skewed-factor": "2.5",
        "table.optimizer.skewed-join-optimization.skewed-threshold": "1k"}))
    assert s == AdaptiveJoinSettings("RUNTIME_ONLY", 10 * MB, "NONE", 2.5, 1024)
    assert AdaptiveJoinSettings.from_configuration(Configuration({})) == AdaptiveJoinSettings()
    assert AdaptiveJoinSettings().broadcast_threshold == 2 * MB


def test_the_run_time_threshold_falls_back_to_the_compile_time_key_only_when_unset() -> None:
    def threshold(**conf: str) -> int:
        return AdaptiveJoinSettings.from_configuration(Configuration(conf)).broadcast_threshold

    compile_time = "table.optimizer.join.broadcast-threshold"
    run_time = "table.optimizer.adaptive-broadcast-join.threshold"
    assert threshold() == 2 * MB
    assert threshold(**{compile_time: "100k"}) == 100 * 1024
    assert threshold(**{compile_time: "100k", run_time: "3m"}) == 3 * MB
    assert threshold(**{run_time: "-1"}) == -1
    with pytest.raises(IllegalConfigurationException, match="'0.5' is below 1"):
        Configuration({"table.optimizer.skewed-join-optimization.skewed-factor": "0.5"})


# ---- skew ---------------------------------------------------------------------------------------

SKEW = AdaptiveJoinSettings(broadcast_threshold=-1, skewed_factor=4.0, skewed_threshold=100)


def test_skewed_means_above_factor_times_median_and_above_threshold() -> None:
    assert skewed_subpartitions([10, 10, 10, 41, 500], 4.0, 100) == [4]  # 41 > 40 but < 100
    assert skewed_subpartitions([10, 10, 10, 41, 500], 4.0, 0) == [3, 4]
    assert skewed_subpartitions([], 4.0, 0) == []


def test_a_skewed_left_subpartition_is_split_by_producer_and_the_right_one_read_whole() -> None:
    # 4 producers on the left; subpartition 1 holds 400 bytes per producer, the others 10
    left = JoinInput(tuple((10, 400, 10, 10) for _ in range(4)))
    right = uniform(2, 4, 10)
    d = decide_adaptive_join("inner", left, right, SKEW, 1, 8, 1000)
    assert d is not None and d.broadcast_side == ""
    # [0] alone (the next is skewed), 1600 left bytes of [1] over (1000 - 20 for the right side's
    # 20 bytes): two groups of two producers, then [2, 3] together
    assert d.parallelism == 4
    assert d.input_infos["left"] == (
        ConsumedSubpartitions((0, 1, 2, 3), 0, 0),
        ConsumedSubpartitions((0, 1), 1, 1), ConsumedSubpartitions((2, 3), 1, 1),
        ConsumedSubpartitions((0, 1, 2, 3), 2, 3))
    assert d.input_infos["right"] == (
        ConsumedSubpartitions((0, 1), 0, 0), ConsumedSubpartitions((0, 1), 1, 1),
        ConsumedSubpartitions((0, 1), 1, 1), ConsumedSubpartitions((0, 1), 2, 3))
    assert d.operator_strategy == "HASH_JOIN (skewed subpartitions split: 1 (left, 2 subtasks))"
    assert set(pairs_read(d, left, right).values()) == {1}
    assert set(pairs_read(d, left, right)) == every_pair(left, right)


@pytest.mark.parametrize(("how", "split"), [("inner", "right"), ("right", "right"),
                                            ("left", None), ("semi", None), ("full", None)])
def test_only_a_side_the_join_type_lets_split_is_split(how: str, split: str | None) -> None:
    # the right side is skewed at subpartition 0
    left = uniform(2, 3, 10)
    right = JoinInput(tuple((500, 10, 10) for _ in range(3)))
    d = decide_adaptive_join(how, left, right, SKEW, 1, 8, 600)
    if split is None:
        assert d is None
        return
    assert d is not None
    assert [r.partition_numbers for r in d.input_infos[split]][:3] == [(0,), (1,), (2,)]
    assert set(pairs_read(d, left, right).values()) == {1}


def test_the_subtask_count_stays_within_the_max_parallelism_or_there_is_no_split() -> None:
    left = JoinInput(tuple((10, 900, 10) for _ in range(6)))
    right = uniform(1, 3, 10)
    wide = decide_adaptive_join("inner", left, right, SKEW, 1, 8, 1000)
    assert wide is not None and wide.parallelism == 8  # [0], six groups of [1], [2]
    narrow = decide_adaptive_join("inner", left, right, SKEW, 1, 4, 1000)
    assert narrow is not None and narrow.parallelism == 4  # [0], two groups of three, [2]
    assert [r.partition_numbers for r in narrow.input_infos["left"][1:3]] == [(0, 1, 2), (3, 4, 5)]
    # three subtasks fit only one group for [1]: nothing is split
    assert decide_adaptive_join("inner", left, right, SKEW, 1, 3, 1000) is None


@settings(max_examples=200, deadline=None)
@given(
    how=st.sampled_from(["inner", "left", "right", "semi", "anti", "full"]),
    producers=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    data=st.data(),
    threshold=st.integers(-1, 300),
    max_p=st.integers(1, 10),
)
def test_every_pair_of_matching_rows_meets_in_exactly_one_subtask(how, producers, data, threshold, max_p) -> None:  # type: ignore[no-untyped-def]
    n = data.draw(st.integers(1, 6))
    hot = data.draw(st.none() | st.integers(0, n - 1))  # a subpartition 20x as large
    row = st.lists(st.integers(0, 400), min_size=n, max_size=n).map(
        lambda r: tuple(v * 20 if k == hot else v for k, v in enumerate(r)))
    left = JoinInput(tuple(data.draw(row) for _ in range(producers[0])))
    right = JoinInput(tuple(data.draw(row) for _ in range(producers[1])))
    s = AdaptiveJoinSettings(broadcast_threshold=threshold, skewed_factor=2.0, skewed_threshold=50)
    d = decide_adaptive_join(how, left, right, s, 1, min(max_p, n), 200)
    if d is None:
        return
    assert 1 <= d.parallelism <= min(max_p, n)
    assert len(d.input_infos["left"]) == len(d.input_infos["right"]) == d.parallelism
    met = pairs_read(d, left, right)
    assert set(met) == every_pair(left, right) and set(met.values()) == {1}
    # a side whose unmatched rows the join keeps is read exactly once: no row is output twice
    kept = {"left": ("left",), "semi": ("left",), "anti": ("left",), "right": ("right",),
            "full": ("left", "right"), "inner": ()}[how]
    for side in kept:
        cells = [(p, k) for r in d.input_infos[side] for p in r.partition_numbers
                 for k in range(r.subpartition_start, r.subpartition_end + 1)]
        assert len(cells) == len(set(cells)) == (producers[0] if side == "left" else producers[1]) * n
    if d.broadcast_side:
        # the build side is read whole by every subtask; the probe side exactly once
        build = d.input_infos[d.broadcast_side]
        assert all(r.subpartition_start == 0 and r.subpartition_end == n - 1 for r in build)
