"""Speculative execution of a Spark batch job with a FileSink (issue 15).

Two TaskManagers share the tests' Spark server; the second is made 10x slower by an injected
fault (``$internal.fault.task-slowdown``: its tasks hold their finished work back 9x their run
time). A Parquet copy at parallelism 4 runs two subtasks on each; the slow TaskManager's are
found slow, it is blocked, and speculative attempts on the fast TaskManager win. The output holds
every input row exactly once: the FileSink publishes the winners' part files only, and the
losers' staged files are gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink, FileSource
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.minicluster import MiniCluster
from flintlock.testing.clusters import gen_mini_cluster

pytestmark = [pytest.mark.spark]

ROWS = 40_000
SPECULATION = {
    "execution.batch.speculative.enabled": "true",
    "execution.batch.adaptive.auto-parallelism.enabled": "false",
    "slow-task-detector.check-interval": "200 ms",
    "slow-task-detector.execution-time.baseline-lower-bound": "0 s",
    "slow-task-detector.execution-time.baseline-ratio": "0.5",
}


def test_speculative_attempts_win_on_a_slow_task_manager_and_the_output_is_written_once(
        spark_provider: Any, tmp_path: Path) -> None:
    source, out = tmp_path / "in", tmp_path / "out"
    spark_provider.get().range(0, ROWS, numPartitions=4).selectExpr(
        "id", "id % 7 AS k").write.parquet(str(source))
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(SPECULATION))
    env.set_parallelism(4).set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_source(FileSource.parquet(str(source)), "numbers").sink_to(FileSink.parquet(str(out)))
    job = env.get_job_graph("speculative copy")

    async def body(cluster: MiniCluster) -> None:
        slow = await cluster.add_task_manager({"$internal.fault.task-slowdown": "10"})
        await cluster.submit_job(job)
        result = await cluster.wait_for_job_result(job.job_id, timeout_s=150)
        assert result.application_status == "SUCCEEDED", result.failure
        (vertex,) = (await cluster.dispatcher_gateway.request_job(job.job_id)).vertices
        lost = [p for p in vertex.prior_attempts if p.task_manager == str(slow.resource_id)]
        assert [p.state for p in lost] == [ExecutionState.CANCELED] * 2, vertex.prior_attempts
        assert str(slow.resource_id) not in {s.task_manager for s in vertex.subtasks}
        assert sorted(s.attempt_number for s in vertex.subtasks) == [0, 0, 1, 1]

    gen_mini_cluster(task_managers=1, slots_per_task_manager=2, config=SPECULATION, timeout=180,
                     spark=spark_provider)(body)()
    ids = sorted(pq.read_table(str(out)).column("id").to_pylist())
    assert ids == list(range(ROWS))  # every row once: no loser's part file was published
    assert not (out / "_temporary").exists()
