"""Flink's dashboard on a MiniCluster with test invokables (no Spark), issue 17: a TaskManager's
thread dump travels REST -> Dispatcher -> ResourceManager -> TaskExecutor; the slot a running
job holds shows in ``allocatedSlots`` and ``freeResource``; the TaskManager answers the metric
names the dashboard asks for."""

from __future__ import annotations

import asyncio
import os

import httpx

from flintlock.config import Configuration
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType
from flintlock.runtime.metrics.status import TASK_MANAGER_DASHBOARD_METRICS
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rest import create_app
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.invokables import LATCH_KEY, blocking_latch_scope

BLOCKING = "flintlock.testing.invokables:BlockingInvokable"


@gen_mini_cluster(task_managers=1, slots_per_task_manager=2,
                  config={"taskmanager.cpu.cores": "2"})
async def test_running_job_slots_thread_dump_and_metrics(cluster: MiniCluster) -> None:
    vertex = JobVertex(JobVertexID.generate(), "Blocked", 1, 128, BLOCKING)
    job = JobGraph(JobID.generate(), "blocked job", JobType.BATCH, (vertex,),
                   {LATCH_KEY: "dashboard-cluster"})
    app = create_app(cluster.dispatcher_gateway, Configuration(), secret=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://localhost") as rest:
        with blocking_latch_scope("dashboard-cluster") as latch:
            await cluster.submit_job(job)
            assert await asyncio.to_thread(latch.started.acquire, True, 10)
            (listed,) = (await rest.get("/taskmanagers")).json()["taskmanagers"]
            tm = listed["id"]
            assert (listed["slotsNumber"], listed["freeSlots"]) == (2, 1)
            assert listed["totalResource"]["cpuCores"] == 2.0
            assert listed["freeResource"]["cpuCores"] == 1.0  # one of two slots taken
            assert listed["hardware"]["cpuCores"] == os.cpu_count()
            details = (await rest.get(f"/v1/taskmanagers/{tm}")).json()
            assert [s["jobId"] for s in details["allocatedSlots"]] == [str(job.job_id)]
            assert details["allocatedSlots"][0]["resource"]["cpuCores"] == 1.0
            assert details["metrics"]["heapUsed"] > 0

            dump = (await rest.get(f"/taskmanagers/{tm}/thread-dump")).json()["threadInfos"]
            task_threads = [i for i in dump if "BlockingInvokable.invoke(invokables.py:"
                            in i["stringifiedThreadInfo"]]
            assert len(task_threads) == 1, [i["threadName"] for i in dump]
            assert task_threads[0]["stringifiedThreadInfo"].startswith(
                f'"{task_threads[0]["threadName"]}" Id=')

            metrics = (await rest.get(f"/taskmanagers/{tm}/metrics", params={
                "get": ",".join(TASK_MANAGER_DASHBOARD_METRICS)})).json()
            assert [m["id"] for m in metrics] == list(TASK_MANAGER_DASHBOARD_METRICS)
            assert int(metrics[0]["value"]) > 0  # Status.JVM.Memory.Heap.Used
            url = (await rest.get(f"/jobs/{job.job_id}/taskmanagers/{tm}/log-url")).json()
            assert url == {"url": f"http://localhost/#/task-manager/{tm}/logs"}
            latch.release.set()
            result = await cluster.wait_for_job_result(job.job_id, timeout_s=15)
        assert result.application_status == "SUCCEEDED"
        for _ in range(200):  # the slot is freed once the job's JobMaster let it go
            details = (await rest.get(f"/taskmanagers/{tm}")).json()
            if not details["allocatedSlots"]:
                break
            await asyncio.sleep(0.05)
        assert details["allocatedSlots"] == [] and details["freeResource"]["cpuCores"] == 2.0
        missing = await rest.get("/taskmanagers/no-such-tm/thread-dump")
        assert missing.status_code == 404 and "no-such-tm" in missing.json()["errors"][0]
