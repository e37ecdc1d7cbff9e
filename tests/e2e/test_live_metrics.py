"""Live metrics of running STREAMING and BATCH jobs, through the REST API (Flink's shapes).

A rate-limited source with event time feeds a consumer that needs 0.5 s per segment: while the
job runs, the TaskExecutors' live reports make the source vertex show back pressure
(``/backpressure`` level high, ``backPressuredTimeMsPerSecond``), the consumer busy, record counts
growing before any subtask finished, and the consumer's input watermark advancing
(``/watermarks``). Cancelling ends the job.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api.watermarks import WatermarkStrategy
from flintlock.connectors import DataGeneratorSource, FileSink, FileSource, RateLimiterStrategy
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rest import create_app
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.waiting import wait_until_async

pytestmark = [pytest.mark.spark]


@asynccontextmanager
async def _rest(cluster: MiniCluster) -> AsyncIterator[Callable[[str], Awaitable[Any]]]:
    """``get(path)``: the JSON of a 200 answer of the cluster's REST API (in process)."""
    app = create_app(cluster.dispatcher_gateway, Configuration(), secret=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://localhost") as rest:
        async def get(path: str) -> Any:
            response = await rest.get(path)
            assert response.status_code == 200, response.text
            return response.json()

        yield get


def _record(i: int) -> tuple[int, int]:
    return (i, i * 10)


def _slow_copy(batch: Any) -> Any:
    time.sleep(0.5)  # per Arrow batch: over 0.5 s per segment
    return batch


def test_back_pressure_records_and_watermarks_are_visible_while_the_job_runs(
        spark_provider: Any, tmp_path: Path) -> None:
    conf = {"taskmanager.network.memory.buffers-per-channel": "2",
            "taskmanager.network.memory.floating-buffers-per-gate": "0",
            "execution.buffer-timeout": "10 ms", "metrics.task.report-interval": "200 ms"}
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(conf))
    env.set_parallelism(1).set_runtime_mode(RuntimeExecutionMode.STREAMING)
    source = DataGeneratorSource(_record, None, RateLimiterStrategy.per_second(5000), "id long, ts long")
    (env.from_source(source, "events")
     .assign_timestamps_and_watermarks(
         WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts"))
     .rebalance().map_batches(_slow_copy, "id long, ts long").name("slow")
     .sink_to(FileSink.parquet(str(tmp_path / "out"))))
    job = env.get_job_graph("live metrics")
    source_vertex, slow_vertex = sorted(job.vertices, key=lambda v: "slow" in v.name)
    seen: dict[str, Any] = {}

    async def body(cluster: MiniCluster) -> None:
        await cluster.submit_job(job)
        base = f"/jobs/{job.job_id}/vertices"
        async with _rest(cluster) as get:
            async def visible() -> bool:
                seen["backpressure"] = await get(f"{base}/{source_vertex.id}/backpressure")
                seen["watermarks"] = await get(f"{base}/{slow_vertex.id}/watermarks")
                seen["source"] = {m["id"]: float(m["value"]) for m in await get(
                    f"{base}/{source_vertex.id}/metrics?get=0.numRecordsOut,"
                    "0.backPressuredTimeMsPerSecond,0.currentOutputWatermark")}
                seen["slow"] = {m["id"]: float(m["value"]) for m in await get(
                    f"{base}/{slow_vertex.id}/metrics?get=0.numRecordsIn,0.busyTimeMsPerSecond")}
                mark = int(seen["watermarks"][0]["value"])
                return (seen["backpressure"]["backpressureLevel"] == "high"
                        and seen["source"]["0.numRecordsOut"] > 0
                        and seen["slow"]["0.numRecordsIn"] > 0
                        and seen["slow"]["0.busyTimeMsPerSecond"] > 100
                        and mark > 0 and seen["source"]["0.currentOutputWatermark"] >= mark)

            await wait_until_async(visible, 120, 0.1, lambda: seen)
            subtask = seen["backpressure"]["subtasks"][0]
            assert subtask["ratio"] > 0.5 and subtask["backpressureLevel"] == "high"
            assert set(subtask) >= {"subtask", "attempt-number", "ratio", "idleRatio", "busyRatio"}
            assert seen["watermarks"][0]["id"] == "0.currentInputWatermark"
            await cluster.dispatcher_gateway.cancel_job(job.job_id)
            result = await cluster.wait_for_job_result(job.job_id, timeout_s=30)
            assert result.application_status == "CANCELED", result.failure
            # the cancelled attempts keep what they processed (their final reports)
            (source_subtask,) = (await get(f"{base}/{source_vertex.id}"))["subtasks"]
            assert source_subtask["status"] == "CANCELED"
            assert source_subtask["metrics"]["write-records"] >= seen["source"]["0.numRecordsOut"]

    gen_mini_cluster(task_managers=1, slots_per_task_manager=2, config=conf, timeout=180,
                     spark=spark_provider)(body)()


def _slow_batch(batch: Any) -> Any:
    time.sleep(0.2)  # per Arrow batch (10,000 rows)
    return batch


ROWS = 1_000_000


@pytest.mark.parametrize("end", ["finished", "cancelled"])
def test_a_running_batch_subtask_reports_what_its_spark_jobs_read_so_far(
        spark_provider: Any, tmp_path: Path, end: str) -> None:
    """Live I/O of a BATCH subtask (issue 17): its Spark job is one or two long Spark tasks (one
    input file of 1,000,000 rows, ~20 s at 0.2 s per Arrow batch), and while it runs REST shows
    the records read and written so far as complete counts: they come from the running SQL
    execution's row metrics (the scan's, and those of the Python function feeding the sink's
    write), which executor heartbeats update (Spark's stage counts only move when a Spark task
    ends). The final counts when it finished; what it had read when it was cancelled."""
    source = tmp_path / "in"
    spark = spark_provider.get()
    spark.range(0, ROWS, numPartitions=1).selectExpr(
        "id", "id * 2 AS twice").write.parquet(str(source))
    conf = {"metrics.task.report-interval": "200 ms"}
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(conf))
    env.set_parallelism(1).set_runtime_mode(RuntimeExecutionMode.BATCH)
    (env.from_source(FileSource.parquet(str(source)), "numbers")
     .map_batches(_slow_batch, "id long, twice long").name("slow")
     .sink_to(FileSink.parquet(str(tmp_path / "out"))))
    job = env.get_job_graph("live batch metrics")
    (vertex,) = job.vertices
    seen: dict[str, Any] = {}

    async def body(cluster: MiniCluster) -> None:
        await cluster.submit_job(job)
        async with _rest(cluster) as get:
            async def counted_while_running() -> bool:
                seen["vertex"] = await get(f"/jobs/{job.job_id}/vertices/{vertex.id}")
                seen["metric"] = await get(f"/jobs/{job.job_id}/vertices/{vertex.id}/metrics"
                                           "?get=0.numRecordsIn,0.numRecordsInPerSecond")
                subtasks = seen["vertex"]["subtasks"]  # none while the JobMaster starts
                if len(subtasks) != 1:
                    return False
                (subtask,) = subtasks
                io = subtask["metrics"]
                return (subtask["status"] == "RUNNING" and io["read-records-complete"]
                        and 0 < io["read-records"] < ROWS and 0 < io["write-records"] < ROWS)

            await wait_until_async(counted_while_running, 60, 0.1, lambda: seen)
            values = {m["id"]: float(m["value"]) for m in seen["metric"]}
            assert values["0.numRecordsIn"] > 0, seen["metric"]
            io = seen["vertex"]["subtasks"][0]["metrics"]
            assert io["write-records"] <= io["read-records"], io  # nothing written before read
            if end == "cancelled":
                await cluster.dispatcher_gateway.cancel_job(job.job_id)
                result = await cluster.wait_for_job_result(job.job_id, timeout_s=60)
                assert result.application_status == "CANCELED", result.failure
                (cancelled,) = (await get(f"/jobs/{job.job_id}/vertices/{vertex.id}"))["subtasks"]
                live = seen["vertex"]["subtasks"][0]["metrics"]
                assert cancelled["status"] == "CANCELED", cancelled
                assert live["read-records"] <= cancelled["metrics"]["read-records"] < ROWS
                assert cancelled["metrics"]["read-records-complete"], cancelled
                return
            result = await cluster.wait_for_job_result(job.job_id, timeout_s=120)
            assert result.application_status == "SUCCEEDED", result.failure
            (final,) = (await get(f"/jobs/{job.job_id}/vertices/{vertex.id}"))["subtasks"]
            assert final["metrics"]["read-records"] == ROWS
            assert final["metrics"]["write-records"] == ROWS
            assert final["metrics"]["read-bytes"] > 0

    gen_mini_cluster(task_managers=1, slots_per_task_manager=1, config=conf, timeout=180,
                     spark=spark_provider)(body)()
