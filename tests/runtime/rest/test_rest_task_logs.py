"""Per-attempt task logs on a MiniCluster (Spark): a failed task's log holds its error text and is
one link away from the subtask's REST details; a print sink's output lands in its task log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink, SequenceSource
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rest import create_app
from flintlock.testing.clusters import gen_mini_cluster

pytestmark = [pytest.mark.spark]


def _explode(row: Any) -> tuple[int]:
    if row.id == 7:
        raise ValueError("kaboom-4711: record 7 is cursed")
    return (row.id,)


def test_failed_attempt_log_is_reachable_from_its_subtask(spark_provider: Any, tmp_path: Path) -> None:
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    (env.from_source(SequenceSource(1, 20), "numbers").rebalance()
        .map(_explode, "id long").name("cursed").sink_to(FileSink.parquet(str(tmp_path / "out"))))
    failing = env.get_job_graph("cursed job")
    (cursed,) = [v for v in failing.vertices if "cursed" in v.name]
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_parallelism(1)
    env.from_sequence(1, 3).print("out")
    printing = env.get_job_graph("printing job")

    async def body(cluster: MiniCluster) -> None:
        result = await cluster.execute(failing, timeout_s=100)
        assert result.application_status == "FAILED"
        app = create_app(cluster.dispatcher_gateway, Configuration(), secret=None)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://localhost") as rest:
            # the exception history names the TaskManager; the subtask names the log
            (entry,) = (await rest.get(f"/jobs/{failing.job_id}/exceptions")).json()[
                "exceptionHistory"]["entries"]
            attempt = (await rest.get(
                f"/jobs/{failing.job_id}/vertices/{cursed.id}/subtasks/0")).json()
            assert attempt["status"] == "FAILED"
            assert attempt["taskmanager-id"] == entry["taskManagerId"]
            assert "kaboom-4711" in attempt["failure"]["message"]
            log_response = await rest.get(attempt["log-url"])
            assert log_response.status_code == 200, log_response.text
            text = log_response.text
            assert "kaboom-4711: record 7 is cursed" in text
            assert "switched from RUNNING to FAILED" in text
            assert f"of job 'cursed job' ({failing.job_id})" in text
            listing = (await rest.get(f"/taskmanagers/{attempt['taskmanager-id']}/logs")).json()
            assert attempt["log-file"] in {e["name"] for e in listing["logs"]}

            result = await cluster.execute(printing, timeout_s=100)
            assert result.application_status == "SUCCEEDED", result.failure
            graph = await cluster.dispatcher_gateway.request_job(printing.job_id)
            (vertex,) = graph.vertices
            detail = (await rest.get(
                f"/jobs/{printing.job_id}/vertices/{vertex.id}/subtasks/0")).json()
            printed = (await rest.get(detail["log-url"])).text
            assert [line for line in printed.splitlines() if line.startswith("out> ")] == [
                "out> Row(id=1)", "out> Row(id=2)", "out> Row(id=3)"]
            assert "switched from RUNNING to FINISHED" in printed

    gen_mini_cluster(task_managers=1, slots_per_task_manager=2, timeout=110,
                     spark=spark_provider)(body)()
