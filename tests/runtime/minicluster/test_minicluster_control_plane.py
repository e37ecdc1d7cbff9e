"""MiniCluster with test invokables: the whole control plane, no Spark (STYLE layer 3)."""

from __future__ import annotations

import asyncio
import dataclasses

from flintlock.config import Configuration
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobStatus, JobType, ResultPartitionType, ShipStrategy
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rest.messages_cluster import task_manager_details
from flintlock.runtime.spark.session import SparkSessionProvider
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.invokables import LATCH_KEY, blocking_latch_scope

NOOP = "flintlock.testing.invokables:NoOpInvokable"
BLOCKING = "flintlock.testing.invokables:BlockingInvokable"
FAILING = "flintlock.testing.invokables:FailingInvokable"


def chain_job(*stages: tuple[str, int, ShipStrategy | None], conf: dict[str, str] | None = None,
              name: str = "job") -> JobGraph:
    """A linear job: stage i consumes stage i-1 over the given ship strategy."""
    vertices: list[JobVertex] = []
    ids = [JobVertexID.generate() for _ in stages]
    prev_ds = None
    for i, (invokable, parallelism, _ship) in enumerate(stages):
        results: tuple[IntermediateDataSet, ...] = ()
        if i + 1 < len(stages):
            next_ship = stages[i + 1][2] or ShipStrategy.FORWARD
            ds = IntermediateDataSet(IntermediateDataSetID.generate(), ids[i],
                                     ResultPartitionType.BLOCKING, ids[i + 1], next_ship)
            results = (ds,)
        inputs = (JobEdge(prev_ds.id, ids[i], prev_ds.ship_strategy),) if prev_ds else ()
        vertices.append(JobVertex(ids[i], f"v{i}", parallelism, 128, invokable,
                                  inputs=inputs, results=results))
        prev_ds = results[0] if results else None
    return JobGraph(JobID.generate(), name, JobType.BATCH, tuple(vertices), conf or {})


@gen_mini_cluster(task_managers=2, slots_per_task_manager=2)
async def test_three_vertex_batch_job_finishes_in_region_order(cluster: MiniCluster) -> None:
    job = chain_job((NOOP, 4, None), (NOOP, 3, ShipStrategy.HASH), (NOOP, 1, ShipStrategy.GLOBAL))
    result = await cluster.execute(job, timeout_s=20)
    assert result.application_status == "SUCCEEDED", result.failure
    archived = await cluster.dispatcher_gateway.request_job(job.job_id)
    assert archived.state is JobStatus.FINISHED
    assert [len(v.subtasks) for v in archived.vertices] == [4, 3, 1]
    # BLOCKING edges: every consumer subtask was deployed after every producer subtask finished
    for producer, consumer in zip(archived.vertices, archived.vertices[1:], strict=False):
        last_finish = max(s.state_timestamps["FINISHED"] for s in producer.subtasks)
        first_deploy = min(s.state_timestamps["DEPLOYING"] for s in consumer.subtasks)
        assert first_deploy >= last_finish
    used = {s.task_manager for v in archived.vertices for s in v.subtasks}
    assert used == {str(te.resource_id) for te in cluster.task_executors}
    overview = await cluster.dispatcher_gateway.request_cluster_overview()
    assert overview.jobs_finished == 1 and overview.jobs_running == 0


@gen_mini_cluster(task_managers=2, slots_per_task_manager=1)
async def test_two_jobs_run_at_once_and_one_is_cancelled(cluster: MiniCluster) -> None:
    with blocking_latch_scope("two-jobs") as latch:
        blocking = chain_job((BLOCKING, 1, None), conf={LATCH_KEY: "two-jobs"}, name="blocking")
        await cluster.submit_job(blocking)
        await asyncio.to_thread(latch.started.acquire, True, 10)
        quick = chain_job((NOOP, 1, None), (NOOP, 1, ShipStrategy.FORWARD), name="quick")
        result = await cluster.execute(quick, timeout_s=20)
        assert result.application_status == "SUCCEEDED"
        assert await cluster.dispatcher_gateway.request_job_status(blocking.job_id) is JobStatus.RUNNING
        await cluster.dispatcher_gateway.cancel_job(blocking.job_id)
        cancelled = await cluster.wait_for_job_result(blocking.job_id, timeout_s=20)
        assert cancelled.application_status == "CANCELED"
    jobs = {j.name: j.state for j in await cluster.dispatcher_gateway.list_jobs()}
    assert jobs == {"blocking": JobStatus.CANCELED, "quick": JobStatus.FINISHED}


