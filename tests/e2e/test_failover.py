"""Failure recovery end to end (issue 4): a MiniCluster with two TaskManagers and real Spark.

Each scenario injects a failure with ``flintlock.testing`` (a user function failing at record K,
a deleted result partition, a TaskManager partitioned away by the fault-injecting transport), then
checks which subtasks ran again (attempt numbers from the archived ExecutionGraph, and once from
``GET /jobs/:jobid/vertices/:vertexid``), that finished regions whose results were still available
did not run again, and that the FileSink output equals DuckDB's answer on the same input, row for
row (no duplicates, nothing missing) or, when the job fails, that the sink path stays empty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from pyspark.sql import functions as F

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink, SequenceSource
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, ArchivedJobVertex
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rest import create_app
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.faults import FailureBudget, Gate, fail_at_record
from flintlock.testing.partition_sabotage import delete_partition, truncate_partition
from flintlock.testing.waiting import wait_until_async

pytestmark = [pytest.mark.spark]

N = 400  # rows per source
K = 7  # the record where failures are injected
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
            "restart-strategy.fixed-delay.delay": "50 ms"}
#: The scenarios count attempts of every subtask at parallelism 2. The AdaptiveBatchScheduler (the
#: BATCH default) would run the downstream vertices of these few hundred rows at 1 subtask, so
#: with 1 byte per subtask it gives them 2, expanded as their inputs finish; some scenarios also
#: run on the DefaultScheduler's static graph.
SCHEDULERS = {
    "adaptive": {"jobmanager.scheduler": "AdaptiveBatch",
                 "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1"},
    "default": {"jobmanager.scheduler": "Default"},
}


def _env(conf: dict[str, str], scheduler: str = "adaptive") -> StreamExecutionEnvironment:
    conf = {**SCHEDULERS[scheduler], **conf}
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(conf))
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return env


def _run(spark_provider: Any, body: Callable[[MiniCluster], Any], *, config: dict[str, str] | None = None,
         fault_injection: bool = False) -> None:
    gen_mini_cluster(task_managers=2, slots_per_task_manager=2, config=config, timeout=90,
                     spark=spark_provider, fault_injection=fault_injection)(body)()


def _vertex(graph: ArchivedExecutionGraph, name_part: str) -> ArchivedJobVertex:
    (vertex,) = [v for v in graph.vertices if name_part in v.name]
    return vertex


def _attempts(graph: ArchivedExecutionGraph, name_part: str) -> list[int]:
    """The current attempt number of each subtask of the vertex named like ``name_part``."""
    return [s.attempt_number for s in sorted(_vertex(graph, name_part).subtasks, key=lambda s: s.subtask_index)]


def _rows(path: Path) -> Counter[tuple[Any, ...]]:
    return Counter(duckdb.sql(f"select * from read_parquet('{path}/*.parquet')").fetchall())


def _duck(sql: str) -> Counter[tuple[Any, ...]]:
    return Counter(duckdb.sql(sql).fetchall())


def _no_output(path: Path) -> bool:
    return not path.exists() or not any(path.iterdir())


async def _job(cluster: MiniCluster, job: JobGraph) -> ArchivedExecutionGraph:
    return await cluster.dispatcher_gateway.request_job(job.job_id)


# ---- a. a failing middle vertex: region restarts one subtask, full restarts all started ones -------


def _middle_vertex_job(conf: dict[str, str], out: Path, fn: Callable[..., Any],
                       scheduler: str = "adaptive") -> JobGraph:
    """Source -(rebalance)-> Map ``fn`` -(forward, new chain)-> Filter -> FileSink.

    Every subtask is its own pipelined region (BATCH); Filter subtask i reads only Map subtask i.
    """
    env = _env(conf, scheduler)
    doubled = env.from_source(SequenceSource(1, N), "numbers").rebalance().map(fn, "id long, v long").name("double")
    kept = doubled.filter(F.col("v") % 3 != 0).name("keep").start_new_chain()
    kept.sink_to(FileSink.parquet(str(out)))
    return env.get_job_graph("middle vertex")


def _double(r: Any) -> tuple[int, int]:
    return (r.id, r.id * 2)


MIDDLE_EXPECTED = f"select id, id * 2 from range(1, {N + 1}) t(id) where (id * 2) % 3 <> 0"


@pytest.mark.parametrize(("strategy", "scheduler"), [("region", "adaptive"), ("full", "adaptive"),
                                                   ("region", "default")])
def test_failure_in_a_middle_vertex(spark_provider: Any, tmp_path: Path, strategy: str,
                                    scheduler: str) -> None:
    budget = FailureBudget(str(tmp_path / "failures"), times=1)
    out = tmp_path / "out"
    conf = {**RESTARTS, "jobmanager.execution.failover-strategy": strategy}
    job = _middle_vertex_job(conf, out, fail_at_record(_double, record=K, budget=budget), scheduler)

    async def body(cluster: MiniCluster) -> None:
        result = await cluster.execute(job, timeout_s=90)
        assert result.application_status == "SUCCEEDED", result.failure
        graph = await _job(cluster, job)
        assert graph.number_of_restarts == 1
        (entry,) = graph.exception_history
        assert f"Injected failure at record {K} (attempt 1)" in entry.error.message
        (failed,) = [p.subtask_index for p in _vertex(graph, "double").prior_attempts
                     if p.state is ExecutionState.FAILED]
        keep = _vertex(graph, "keep")
        if strategy == "region":
            # only the failed subtask's region: its input partitions were still available and
            # its consumer had not started (CREATED subtasks are not restarted)
            assert _attempts(graph, "numbers") == [0, 0]
            assert _attempts(graph, "double") == [1 if i == failed else 0 for i in range(2)]
            assert _attempts(graph, "keep") == [0, 0]
        else:
            # every subtask that had started runs again; the failed one's consumer had not
            assert _attempts(graph, "numbers") == [1, 1]
            assert _attempts(graph, "double") == [1, 1]
            assert _attempts(graph, "keep")[failed] == 0
            started_before = {p.subtask_index for p in keep.prior_attempts}
            assert _attempts(graph, "keep") == [int(i in started_before) for i in range(2)]
        assert all(s.state is ExecutionState.FINISHED for v in graph.vertices for s in v.subtasks)

    _run(spark_provider, body)
    assert budget.used() == 1
    assert _rows(out) == _duck(MIDDLE_EXPECTED)


# ---- b. a consumer whose producer's partition was deleted or truncated -------------------------------


@pytest.mark.parametrize(("sabotage", "scheduler"), [
    (delete_partition, "adaptive"), (truncate_partition, "adaptive"), (delete_partition, "default"),
], ids=["deleted", "truncated", "deleted-default"])
def test_lost_producer_partition_reruns_the_producer_region(spark_provider: Any, tmp_path: Path,
                                                            sabotage: Callable[..., list[str]],
                                                            scheduler: str) -> None:
    gate = Gate(str(tmp_path / "gate"))
    out = tmp_path / "out"
    # a hash join in its own vertex: a broadcast join would read A within B's Spark job, before
    # the test could delete A's partition
    env = _env({**RESTARTS, "table.optimizer.join.broadcast-threshold": "-1"}, scheduler)
    a = env.from_source(SequenceSource(1, N), "A").map(lambda r: (r.id, r.id * 10), "id long, a long")
    # B waits at record 1 until the test opens the gate (one Spark task; the other core stays free)
    b = env.from_source(SequenceSource(1, N), "B").map(
        gate.blocking(lambda r: (r.id, r.id * 100), record=1), "id long, b long")
    a.join(b, on="id").select("id", "a", "b").name("join").sink_to(FileSink.parquet(str(out)))
    job = env.get_job_graph("deleted partition")
    (a_vertex,) = [v for v in job.vertices if v.name.startswith("Source: A")]
    a_dataset = a_vertex.results[0].id

    async def body(cluster: MiniCluster) -> None:
        await cluster.submit_job(job)

        async def a_finished_and_b_waits() -> bool:
            graph = await _job(cluster, job)
            done = all(s.state is ExecutionState.FINISHED for s in _vertex(graph, "Source: A").subtasks)
            return done and gate.waiters() >= 1

        await wait_until_async(a_finished_and_b_waits, 60)
        assert sabotage(str(cluster.services["shuffle_dir"]), job.job_id, a_dataset, 0)
        gate.open()
        result = await cluster.wait_for_job_result(job.job_id, timeout_s=90)
        assert result.application_status == "SUCCEEDED", result.failure
        graph = await _job(cluster, job)
        assert _attempts(graph, "Source: A") == [1, 0]  # only the producer of the lost partition
        assert _attempts(graph, "Source: B") == [0, 0]  # finished, results available: not re-run
        assert _attempts(graph, "join") == [1, 1]  # every consumer of the re-run producer
        causes = [e.error for e in graph.exception_history]
        assert causes and all(c.partition_not_found == f"{a_dataset}#0" for c in causes), causes
        assert causes[0].class_name.endswith("PartitionNotFoundException")
        # the same attempt numbers through REST: GET /jobs/:jobid/vertices/:vertexid
        app = create_app(cluster.dispatcher_gateway, Configuration(), secret=None)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as rest:
            for name, expected in (("Source: A", [1, 0]), ("Source: B", [0, 0]), ("join", [1, 1])):
                response = await rest.get(f"/jobs/{job.job_id}/vertices/{_vertex(graph, name).id}")
                assert response.status_code == 200, response.text
                subtasks = response.json()["subtasks"]
                assert [s["attempt"] for s in subtasks] == expected
                assert {s["status"] for s in subtasks} == {"FINISHED"}

    _run(spark_provider, body)
    assert _rows(out) == _duck(f"select id, id * 10, id * 100 from range(1, {N + 1}) t(id)")


# ---- c. the restart strategy is exhausted --------------------------------------------------------


def test_exhausted_restart_strategy_fails_the_job_and_leaves_no_output(spark_provider: Any, tmp_path: Path) -> None:
    budget = FailureBudget(str(tmp_path / "failures"), times=2)
    out = tmp_path / "out"
    conf = {**RESTARTS, "restart-strategy.fixed-delay.attempts": "1"}
    job = _middle_vertex_job(conf, out, fail_at_record(_double, record=K, budget=budget))

    async def body(cluster: MiniCluster) -> None:
        result = await cluster.execute(job, timeout_s=90)
        assert result.application_status == "FAILED"
        assert result.failure is not None
        assert f"Injected failure at record {K} (attempt 2)" in result.failure.error.message
        graph = await _job(cluster, job)
        assert graph.state is JobStatus.FAILED and graph.number_of_restarts == 1
        assert [f"(attempt {n})" in e.error.message for n, e in enumerate(graph.exception_history, 1)] == [True, True]
        assert sorted(_attempts(graph, "double")) == [0, 1]

    _run(spark_provider, body)
    assert budget.used() == 2
    assert _no_output(out)


# ---- d. a TaskManager partitioned away from the JobManager and the ResourceManager ---------------


def test_task_manager_lost_by_heartbeat_timeout(spark_provider: Any, tmp_path: Path) -> None:
    gate = Gate(str(tmp_path / "gate"))
    out = tmp_path / "out"
    conf = {**RESTARTS, "restart-strategy.fixed-delay.attempts": "10", "heartbeat.interval": "250 ms",
            "heartbeat.timeout": "2 s", "rpc.ask-timeout": "3 s"}
    job = _middle_vertex_job(conf, out, gate.blocking(_double, record=K))

    async def body(cluster: MiniCluster) -> None:
        faulty = cluster.rpc_service
        await cluster.submit_job(job)
        blocked: dict[str, Any] = {}

        async def one_double_subtask_blocks_at_the_gate() -> bool:
            subtasks = _vertex(await _job(cluster, job), "double").subtasks
            states = sorted(s.state.name for s in subtasks)
            running = [s for s in subtasks if s.state is ExecutionState.RUNNING]
            if gate.waiters() >= 1 and states == ["FINISHED", "RUNNING"]:
                blocked["subtask"], blocked["tm"] = running[0].subtask_index, running[0].task_manager
                return True
            return False

        await wait_until_async(one_double_subtask_blocks_at_the_gate, 60)
        lost_tm = blocked["tm"]
        faulty.partition(f"taskexecutor-{lost_tm}")

        async def restarted_on_the_other_task_manager() -> bool:
            subtask = _vertex(await _job(cluster, job), "double").subtasks[blocked["subtask"]]
            return (subtask.attempt_number >= 1 and subtask.state is ExecutionState.RUNNING
                    and subtask.task_manager != lost_tm)

        await wait_until_async(restarted_on_the_other_task_manager, 60)
        gate.open()
        result = await cluster.wait_for_job_result(job.job_id, timeout_s=90)
        assert result.application_status == "SUCCEEDED", result.failure
        graph = await _job(cluster, job)
        assert any(f"TaskManager {lost_tm} is lost" in e.error.message for e in graph.exception_history)
        for vertex in graph.vertices:
            for s in vertex.subtasks:
                assert s.task_manager != lost_tm, f"{vertex.name} {s.subtask_index} finished on the lost TM"
        # a source subtask re-ran exactly when its (TM-local) partition was on the lost TaskManager
        source = _vertex(graph, "numbers")
        first_tm = {p.subtask_index: p.task_manager for p in source.prior_attempts if p.attempt_number == 0}
        for s in source.subtasks:
            ran_on_lost = first_tm.get(s.subtask_index, s.task_manager) == lost_tm
            assert (s.attempt_number >= 1) == ran_on_lost, (s.subtask_index, s.attempt_number, first_tm)

    _run(spark_provider, body, config=conf, fault_injection=True)
    assert _rows(out) == _duck(MIDDLE_EXPECTED)
