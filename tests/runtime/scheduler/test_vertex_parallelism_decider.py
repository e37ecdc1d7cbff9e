"""Layer 1: the AdaptiveBatchScheduler's parallelism decisions (volumes in, parallelism and
subpartition ranges out; fact sheet 7.4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flintlock.runtime.scheduler.adaptivebatch.vertex_parallelism_decider import (
    BlockingInputInfo,
    compute_subpartition_ranges,
    decide_parallelism,
    decide_parallelism_and_input_infos,
    even_subpartition_ranges,
)

MB = 1 << 20


def hash_input(*sizes: int) -> BlockingInputInfo:
    return BlockingInputInfo(tuple(sizes))


def test_parallelism_is_bytes_over_volume_per_task_clamped() -> None:
    # 256 MiB + 512 MiB over 64 MiB per task = 12; clamped into [1, 8] -> 8, into [16, 32] -> 16
    inputs = [hash_input(256 * MB), hash_input(512 * MB)]
    assert decide_parallelism(inputs, 1, 100, 64 * MB) == 12
    assert decide_parallelism(inputs, 1, 8, 64 * MB) == 8
    assert decide_parallelism(inputs, 16, 32, 64 * MB) == 16
    # a single byte still needs a subtask; broadcast inputs do not count
    assert decide_parallelism([hash_input(1), BlockingInputInfo((10 * MB,), broadcast=True)], 1, 8, MB) == 1
    assert decide_parallelism([BlockingInputInfo((10 * MB,), broadcast=True)], 3, 8, MB) == 3


def test_greedy_ranges_cut_before_the_limit_is_exceeded() -> None:
    volumes = [10, 15, 13, 12, 1, 10, 8, 20, 12, 17]
    assert compute_subpartition_ranges(volumes, 25) == [(0, 1), (2, 3), (4, 6), (7, 7), (8, 8), (9, 9)]
    # a subpartition above the limit is a range of its own
    assert compute_subpartition_ranges([5, 100, 5], 10) == [(0, 0), (1, 1), (2, 2)]
    assert compute_subpartition_ranges([0, 0, 0], 1) == [(0, 2)]


def test_even_split_of_subpartitions() -> None:
    assert even_subpartition_ranges(8, 3) == ((0, 1), (2, 4), (5, 7))
    assert even_subpartition_ranges(4, 4) == ((0, 0), (1, 1), (2, 2), (3, 3))


def test_skewed_subpartitions_are_balanced_by_volume() -> None:
    # 8 subpartitions, one hot (40 MiB); 16 MiB per task: the hot one alone, the rest grouped
    sizes = (4 * MB, 4 * MB, 40 * MB, 4 * MB, 4 * MB, 4 * MB, 4 * MB, 4 * MB)
    d = decide_parallelism_and_input_infos([hash_input(*sizes)], 1, 8, 16 * MB)
    assert d.subpartition_ranges == ((0, 1), (2, 2), (3, 6), (7, 7))
    assert d.parallelism == 4 and d.reason == "balanced by data volume"


def test_two_hash_inputs_are_cut_at_the_same_indices() -> None:
    # a join: subpartition k of both sides holds the same keys, so their volumes add up
    left, right = hash_input(6, 6, 6, 6), hash_input(10, 0, 10, 0)
    d = decide_parallelism_and_input_infos([left, right], 1, 4, 16)
    assert d.subpartition_ranges == ((0, 0), (1, 1), (2, 2), (3, 3))
    d = decide_parallelism_and_input_infos([left, right], 1, 4, 22)
    assert d.subpartition_ranges == ((0, 1), (2, 3))


def test_count_below_min_parallelism_is_raised_to_the_closest_legal_one() -> None:
    # 6 x 1 MiB at 16 MiB per task would be one range; min 3 -> the largest limit still giving
    # at least 3 ranges (2 MiB), which gives exactly 3
    d = decide_parallelism_and_input_infos([hash_input(*[MB] * 6)], 3, 6, 16 * MB)
    assert d.subpartition_ranges == ((0, 1), (2, 3), (4, 5))
    # 4 x 1 MiB cannot be cut into 3 balanced ranges: the closest legal count is 4
    d = decide_parallelism_and_input_infos([hash_input(MB, MB, MB, MB)], 3, 4, 16 * MB)
    assert d.subpartition_ranges == ((0, 0), (1, 1), (2, 2), (3, 3))


def test_count_above_max_parallelism_is_lowered() -> None:
    d = decide_parallelism_and_input_infos([hash_input(*[10 * MB] * 8)], 1, 2, 16 * MB)
    assert d.parallelism == 2 and d.subpartition_ranges == ((0, 3), (4, 7))


def test_broadcast_bytes_use_up_to_half_a_task() -> None:
    hashed = hash_input(6, 6, 6, 6)
    small = BlockingInputInfo((4,), broadcast=True)
    big = BlockingInputInfo((1000,), broadcast=True)
    # limit 24 - 4 = 20 -> ranges of 3 subpartitions (18) then 1
    assert decide_parallelism_and_input_infos([hashed, small], 1, 4, 24).subpartition_ranges == ((0, 2), (3, 3))
    # a huge broadcast input counts as half: limit 12 -> pairs
    assert decide_parallelism_and_input_infos([hashed, big], 1, 4, 24).subpartition_ranges == ((0, 1), (2, 3))


def test_pointwise_and_broadcast_only_inputs_use_the_byte_count() -> None:
    rescale = BlockingInputInfo((30,), pointwise=True)
    d = decide_parallelism_and_input_infos([rescale, rescale], 1, 8, 20)
    assert (d.parallelism, d.subpartition_ranges) == (3, ())
    only_broadcast = decide_parallelism_and_input_infos([BlockingInputInfo((5,), broadcast=True)], 2, 8, 20)
    assert only_broadcast.parallelism == 2


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="at least one input"):
        decide_parallelism_and_input_infos([], 1, 2, 10)
    with pytest.raises(ValueError, match="out of order"):
        decide_parallelism_and_input_infos([hash_input(1)], 3, 2, 10)
    with pytest.raises(ValueError, match="different subpartition counts"):
        decide_parallelism_and_input_infos([hash_input(1, 2), hash_input(1)], 1, 2, 10)


@given(st.lists(st.integers(0, 50 * MB), min_size=1, max_size=64), st.integers(1, 8),
       st.integers(0, 8), st.integers(1, 64 * MB))
def test_ranges_cover_every_subpartition_once_within_the_bounds(
        sizes: list[int], low: int, extra: int, volume: int) -> None:
    high = min(low + extra, len(sizes))
    low = min(low, high)
    d = decide_parallelism_and_input_infos([hash_input(*sizes)], low, high, volume)
    assert low <= d.parallelism <= high
    assert len(d.subpartition_ranges) == d.parallelism
    covered = [k for s, e in d.subpartition_ranges for k in range(s, e + 1)]
    assert covered == list(range(len(sizes)))
