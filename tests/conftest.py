"""Shared fixtures: one Spark Connect session for the whole test session (marker ``spark``).

Starting the embedded Spark Connect server takes ~5-10 s, so every test that needs Spark shares one
session through the session-scoped ``spark`` fixture; ``spark_provider`` wraps it as the
``"spark"`` service of a RuntimeEnvironment. Set ``FLINTLOCK_TEST_SPARK_REMOTE=sc://host:port`` to
run against an external Spark Connect server instead.

``spark_target`` runs a test twice: on the embedded server and on a real Spark standalone
cluster (master, worker and Spark Connect server from pyspark's own scripts, started once per test
session by ``spark_standalone``), the way production TaskManagers reach Spark (``spark.remote``).
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
    # a Python worker that crashes (once in a full run, session 41: "Python worker exited
    # unexpectedly (crashed)", cause unknown) then reports the Python stack of the moment it died
    conf.set_string("spark.python.worker.faulthandler.enabled", "true")
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


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory):
    """A Spark standalone cluster with a Spark Connect server (``SparkStandaloneCluster``)."""
    from flintlock.testing.spark_standalone import SparkStandaloneCluster

    with SparkStandaloneCluster(tmp_path_factory.mktemp("spark-standalone")) as cluster:
        yield cluster


@pytest.fixture(scope="session", params=["embedded", "standalone"])
def spark_target(request):
    """``None`` (the embedded local server) or the standalone cluster's ``spark.remote`` URL.

    Session-scoped, so pytest runs every embedded case first and starts the standalone cluster
    once, for the standalone cases.
    """
    if request.param == "embedded":
        return None
    return request.getfixturevalue("spark_standalone").remote


#: how long Spark jobs may take to end after a test (a cancelled job's Python workers are killed
#: after ``spark.python.task.killTimeout``, 2 s)
_LEFTOVER_SPARK_JOBS_DEADLINE_S = 20.0


@pytest.fixture(autouse=True)
def no_spark_jobs_left_behind(request):
    """After each ``spark`` test, no Spark job may still run on this process's embedded server.

    A job left running (e.g. a cancellation that did not reach Spark) would hold the shared
    session's cores and time out every later test; instead the test that left it fails here,
    naming the jobs, and they are cancelled.
    """
    yield
    if request.node.get_closest_marker("spark") is None:
        return
    from flintlock.runtime.spark.session import embedded_active_job_ids, embedded_cancel_all_jobs
    from flintlock.testing.waiting import wait_until_sync

    if embedded_active_job_ids() is None:
        return
    try:
        wait_until_sync(lambda: not embedded_active_job_ids(), _LEFTOVER_SPARK_JOBS_DEADLINE_S,
                        interval_s=0.05,
                        describe=lambda: f"active Spark jobs {embedded_active_job_ids()}")
    except AssertionError as exc:
        embedded_cancel_all_jobs()
        pytest.fail(f"the test left Spark jobs running (now cancelled): {exc}")
