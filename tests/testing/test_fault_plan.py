"""Seeded fault plans (pure): reproducible, within bounds, every requested fault once."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flintlock.testing.fault_plan import FaultKind, plan_faults


def test_the_same_seed_gives_the_same_plan_and_another_seed_another() -> None:
    assert plan_faults(7, records=6000) == plan_faults(7, records=6000)
    assert plan_faults(7, records=6000) != plan_faults(8, records=6000)
    text = plan_faults(7, records=6000).describe()
    assert text.startswith("seed 7: fail at records [") and "kill-taskmanager +" in text


@given(seed=st.integers(0, 2**32), records=st.integers(10, 10**6),
       kills=st.integers(0, 3), declines=st.integers(0, 3), expiries=st.integers(0, 3),
       task_failures=st.integers(0, 8))
def test_a_plan_holds_each_requested_fault_within_bounds(
        seed: int, records: int, kills: int, declines: int, expiries: int,
        task_failures: int) -> None:
    plan = plan_faults(seed, records=records, task_failures=task_failures, kills=kills,
                       declines=declines, expiries=expiries, max_delay_s=2.0)
    assert len(set(plan.failing_records)) == task_failures == len(plan.failing_records)
    assert all(records // 10 <= r < records - records // 10 for r in plan.failing_records)
    assert list(plan.failing_records) == sorted(plan.failing_records)
    assert Counter(f.kind for f in plan.timed) == Counter(
        {FaultKind.KILL_TASK_MANAGER: kills, FaultKind.DECLINE_CHECKPOINT: declines,
         FaultKind.EXPIRE_CHECKPOINT: expiries}) - Counter()
    assert all(0.0 <= f.delay_s <= 2.0 and f.target >= 0 for f in plan.timed)


def test_impossible_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        plan_faults(1, records=100, kills=-1)
    with pytest.raises(ValueError, match="do not fit"):
        plan_faults(1, records=10, task_failures=9)
