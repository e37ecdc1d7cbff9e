"""TaskManagers on a real Spark standalone cluster (``spark.remote``): cancellation reaches it.

The TPC-H examples and the Python-function pipelines run there too, through the ``spark_target``
parameter of their own tests (``tests/examples/test_tpch.py``, ``tests/e2e/test_pipelines.py``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.client.job_client import JobExecutionException
from flintlock.connectors import FileSink
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.testing.spark_standalone import SparkStandaloneCluster
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.process, pytest.mark.timeout(300)]


def _remote_env(spark: SparkStandaloneCluster) -> StreamExecutionEnvironment:
    conf = Configuration({"local.number-taskmanager": 1, "taskmanager.numberOfTaskSlots": 1,
                          "spark.remote": spark.remote})
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return env


def test_cancelling_a_job_stops_its_spark_jobs_on_the_remote_cluster(
        spark_standalone: SparkStandaloneCluster, tmp_path: Path) -> None:
    env = _remote_env(spark_standalone)

    def slow(row):
        time.sleep(0.05)
        return (row.id,)

    env.from_sequence(1, 100_000).map(slow, "id long").sink_to(FileSink.parquet(str(tmp_path / "x")))
    client = env.execute_async("slow job on standalone Spark")
    # the subtask's Spark job runs on the standalone cluster's executors
    wait_until_sync(lambda: spark_standalone.active_jobs(), 90, interval_s=0.1,
                    describe=lambda: (client.get_job_status(), spark_standalone.active_jobs()))
    client.cancel()
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout_s=60)
    assert info.value.status == "CANCELED"
    assert client.get_job_status() is JobStatus.CANCELED
    # ... and the cancellation reached it: nothing of the job holds the cluster's cores
    wait_until_sync(lambda: not spark_standalone.active_jobs(), 30, interval_s=0.1,
                    describe=spark_standalone.active_jobs)
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").glob("*.parquet"))
    # the remote session still works after the cancellation
    rows = env.from_sequence(1, 3).sort("id").execute_and_collect()
    assert [tuple(r) for r in rows] == [(1,), (2,), (3,)]
