"""Task logs and TaskManager metrics through REST on a MiniCluster with test invokables (no Spark):
the request travels REST -> Dispatcher -> ResourceManager -> TaskExecutor."""

from __future__ import annotations

import httpx

from flintlock.config import Configuration
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rest import create_app
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.invokables import FAILURE_MESSAGE_KEY

FAILING = "flintlock.testing.invokables:FailingInvokable"


@gen_mini_cluster(task_managers=2, slots_per_task_manager=2)
async def test_failed_attempt_log_and_task_manager_metrics(cluster: MiniCluster) -> None:
    vertex = JobVertex(JobVertexID.generate(), "Exploding", 2, 128, FAILING)
    job = JobGraph(JobID.generate(), "exploding job", JobType.BATCH, (vertex,),
                   {FAILURE_MESSAGE_KEY: "kaboom-control-plane"})
    result = await cluster.execute(job, timeout_s=20)
    assert result.application_status == "FAILED"
    app = create_app(cluster.dispatcher_gateway, Configuration(), secret=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://localhost") as rest:
        failed = []
        for index in (0, 1):
            attempt = (await rest.get(
                f"/jobs/{job.job_id}/vertices/{vertex.id}/subtasks/{index}")).json()
            if attempt["status"] == "FAILED":
                failed.append(attempt)
        assert failed, "at least one subtask failed"
        attempt = failed[0]
        assert attempt["log-file"] == f"task-{job.job_id}-{vertex.id}-{attempt['subtask']}-0.log"
        text = (await rest.get(attempt["log-url"])).text
        assert "RuntimeError: kaboom-control-plane" in text
        assert "switched from RUNNING to FAILED" in text
        assert "Exploding" in text and str(job.job_id) in text

        tm = attempt["taskmanager-id"]
        logs = (await rest.get(f"/taskmanagers/{tm}/logs")).json()["logs"]
        assert attempt["log-file"] in [entry["name"] for entry in logs]
        missing = await rest.get(f"/taskmanagers/{tm}/log")  # no process log in a MiniCluster
        assert missing.status_code == 404 and "no log file" in missing.json()["errors"][0]
        unknown = await rest.get(f"/taskmanagers/{tm}/logs/task-{'0' * 32}-x-0-0.log")
        assert unknown.status_code == 404
        gone = await rest.get("/taskmanagers/no-such-tm/logs")
        assert gone.status_code == 404 and "no-such-tm" in gone.json()["errors"][0]

        metrics = (await rest.get(f"/taskmanagers/{tm}/metrics", params={
            "get": "taskSlotsTotal,numRunningTasks"})).json()
        assert metrics == [{"id": "taskSlotsTotal", "value": "2"},
                           {"id": "numRunningTasks", "value": "0"}]
        jm = (await rest.get("/jobmanager/metrics", params={
            "get": "numFailedJobs,numRegisteredTaskManagers,taskSlotsTotal"})).json()
        assert [m["value"] for m in jm] == ["1", "2", "4"]
