"""Shared fixtures: one Spark Connect session for the whole test session (marker ``spark``).

Starting the embedded Spark Connect server takes ~5-10 s, so every test that needs Spark shares one
session through the session-scoped ``spark`` fixture; ``spark_provider`` wraps it as the
``"spark"`` service of a RuntimeEnvironment. Set ``FLINTLOCK_TEST_SPARK_REMOTE=sc://host:port`` to
run against an external Spark Connect server instead.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark_session_provider():
    """The process-wide ``SparkSessionProvider`` of the test session (created once)."""
    from flintlock.config import Configuration
    from flintlock.runtime.spark.session import SparkSessionProvider

    conf = Configuration()
    remote = os.environ.get("FLINTLOCK_TEST_SPARK_REMOTE")
    if remote:
        conf.set_string("spark.remote", remote)
    provider = SparkSessionProvider(conf)
    yield provider
    provider.stop()


@pytest.fixture(scope="session")
def spark(spark_session_provider):
    """The shared Spark Connect ``SparkSession`` (Connect mode, local[cores] by default)."""
    return spark_session_provider.get()


@pytest.fixture
def spark_provider(spark):
    """A ``SparkSessionProvider`` around the shared session (``stop()`` leaves it running)."""
    from flintlock.runtime.spark.session import SparkSessionProvider

    return SparkSessionProvider.wrap(spark)