@gen_mini_cluster(task_managers=1, slots_per_task_manager=1, config={"slot.request.timeout": "1 s"})
async def test_too_few_slots_fails_after_the_slot_request_timeout(cluster: MiniCluster) -> None:
    with blocking_latch_scope("hog") as latch:
        hog = chain_job((BLOCKING, 1, None), conf={LATCH_KEY: "hog"}, name="hog")
        await cluster.submit_job(hog)
        await asyncio.to_thread(latch.started.acquire, True, 10)
        starved = chain_job((NOOP, 1, None), name="starved")
        result = await cluster.execute(starved, timeout_s=20)
        assert result.application_status == "FAILED"
        message = result.failure.error.message
        assert "needs 1 slot(s)" in message and "slot.request.timeout" in message, message
        await cluster.dispatcher_gateway.cancel_job(hog.job_id)
        await cluster.wait_for_job_result(hog.job_id, timeout_s=20)


@gen_mini_cluster(task_managers=2, slots_per_task_manager=2)
async def test_a_failing_task_fails_the_job_with_its_root_cause(cluster: MiniCluster) -> None:
    job = chain_job((NOOP, 2, None), (FAILING, 2, ShipStrategy.REBALANCE),
                    conf={"$internal.test.failure-message": "bad record 42"})
    result = await cluster.execute(job, timeout_s=20)
    assert result.application_status == "FAILED"
    assert "bad record 42" in result.failure.error.message
    assert result.failure.task_name.startswith("v1 (")
    assert result.failure.location in {str(te.resource_id) for te in cluster.task_executors}


def _in_group(job: JobGraph, group: str, profile: ResourceProfile) -> JobGraph:
    """``job`` with every vertex in slot sharing group ``group`` of slots of ``profile``."""
    vertices = tuple(dataclasses.replace(v, slot_sharing_group=group) for v in job.vertices)
    return dataclasses.replace(job, vertices=vertices,
                               slot_sharing_group_resources={group: profile})


@gen_mini_cluster(task_managers=2, slots_per_task_manager=2,
                  config={"taskmanager.cpu.cores": "2"})
async def test_slots_of_a_group_with_resources_are_sized_from_task_manager_cores(
        cluster: MiniCluster) -> None:
    heavy = ResourceProfile.of(1.5, 1)
    with blocking_latch_scope("sized") as latch:
        # two slots of 1.5 cores: each 2-core TaskManager has room for one only
        job = _in_group(chain_job((BLOCKING, 2, None), conf={LATCH_KEY: "sized"}), "heavy", heavy)
        await cluster.submit_job(job)
        for _ in range(2):
            await asyncio.to_thread(latch.started.acquire, True, 10)
        tracker = cluster.resource_manager.slot_manager.tracker
        held = {str(s.slot_id.resource_id): (s.slot_id.slot_number, s.resource_profile)
                for s in tracker.slots() if s.job_id == job.job_id}
        assert held == {str(te.resource_id): (2, heavy) for te in cluster.task_executors}, held
        for te in cluster.task_executors:
            assert tracker.available_resource(te.resource_id).cpu_cores == 0.5
            assert tracker.number_of_free_slots(te.resource_id) == 0  # a default slot is 1 core
        for info in await cluster.resource_manager.request_task_manager_infos():
            body = task_manager_details(info)  # REST /taskmanagers/:id
            assert body["freeResource"]["cpuCores"] == 0.5 and body["freeSlots"] == 0
            assert [(s["jobId"], s["resource"]["cpuCores"]) for s in body["allocatedSlots"]] == [
                (str(job.job_id), 1.5)]
        await cluster.dispatcher_gateway.cancel_job(job.job_id)
        await cluster.wait_for_job_result(job.job_id, timeout_s=20)


@gen_mini_cluster(task_managers=1, slots_per_task_manager=2,
                  config={"taskmanager.cpu.cores": "2", "slot.request.timeout": "1 s"})
async def test_a_group_asking_for_more_cores_than_any_task_manager_fails_clearly(
        cluster: MiniCluster) -> None:
    job = _in_group(chain_job((NOOP, 1, None)), "huge", ResourceProfile.of(3.0, 1))
    result = await cluster.execute(job, timeout_s=20)
    assert result.application_status == "FAILED"
    message = result.failure.error.message
    assert "ResourceProfile{cpuCores=3" in message and "taskmanager.cpu.cores" in message, message


_UNSTARTED_SPARK = SparkSessionProvider(Configuration({"taskmanager.cpu.cores": "2"}))


@gen_mini_cluster(task_managers=2, slots_per_task_manager=2, spark=_UNSTARTED_SPARK)
async def test_task_managers_sharing_the_process_spark_server_count_it_once(
        cluster: MiniCluster) -> None:
    # what bounds an AdaptiveBatch job's automatic parallelism in local mode: one server
    overview = await cluster.resource_manager.request_resource_overview()
    assert (overview.number_of_task_managers, overview.spark_servers) == (2, 1), overview
    infos = await cluster.resource_manager.request_task_manager_infos()
    assert [i.spark["master"] for i in infos] == ["local[2]", "local[2]"]
    assert _UNSTARTED_SPARK._session is None  # registering did not start the session
