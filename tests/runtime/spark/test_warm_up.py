"""The TaskManager's Spark warm-up runs its plan and cleans up after itself."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from flintlock.runtime.spark.warm_up import warm_up

pytestmark = [pytest.mark.spark]


def test_warm_up_runs_the_plan_and_leaves_no_files(spark, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="flintlock.runtime.spark.warm_up"):
        took = warm_up(spark, str(tmp_path))
    assert took > 0
    assert "Spark warmed up" in caplog.text and "failed" not in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_a_failing_warm_up_only_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def range(self, *args: object) -> None:
            raise RuntimeError("the Spark server is gone")

    with caplog.at_level(logging.WARNING, logger="flintlock.runtime.spark.warm_up"):
        warm_up(Broken(), str(tmp_path))
    assert "Spark warm-up failed" in caplog.text and "the Spark server is gone" in caplog.text
    assert list(tmp_path.iterdir()) == []
