"""Cluster commands of the ``flintlock`` CLI: processes, ``cluster start|stop``, ``list``, ``cancel``.

``list`` prints jobs like Flink's CLI (``dd.MM.yyyy HH:mm:ss : <jobId> : <name> (<STATE>)``, grouped
as scheduled, running and terminated); ``cancel`` sends ``PATCH /jobs/:jobid?mode=cancel``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys

import click

from flintlock.config import (
    Configuration,
    IllegalConfigurationException,
    load_cluster_configuration,
)
from flintlock.config.resource_manager_options import RM_TYPE
from flintlock.exceptions import FlintlockException
from flintlock.runtime.net.ssl_utils import rest_scheme

__all__ = ["register"]

_SCHEDULED = {"INITIALIZING", "CREATED"}
_TERMINAL = {"FINISHED", "FAILED", "CANCELED"}


def _configuration(dynamic: tuple[str, ...], jobmanager: str | None = None) -> Configuration:
    try:
        conf = load_cluster_configuration().add_all(Configuration.from_dynamic_properties(dynamic))
        if jobmanager:
            host, _, port = jobmanager.rpartition(":")
            if not host or not port.isdigit():
                raise IllegalConfigurationException(f"-m {jobmanager!r}: expected host:port")
            conf.set_string("rest.address", host).set_string("rest.port", port)
        return conf
    except IllegalConfigurationException as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)


def _exit_on_client_errors(fn):  # type: ignore[no-untyped-def]
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return fn(*args, **kwargs)
        except FlintlockException as exc:  # the REST client's errors too (subclasses)
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


_dynamic = click.option("-D", "dynamic", multiple=True, metavar="KEY=VALUE",
                        help="Set a configuration key (repeatable).")
_jm = click.option("-m", "--jobmanager", metavar="HOST:PORT", default=None,
                   help="REST address of the cluster (default: rest.address:rest.port).")


def register(cli: click.Group) -> None:
    """Add the cluster commands to ``cli``."""

    @cli.command("jobmanager")
    @_dynamic
    @click.option("--port-file", default=None, help="Write the bound ports here (JSON).")
    @_exit_on_client_errors
    def jobmanager(dynamic: tuple[str, ...], port_file: str | None) -> None:
        """Run a JobManager process (Dispatcher, ResourceManager, REST) in the foreground."""
        from flintlock.runtime.entrypoint.job_manager import run_job_manager

        asyncio.run(run_job_manager(_configuration(dynamic), port_file))

    @cli.command("application-cluster", context_settings={
        "ignore_unknown_options": True, "allow_interspersed_args": False})
    @_dynamic
    @click.option("--port-file", default=None, help="Write the bound ports here (JSON).")
    @click.argument("program", type=click.Path(dir_okay=False))
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    @_exit_on_client_errors
    def application_cluster(dynamic: tuple[str, ...], port_file: str | None, program: str,
                            args: tuple[str, ...]) -> None:
        """Run the JobManager of an application cluster: it runs PROGRAM's main() itself and
        exits with the application's status (0 succeeded, 1 failed, 2 cancelled). `flintlock run
        --target application` starts it."""
        from flintlock.client.application import ApplicationSpec
        from flintlock.runtime.entrypoint.job_manager import run_job_manager

        sys.exit(asyncio.run(run_job_manager(_configuration(dynamic), port_file,
                                             application=ApplicationSpec(program, args))))

    @cli.command("per-job-cluster")
    @_dynamic
    @click.option("--port-file", default=None, help="Write the bound ports here (JSON).")
    @click.option("--detached", is_flag=True,
                  help="End once the job ended (default: once its result was also fetched).")
    @_exit_on_client_errors
    def per_job_cluster(dynamic: tuple[str, ...], port_file: str | None, detached: bool) -> None:
        """Run the JobManager of a per-job cluster: it runs the first job submitted to it and
        exits with its status (0 succeeded, 1 failed, 2 cancelled). `flintlock run --target
        per-job` starts one per job."""
        from flintlock.runtime.entrypoint.job_manager import run_job_manager

        sys.exit(asyncio.run(run_job_manager(_configuration(dynamic), port_file,
                                             per_job="detached" if detached else "attached")))

    @cli.command("taskmanager")
    @_dynamic
    @click.option("--port-file", default=None, help="Write the bound ports here (JSON).")
    @_exit_on_client_errors
    def taskmanager(dynamic: tuple[str, ...], port_file: str | None) -> None:
        """Run a TaskManager process (TaskExecutor + Spark session) in the foreground."""
        from flintlock.runtime.spark.session import SparkSessionProvider

        configuration = _configuration(dynamic)
        spark = SparkSessionProvider(configuration)
        spark.start_in_background()  # its JVM starts while the TaskManager's modules load
        from flintlock.runtime.entrypoint.task_manager import run_task_manager

        asyncio.run(run_task_manager(configuration, port_file, spark=spark))

    @cli.group("cluster")
    def cluster() -> None:
        """Start or stop a standalone session cluster on this machine."""

    @cluster.command("start")
    @click.option("--taskmanagers", "-n", type=click.IntRange(min=0), default=1, show_default=True,
                  help="TaskManagers to start now (0 with -D resourcemanager.type=active: the "
                       "JobManager starts them as jobs need slots).")
    @click.option("--jobmanagers", type=click.IntRange(min=1), default=1, show_default=True,
                  help="JobManagers to start: one leads, the others stand by and take over when "
                       "it dies (high availability; FILE under the state directory unless "
                       "high-availability.type is set).")
    @click.option("--zookeeper", is_flag=True,
                  help="Also start a local ZooKeeper (Debian's zookeeper package) and use it for "
                       "high availability; for trying it on one machine.")
    @_dynamic
    @_exit_on_client_errors
    def cluster_start(taskmanagers: int, jobmanagers: int, zookeeper: bool,
                      dynamic: tuple[str, ...]) -> None:
        """Start JobManagers and N TaskManagers in the background."""
        from flintlock.client.standalone_cluster import start_cluster

        configuration = _configuration(dynamic)
        if taskmanagers == 0 and configuration.get(RM_TYPE) != "active":
            click.echo("Error: --taskmanagers 0 needs -D resourcemanager.type=active (a "
                       "standalone ResourceManager only uses TaskManagers started for it)",
                       err=True)
            sys.exit(1)
        info = start_cluster(configuration, list(dynamic), taskmanagers,
                             job_managers=jobmanagers, zookeeper=zookeeper)
        managers = (f"RPC port {info.rpc_port}" if info.job_managers == 1 else
                    f"{info.job_managers} JobManagers (one leads)")
        click.echo(
            f"Cluster started: REST {rest_scheme(configuration)}://127.0.0.1:{info.rest_port}, "
            f"{managers}, "
            f"{info.task_managers} TaskManager(s); logs in {info.state_dir / 'log'}"
        )

    @cluster.command("add-jobmanager")
    @_dynamic
    @_exit_on_client_errors
    def cluster_add_jobmanager(dynamic: tuple[str, ...]) -> None:
        """Start one more JobManager for the running high-availability cluster (a standby;
        pass the -D settings the cluster was started with)."""
        from flintlock.client.standalone_cluster import add_job_manager

        name = add_job_manager(_configuration(dynamic), list(dynamic))
        click.echo(f"Started {name}; it stands by unless no JobManager leads.")

    @cluster.command("add-taskmanager")
    @_dynamic
    @_exit_on_client_errors
    def cluster_add_taskmanager(dynamic: tuple[str, ...]) -> None:
        """Start one more TaskManager for the running cluster (Flink's `taskmanager.sh start`);
        its -D settings apply to it alone (pass the cluster's own too, e.g. its state dir)."""
        from flintlock.client.standalone_cluster import add_task_manager

        name = add_task_manager(_configuration(dynamic), list(dynamic))
        click.echo(f"Started {name}; it registered with the cluster.")

    @cluster.command("stop")
    @_dynamic
    def cluster_stop(dynamic: tuple[str, ...]) -> None:
        """Stop the cluster started by `flintlock cluster start` (no process is left behind)."""
        from flintlock.client.standalone_cluster import stop_cluster

        stopped = stop_cluster(_configuration(dynamic))
        click.echo(f"Stopped {', '.join(stopped)}." if stopped else "No cluster was running.")

    @cli.command("list")
    @click.option("-r", "--running", is_flag=True, help="Only scheduled and running jobs.")
    @click.option("-a", "--all", "all_", is_flag=True, help="Also finished, failed and cancelled jobs.")
    @_jm
    @_dynamic
    @_exit_on_client_errors
    def list_(running: bool, all_: bool, jobmanager: str | None, dynamic: tuple[str, ...]) -> None:
        """List the cluster's jobs (as Flink's `flink list`)."""
        from flintlock.client.remote import rest_client_for

        with rest_client_for(_configuration(dynamic, jobmanager)) as client:
            jobs = client.list_jobs()

        def line(job: dict) -> str:  # type: ignore[type-arg]
            start = dt.datetime.fromtimestamp(job["start-time"] / 1000).strftime("%d.%m.%Y %H:%M:%S")
            return f"{start} : {job['jid']} : {job['name']} ({job['state']})"

        groups = [
            ("Scheduled Jobs", [j for j in jobs if j["state"] in _SCHEDULED], True),
            ("Running/Restarting Jobs",
             [j for j in jobs if j["state"] not in _SCHEDULED | _TERMINAL], True),
            ("Terminated Jobs", [j for j in jobs if j["state"] in _TERMINAL], all_ and not running),
        ]
        for title, members, show in groups:
            if not show:
                continue
            click.echo(f"------------------ {title} ------------------")
            if members:
                for job in sorted(members, key=lambda j: j["start-time"]):
                    click.echo(line(job))
            else:
                click.echo(f"No {title.lower()}.")

    @cli.command("cancel")
    @click.argument("job_id")
    @_jm
    @_dynamic
    @_exit_on_client_errors
    def cancel(job_id: str, jobmanager: str | None, dynamic: tuple[str, ...]) -> None:
        """Cancel the job JOB_ID."""
        from flintlock.client.remote import rest_client_for

        with rest_client_for(_configuration(dynamic, jobmanager)) as client:
            client.cancel(job_id)
        click.echo(f"Cancelled job {job_id}.")
