"""A real JobManager process (``python -m flintlock jobmanager``) reached over gRPC from this one.

Two TaskExecutors (NoSpark, test invokables) run in the test process, each on its own
GrpcRpcService, register at the JobManager's ResourceManager and run a job submitted to its
Dispatcher, so every message crosses a process boundary.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from flintlock.config import Configuration
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType, ResultPartitionType, ShipStrategy
from flintlock.runtime.rpc.auth import RpcAuthenticationError
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.grpc_service import GrpcRpcService
from flintlock.runtime.taskexecutor.task_executor import TaskExecutor
from flintlock.testing.clusters import NoSpark

pytestmark = pytest.mark.process

NOOP = "flintlock.testing.invokables:NoOpInvokable"
SECRET = "process-test-secret"


@pytest.fixture
def job_manager(tmp_path: pathlib.Path) -> Iterator[dict[str, Any]]:
    """A JobManager process on ephemeral ports; yields its port file contents."""
    port_file = tmp_path / "jm.json"
    log_file = (tmp_path / "jm.log").open("wb")
    env = dict(os.environ, FLINTLOCK_CLUSTER_SECRET=SECRET)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flintlock",
            "jobmanager",
            "-D",
            "jobmanager.rpc.port=0",
            "-D",
            "rest.port=0",
            "--port-file",
            str(port_file),
        ],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert process.poll() is None, (tmp_path / "jm.log").read_text()
            assert time.monotonic() < deadline, "the JobManager did not write its port file"
            time.sleep(0.02)
        yield json.loads(port_file.read_text())
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log_file.close()


def _job() -> JobGraph:
    v0, v1 = JobVertexID.generate(), JobVertexID.generate()
    ds = IntermediateDataSet(
        IntermediateDataSetID.generate(), v0, ResultPartitionType.BLOCKING, v1, ShipStrategy.HASH
    )
    return JobGraph(
        JobID.generate(),
        "two vertices",
        JobType.BATCH,
        (
            JobVertex(v0, "v0", 3, 128, NOOP, results=(ds,)),
            JobVertex(v1, "v1", 2, 128, NOOP, inputs=(JobEdge(ds.id, v1, ShipStrategy.HASH),)),
        ),
    )


def test_job_runs_across_processes(job_manager: dict[str, Any], tmp_path: pathlib.Path) -> None:
    port = job_manager["rpc_port"]

    async def body() -> None:
        conf = Configuration()
        rpcs: list[GrpcRpcService] = []
        executors: list[TaskExecutor] = []
        try:
            for _ in range(2):
                rpc = GrpcRpcService(secret=SECRET, timeout_s=5.0)
                await rpc.start()
                rpcs.append(rpc)
                te = TaskExecutor(
                    rpc,
                    conf,
                    f"grpc://localhost:{port}/resourcemanager",
                    services={"spark": NoSpark(), "shuffle_dir": str(tmp_path)},
                    number_of_slots=2,
                )
                await te.start()
                executors.append(te)
            intruder = GrpcRpcService(secret="wrong")
            await intruder.start()
            rpcs.append(intruder)
            with pytest.raises(RpcAuthenticationError):
                await intruder.connect(f"grpc://localhost:{port}/dispatcher", DispatcherGateway)

            gateway = await rpcs[0].connect(
                f"grpc://localhost:{port}/dispatcher", DispatcherGateway,
                fencing_token=DEFAULT_LEADER_ID)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while (await gateway.request_cluster_overview()).resources.number_of_task_managers < 2:
                assert loop.time() < deadline, "TaskExecutors did not register"
                await asyncio.sleep(0.02)
            job = _job()
            await gateway.submit_job(job)
            while (result := await gateway.request_job_result(job.job_id)) is None:
                assert loop.time() < deadline, "the job did not finish"
                await asyncio.sleep(0.02)
            assert result.application_status == "SUCCEEDED", result.failure
        finally:
            for te in executors:
                await te.stop()
            for rpc in rpcs:
                await rpc.close()

    asyncio.run(asyncio.wait_for(body(), 45))
