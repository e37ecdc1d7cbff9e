"""The checkpoint-state benchmark end to end at a small state (2,000 keys): it runs its job,
stops it with a savepoint (the job FINISHES) and reports the checkpoints' sizes and durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.streaming.checkpoint_state import measure

pytestmark = [pytest.mark.spark]


@pytest.mark.timeout(300)
def test_measure_reports_checkpoints_and_the_savepoint_of_the_keyed_state(tmp_path: Path) -> None:
    result = measure(2_000, tmp_path)
    assert result["keys"] == 2_000 and result["checkpoints"] >= 1, result
    # every row is held by the window: the savepoint holds at least the largest checkpoint
    assert 0 < result["largest_state_bytes"] <= result["savepoint_state_bytes"], result
    assert result["savepoint_duration_ms"] > 0 and result["largest_duration_ms"] > 0, result
    assert Path(result["savepoint"], "_metadata").is_file(), result
