"""Task metrics after a real job on a MiniCluster (Spark): REST metric endpoints and Prometheus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink, SequenceSource
from flintlock.runtime.metrics.prometheus import (
    PrometheusReporter,
    job_manager_source,
    task_manager_source,
)
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rest import create_app
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.taskexecutor.gateway import TaskExecutorGateway
from flintlock.testing.clusters import gen_mini_cluster

pytestmark = [pytest.mark.spark]

ROWS = 300


def test_task_metrics_of_a_finished_job(spark_provider: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    (env.from_source(SequenceSource(1, ROWS), "numbers").rebalance()
        .map(lambda r: (r.id, r.id * 2), "id long, v long").name("double")
        .sink_to(FileSink.parquet(str(out))))
    job = env.get_job_graph("metrics job")
    source, sink = (next(v for v in job.vertices if v.name.startswith("Source: numbers")),
                    next(v for v in job.vertices if "double" in v.name))

    async def body(cluster: MiniCluster) -> None:
        result = await cluster.execute(job, timeout_s=100)
        assert result.application_status == "SUCCEEDED", result.failure
        app = create_app(cluster.dispatcher_gateway, Configuration(), secret=None)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://localhost") as rest:
            vertex = f"/jobs/{job.job_id}/vertices"
            agg = (await rest.get(f"{vertex}/{source.id}/subtasks/metrics",
                                  params={"get": "numRecordsOut,numBytesOut", "agg": "sum"})).json()
            assert agg[0] == {"id": "numRecordsOut", "sum": float(ROWS)}
            assert agg[1]["id"] == "numBytesOut" and agg[1]["sum"] > 0
            per_subtask = (await rest.get(f"{vertex}/{source.id}/metrics", params={
                "get": "0.numRecordsOut,1.numRecordsOut"})).json()
            assert sum(int(m["value"]) for m in per_subtask) == ROWS
            sink_agg = (await rest.get(f"{vertex}/{sink.id}/subtasks/metrics", params={
                "get": "numRecordsIn,numRecordsOut,accumulateBusyTimeMs", "agg": "sum"})).json()
            assert [(m["id"], m["sum"]) for m in sink_agg[:2]] == [
                ("numRecordsIn", float(ROWS)), ("numRecordsOut", float(ROWS))]
            assert sink_agg[2]["sum"] > 0  # the sink subtasks were RUNNING for a while
            tm = str(cluster.task_executors[0].resource_id)
            tm_metrics = (await rest.get(f"/taskmanagers/{tm}/metrics",
                                         params={"get": "taskSlotsTotal"})).json()
            assert tm_metrics == [{"id": "taskSlotsTotal", "value": "2"}]

        gateways = [await cluster.rpc_service.connect(te.address, TaskExecutorGateway, fencing_token=DEFAULT_LEADER_ID)
                    for te in cluster.task_executors]
        reporter = PrometheusReporter(
            [job_manager_source(cluster.dispatcher_gateway), task_manager_source(gateways)],
            "127.0.0.1", [0])
        await reporter.start()
        try:
            async with httpx.AsyncClient() as client:
                scrape = await client.get(reporter.url)
        finally:
            await reporter.stop()
        assert scrape.status_code == 200
        families = {f.name: f.samples for f in text_string_to_metric_families(scrape.text)}
        written = [s for s in families["flink_taskmanager_job_task_numRecordsOut"]
                   if s.labels["job_id"] == str(job.job_id)
                   and s.labels["task_name"].startswith("Source: numbers")]
        assert sorted(s.labels["subtask_index"] for s in written) == ["0", "1"]
        assert sum(s.value for s in written) == ROWS
        assert {s.labels["job_name"] for s in written} == {"metrics job"}
        finished = [s.value for s in families["flink_jobmanager_numJobs"]
                    if s.labels["state"] == "FINISHED"]
        assert finished == [1.0]
        assert families["flink_jobmanager_taskSlotsTotal"][0].value == 4.0
        assert "attempt" not in scrape.text

    gen_mini_cluster(task_managers=2, slots_per_task_manager=2, timeout=110,
                     spark=spark_provider)(body)()
    assert duckdb.sql(f"select count(*) from read_parquet('{out}/*.parquet')").fetchall() == [(ROWS,)]
