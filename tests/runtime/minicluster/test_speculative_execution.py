"""Speculative execution on a MiniCluster with test invokables (STYLE layer 3, no Spark).

One TaskManager is made 20x slower by an injected fault (``$internal.fault.task-slowdown``).
A BATCH source of four subtasks that each work 400 ms runs two subtasks on each TaskManager;
the fast ones finish, the slow TaskManager's are found slow, its node is blocked, and their
speculative attempts on the fast TaskManager win: the job ends long before the slow attempts
would have, with each subtask's output from exactly one attempt.
"""

from __future__ import annotations

from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import ExecutionState, JobType
from flintlock.runtime.minicluster import MiniCluster
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.invokables import SLEEP_MS_KEY
from flintlock.testing.waiting import wait_until_async

SLEEPING = "flintlock.testing.invokables:SleepingInvokable"
SPECULATION = {
    "execution.batch.speculative.enabled": "true",
    "slow-task-detector.check-interval": "100 ms",
    "slow-task-detector.execution-time.baseline-lower-bound": "0 s",
    "slow-task-detector.execution-time.baseline-ratio": "0.5",
    "execution.batch.speculative.block-slow-node-duration": "1 min",
}


@gen_mini_cluster(task_managers=1, slots_per_task_manager=2, config=SPECULATION, timeout=60)
async def test_a_slow_task_managers_subtasks_are_won_by_speculative_attempts(
        cluster: MiniCluster) -> None:
    slow = await cluster.add_task_manager({"$internal.fault.task-slowdown": "20"})
    fast = cluster.task_executors[0]
    vertex = JobVertex(JobVertexID.generate(), "Source: work", 4, 128, SLEEPING,
                       parallelism_configured=True)
    job = JobGraph(JobID.generate(), "speculative", JobType.BATCH, (vertex,),
                   {SLEEP_MS_KEY: "400"})
    await cluster.submit_job(job)
    seen: dict[str, object] = {}

    async def blocked() -> bool:
        seen["overview"] = overview = await cluster.dispatcher_gateway.request_cluster_overview()
        return overview.resources.number_of_blocked_task_managers == 1

    await wait_until_async(blocked, 30, 0.05, lambda: seen)
    result = await cluster.wait_for_job_result(job.job_id, timeout_s=30)
    assert result.application_status == "SUCCEEDED", result.failure
    (archived,) = (await cluster.dispatcher_gateway.request_job(job.job_id)).vertices
    on_slow = [p for p in archived.prior_attempts if p.task_manager == str(slow.resource_id)]
    assert len(on_slow) == 2, archived.prior_attempts
    assert {p.state for p in on_slow} == {ExecutionState.CANCELED}  # they lost
    assert all(s.state is ExecutionState.FINISHED for s in archived.subtasks)
    assert {s.task_manager for s in archived.subtasks} == {str(fast.resource_id)}
    assert sorted(s.attempt_number for s in archived.subtasks) == [0, 0, 1, 1]
