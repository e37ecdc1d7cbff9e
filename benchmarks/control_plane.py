"""Control-plane throughput: how fast the JobMaster deploys no-op subtasks on a MiniCluster.

    python -m benchmarks.control_plane --subtasks 10000 --runs 3 --out cp.json

One process per job size (the harness kills it if it overruns). It starts a MiniCluster with
``--task-managers`` TaskExecutors holding enough slots for every subtask at once, with no Spark
(control plane only), runs a warm-up job of ``WARM_UP_SUBTASKS`` subtasks, then up to ``runs``
jobs of one JobVertex with ``subtasks`` parallel ``NoOpInvokable`` subtasks
(``flintlock.testing.invokables``); it stops early, after at least one, once ``budget_s`` is
spent. From each job's ArchivedExecutionGraph (epoch-ms state timestamps, as Flink's REST API
reports them):

- ``deployed_s``: job start (INITIALIZING) to the last subtask entering DEPLOYING;
- ``finished_s``: job start to FINISHED (every subtask ran and reported back);
- ``wall_s``: ``submit_job`` call to the JobResult, measured by this process.

Writes ``{"subtasks", "task_managers", "slots_per_task_manager", "deployed_s": [...],
"finished_s": [...], "wall_s": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time

__all__ = ["measure", "noop_job"]

NOOP = "flintlock.testing.invokables:NoOpInvokable"
WARM_UP_SUBTASKS = 100


def noop_job(subtasks: int) -> object:
    """A BATCH JobGraph of one vertex with ``subtasks`` NoOp subtasks."""
    from flintlock.runtime.ids import JobID, JobVertexID
    from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
    from flintlock.runtime.jobgraph.types import JobType

    vertex = JobVertex(JobVertexID.generate(), "NoOp", subtasks, max(subtasks, 128), NOOP)
    return JobGraph(JobID.generate(), f"noop x{subtasks}", JobType.BATCH, (vertex,), {})


async def measure(subtasks: int, runs: int, task_managers: int, timeout_s: float,
                  budget_s: float = float("inf")) -> dict:
    from flintlock.config import Configuration
    from flintlock.runtime.minicluster import MiniCluster
    from flintlock.testing.clusters import NoSpark

    slots = math.ceil(subtasks / task_managers)
    cluster = MiniCluster(Configuration({}), num_task_managers=task_managers,
                          slots_per_task_manager=slots, services={"spark": NoSpark()})
    await cluster.start()
    out: dict = {"subtasks": subtasks, "task_managers": task_managers,
                 "slots_per_task_manager": slots, "deployed_s": [], "finished_s": [], "wall_s": []}
    started = time.perf_counter()
    try:
        for i in range(1 + runs):
            if i > 1 and time.perf_counter() - started > budget_s:
                break
            job = noop_job(subtasks if i > 0 else min(subtasks, WARM_UP_SUBTASKS))
            t0 = time.perf_counter()
            result = await cluster.execute(job, timeout_s=timeout_s)
            wall = time.perf_counter() - t0
            if result.application_status != "SUCCEEDED":
                raise RuntimeError(f"no-op job of {subtasks} subtasks ended "
                                   f"{result.application_status}: {result.failure}")
            archived = await cluster.dispatcher_gateway.request_job(job.job_id)
            start = archived.start_time()
            deployed = max(s.state_timestamps["DEPLOYING"]
                           for v in archived.vertices for s in v.subtasks)
            if i == 0:
                started = time.perf_counter()  # the budget counts measured jobs only
                continue  # warm-up
            out["deployed_s"].append((deployed - start) / 1000)
            out["finished_s"].append((archived.end_time() - start) / 1000)
            out["wall_s"].append(wall)
    finally:
        await cluster.close()
    return out


def main(argv: list[str] | None = None) -> int:
    import logging

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subtasks", type=int, required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--task-managers", type=int, default=4)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per job")
    p.add_argument("--budget", type=float, default=float("inf"),
                   help="no further measured job once this many seconds are spent (min. one)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    result = asyncio.run(measure(args.subtasks, args.runs, args.task_managers, args.timeout,
                                 args.budget))
    with open(args.out, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
