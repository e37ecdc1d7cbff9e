"""``flintlock run --target per-job``: every job of the program gets a JobManager of its own.

Flink 1.x's per-job mode (removed in Flink 2.0, fact sheet 10): the program's main() runs in the
client as for a session cluster; each ``execute()`` starts a dedicated JobManager
(``flintlock per-job-cluster``, a MiniDispatcher with an active ResourceManager that starts the
job's TaskManagers), submits the JobGraph to it over REST and follows it as a remote job. The
JobManager and its TaskManagers end with the job (attached: once the client fetched its result).
Its state and logs stay in ``<cluster.state-dir>/job-clusters/<id>/``.
"""

from __future__ import annotations

import contextlib
import subprocess

from flintlock.client.application_cluster import (
    ApplicationClusterException,
    start_dedicated_job_manager,
)
from flintlock.client.progress import stderr_console
from flintlock.client.remote import RemoteJobClient, submit_remote
from flintlock.config import Configuration
from flintlock.config.options import CLUSTER_SECRET, EXECUTION_TARGET, REST_ADDRESS, REST_PORT
from flintlock.runtime.jobgraph.job_graph import JobGraph

__all__ = ["submit_per_job"]


def submit_per_job(job_graph: JobGraph, overrides: Configuration, configuration: Configuration,
                   show_progress: bool, detached: bool) -> RemoteJobClient:
    """Start a per-job cluster for ``job_graph`` and submit it there.

    Args:
        overrides: the command line's settings, passed on to the JobManager (it reads
            ``config.yaml`` itself).
        configuration: the client's configuration (the REST client's settings).

    Raises:
        ApplicationClusterException: the JobManager did not come up (its logs are named).
        RestClientException: the submission was refused (the JobManager is stopped).
    """
    cluster = start_dedicated_job_manager(
        "per-job-cluster", ["--detached"] if detached else [], overrides, "job-clusters",
        show_output=False)
    if not cluster.rest_url:
        raise ApplicationClusterException(
            f"the per-job JobManager ended during start-up (exit code "
            f"{cluster.process.returncode}); see {cluster.log_dir / 'jobmanager.out'}")
    stderr_console().print(f"Per-job cluster for {job_graph.name}: REST {cluster.rest_url}, "
                           f"logs in {cluster.log_dir}")
    port = cluster.rest_url.rsplit(":", 1)[-1]
    rest = configuration.copy().add_all({
        EXECUTION_TARGET.key: "remote", REST_ADDRESS.key: "127.0.0.1", REST_PORT.key: port,
        CLUSTER_SECRET.key: cluster.secret})
    try:
        return submit_remote(job_graph, rest, show_progress)
    except BaseException:
        cluster.process.terminate()  # nothing is left behind
        with contextlib.suppress(subprocess.TimeoutExpired):
            cluster.process.wait(60)
        raise
