"""The ``flintlock`` command line (Flink ``CliFrontend``): ``run``, ``info``, ``savepoint``, ``stop``.

``flintlock run [-p N] [-D key=value ...] [-s PATH [-n]] program.py [args]`` runs the program's
main; each ``execute()`` runs where ``flintlock.client.target`` decides (the configured session
cluster, one that ``flintlock cluster start`` left running, else a local cluster), with live
progress, and ends with the JobID, runtime and status, or the root cause and exit code 1. ``-s``
(``execution.savepoint.path``) starts the program's jobs from a savepoint, ``-n``
(``execution.savepoint.ignore-unclaimed-state``) lets them drop state no operator claims.
``flintlock info program.py [args]`` prints the plan JSON of each job the program would run and
runs nothing.

``flintlock savepoint JOBID [TARGETDIRECTORY]`` and ``flintlock stop [-p DIR] JOBID`` take a
savepoint of a job on a session cluster over REST (Flink ``CliFrontend.savepoint`` / ``stop``:
``POST /jobs/:jobid/savepoints`` or ``/stop``, then polling ``/jobs/:jobid/savepoints/:triggerid``)
and print Flink's lines. ``stop`` cancels the job after the savepoint (it ends CANCELED; Flink's
ends FINISHED). Without a directory the cluster's ``state.savepoints.dir`` is used. Failures (an
unknown job, no directory, a failed savepoint with its cause, no cluster) print ``Error: ...`` and
exit with code 1.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from flintlock.config import (
    Configuration,
    IllegalConfigurationException,
    load_cluster_configuration,
)
from flintlock.config.options import SAVEPOINT_IGNORE_UNCLAIMED, SAVEPOINT_PATH
from flintlock.exceptions import FlintlockException
from flintlock.runtime.ids import JobID

if TYPE_CHECKING:
    from flintlock.client.context import ClientContext
    from flintlock.client.rest_cluster_client import RestClusterClient

# The client's modules (REST client, program runner, targets: httpx, pyarrow, ...) are imported
# by the commands that use them: `flintlock taskmanager` and `flintlock jobmanager` load this
# module too, and every process of a cluster would otherwise pay ~0.2-0.4 s for them at start.

__all__ = ["cli", "main"]


def _overrides(parallelism: int | None, dynamic: tuple[str, ...]) -> Configuration:
    conf = Configuration.from_dynamic_properties(dynamic)
    if parallelism is not None:
        conf.set_string("parallelism.default", parallelism)
    return conf


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level to stderr.")
def cli(verbose: bool) -> None:
    """flintlock: Flink's runtime architecture with tasks running on Spark."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


_program_args = click.argument("args", nargs=-1, type=click.UNPROCESSED)
_dynamic = click.option("-D", "dynamic", multiple=True, metavar="KEY=VALUE",
                        help="Set a configuration key (repeatable).")


def _run_program_or_exit(program: str, args: tuple[str, ...], context: ClientContext) -> None:
    """Run the program; on any failure print a message naming the cause and exit with code 1."""
    from flintlock.client.job_client import JobExecutionException
    from flintlock.client.program import (
        ProgramInvocationException,
        ProgramMissingJobException,
        run_program,
    )

    try:
        run_program(program, list(args), context)
    except JobExecutionException as exc:
        _fail(f"\nThe program finished with the following exception:\n\n{exc}")
    except (ProgramInvocationException, ProgramMissingJobException,
            IllegalConfigurationException) as exc:
        _fail(f"Error: {exc}")
    except FlintlockException as exc:
        _fail(f"Error: {type(exc).__name__}: {exc}")
    except SystemExit:
        raise
    except BaseException as exc:  # the program's main raised
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        _fail(f"The program's main method raised an exception:\n\n{tb}")


_jobmanager_option = click.option(
    "-m", "--jobmanager", metavar="HOST:PORT", default=None,
    help="REST address of a session cluster (sets rest.address, rest.port, execution.target=remote).")


def _apply_jobmanager(conf: Configuration, value: str) -> None:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise IllegalConfigurationException(f"-m {value!r}: expected host:port, e.g. 127.0.0.1:8081")
    conf.set_string("rest.address", host)
    conf.set_string("rest.port", port)
    conf.set_string("execution.target", "remote")


def _apply_savepoint_restore(conf: Configuration, path: str | None,
                             allow_non_restored: bool) -> None:
    """``run -s PATH`` / ``-n``: Flink's ``SavepointRestoreSettings`` as configuration keys (they
    win over the same keys given with ``-D``)."""
    if path is not None:
        if not path.strip():
            raise IllegalConfigurationException("-s/--fromSavepoint: the path is empty")
        conf.set(SAVEPOINT_PATH, path)
    if allow_non_restored:
        conf.set(SAVEPOINT_IGNORE_UNCLAIMED, "true")


_parallelism = click.option("-p", "--parallelism", type=click.IntRange(min=1), default=None,
                            help="Default parallelism of the program's jobs.")
_program_command = cli.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)


@_program_command
@_parallelism
@click.option("--target", type=click.Choice(["local", "remote", "per-job", "application"]),
              default=None,
              help="Run on a local cluster or a session cluster (default: the configured cluster, "
                   "else one `flintlock cluster start` left running, else local), on a cluster "
                   "started for each job (per-job), or start an application cluster that runs "
                   "the program's main() and ends with it.")
@_jobmanager_option
@click.option("-d", "--detached", is_flag=True, help="Submit and return the JobID at once.")
@click.option("-s", "--fromSavepoint", "--from-savepoint", "from_savepoint", metavar="PATH",
              default=None,
              help="Start the jobs from this savepoint or retained checkpoint (its directory or "
                   "_metadata file; sets execution.savepoint.path).")
@click.option("-n", "--allow-non-restored-state", "--allowNonRestoredState", "allow_non_restored",
              is_flag=True,
              help="Skip savepoint state no operator of the program claims (sets "
                   "execution.savepoint.ignore-unclaimed-state).")
@click.option("--jobmanagers", "job_managers", type=click.IntRange(min=1), default=1,
              show_default=True,
              help="--target application: JobManagers to start; one leads and runs main(), "
                   "the others stand by and take over (high availability: FILE under the "
                   "application's directory unless high-availability.type is set).")
@_dynamic
@click.argument("program", type=click.Path(dir_okay=False))
@_program_args
def run(parallelism: int | None, target: str | None, jobmanager: str | None, detached: bool,
        from_savepoint: str | None, allow_non_restored: bool, job_managers: int,
        dynamic: tuple[str, ...], program: str, args: tuple[str, ...]) -> None:
    """Run PROGRAM's main; every execute() becomes a job."""
    from flintlock.client.context import ClientContext
    from flintlock.client.target import resolve_execution_target

    if target == "application":
        _run_application(parallelism, dynamic, jobmanager, detached, from_savepoint,
                         allow_non_restored, program, args, job_managers)
    if job_managers != 1:
        _fail("Error: --jobmanagers applies to --target application only")
    try:
        overrides = _overrides(parallelism, dynamic)
        if jobmanager is not None:
            _apply_jobmanager(overrides, jobmanager)
        if target is not None:
            overrides.set_string("execution.target", target)
        _apply_savepoint_restore(overrides, from_savepoint, allow_non_restored)
        overrides, where = resolve_execution_target(overrides)
    except IllegalConfigurationException as exc:
        _fail(f"Error: {exc}")
    click.echo(f"Running {Path(program).name} on {where.description}.", err=True)
    context = ClientContext(overrides=overrides, show_progress=None, detached=detached)
    _run_program_or_exit(program, args, context)


def _run_application(parallelism: int | None, dynamic: tuple[str, ...], jobmanager: str | None,
                     detached: bool, from_savepoint: str | None, allow_non_restored: bool,
                     program: str, args: tuple[str, ...], job_managers: int = 1) -> NoReturn:
    """``run --target application``: start an application cluster for PROGRAM; exits with the
    application's status (attached) or once it serves (detached)."""
    from flintlock.client.application_cluster import (
        ApplicationClusterException,
        start_application_cluster,
        wait_for_application,
    )

    if jobmanager is not None:
        _fail("Error: -m names a session cluster; --target application starts a cluster of its own")
    try:
        overrides = _overrides(parallelism, dynamic)
        _apply_savepoint_restore(overrides, from_savepoint, allow_non_restored)
        cluster = start_application_cluster(program, list(args), overrides, detached,
                                            job_managers=job_managers)
    except (IllegalConfigurationException, ApplicationClusterException) as exc:
        _fail(f"Error: {exc}")
    if detached and not cluster.rest_url:  # it ended before it served: say so, not "started"
        _fail(f"Error: the application ended during start-up (exit code "
              f"{cluster.process.returncode}); see {cluster.log_dir / 'jobmanager.out'}",
              cluster.process.returncode or 1)
    where = f"REST {cluster.rest_url}, " if cluster.rest_url else ""
    pids = ", ".join(str(p.pid) for p in cluster.processes)
    click.echo(f"Application {cluster.application_id} of {Path(program).name}: {where}"
               f"JobManager pid{'s' if cluster.standbys else ''} {pids}, logs in "
               f"{cluster.log_dir}", err=True)
    if detached:
        sys.exit(0)
    code = wait_for_application(cluster)
    status = {0: "SUCCEEDED", 1: "FAILED", 2: "CANCELED"}.get(code, f"ended with code {code}")
    click.echo(f"Application {cluster.application_id} {status}; logs in {cluster.log_dir}",
               err=True)
    sys.exit(code)


@_program_command
@_parallelism
@_dynamic
@click.argument("program", type=click.Path(dir_okay=False))
@_program_args
def info(parallelism: int | None, dynamic: tuple[str, ...], program: str,
         args: tuple[str, ...]) -> None:
    """Print the plan JSON of PROGRAM's jobs without running them."""
    from flintlock.client.context import ClientContext

    try:
        context = ClientContext(overrides=_overrides(parallelism, dynamic), capture_plans=[])
    except IllegalConfigurationException as exc:
        _fail(f"Error: {exc}")
    _run_program_or_exit(program, args, context)
    assert context.capture_plans is not None
    for job_graph in context.capture_plans:
        click.echo(json.dumps(dict(job_graph.plan), indent=2))


# ---- savepoints ---------------------------------------------------------------------------------

#: how long `savepoint` and `stop` wait for the savepoint (the cluster fails one that takes
#: longer than its checkpoint timeout)
SAVEPOINT_WAIT_S = 600.0


def _cluster_client(jobmanager: str | None, dynamic: tuple[str, ...]) -> RestClusterClient:
    """A REST client of the cluster ``-m`` / ``config.yaml`` / ``-D`` name (exits on bad input)."""
    from flintlock.client.remote import rest_client_for

    try:
        conf = load_cluster_configuration().add_all(_overrides(None, dynamic))
        if jobmanager is not None:
            _apply_jobmanager(conf, jobmanager)
    except IllegalConfigurationException as exc:
        _fail(f"Error: {exc}")
    return rest_client_for(conf)


def _check_job_id(job_id: str) -> None:
    try:
        JobID.from_hex(job_id)
    except ValueError:
        _fail(f"Error: {job_id!r} is not a job id (32 hexadecimal characters; `flintlock list` "
              "shows them).")


def _take_savepoint(jobmanager: str | None, dynamic: tuple[str, ...], job_id: str,
                    trigger: Callable[[RestClusterClient], str], say_waiting: bool) -> str:
    """Trigger with ``trigger(client)`` (a trigger id), poll its status; the savepoint's path.

    Exits with code 1 and ``Error: ...`` when the cluster is not reachable, refuses the request
    (unknown job, no secret, bad input) or the savepoint fails (with its cause).
    """
    from flintlock.client.job_client import SavepointException, wait_for_savepoint
    from flintlock.client.rest_cluster_client import (
        ClusterNotReachableException,
        RestClientException,
    )

    with _cluster_client(jobmanager, dynamic) as client:
        try:
            trigger_id = trigger(client)
            if say_waiting:
                click.echo("Waiting for response...")
            return wait_for_savepoint(lambda: client.savepoint_status(job_id, trigger_id),
                                      SAVEPOINT_WAIT_S)
        except RestClientException as exc:
            _fail(f"Error: the savepoint of job {job_id} was refused ({exc.status_code}): "
                  f"{'; '.join(exc.errors) or 'no details'}")
        except SavepointException as exc:
            _fail(f"Error: the savepoint of job {job_id} failed: {exc}")
        except (ClusterNotReachableException, TimeoutError) as exc:
            _fail(f"Error: {exc}")


_cluster_option = click.option(
    "-m", "--jobmanager", metavar="HOST:PORT", default=None,
    help="REST address of the cluster (default: rest.address:rest.port, else the cluster "
         "`flintlock cluster start` left running).")


@cli.command("savepoint")
@_cluster_option
@_dynamic
@click.argument("job_id", metavar="JOBID")
@click.argument("target_directory", metavar="[TARGETDIRECTORY]", required=False)
def savepoint(jobmanager: str | None, dynamic: tuple[str, ...], job_id: str,
              target_directory: str | None) -> None:
    """Take a savepoint of the running job JOBID (into TARGETDIRECTORY, else the cluster's
    state.savepoints.dir); the job keeps running."""
    _check_job_id(job_id)
    click.echo(f"Triggering savepoint for job {job_id}.")
    path = _take_savepoint(jobmanager, dynamic, job_id,
                           lambda c: c.trigger_savepoint(job_id, target_directory, False), True)
    click.echo(f"Savepoint completed. Path: {path}")
    click.echo("You can resume your program from this savepoint with the run command.")


@cli.command("stop")
@click.option("-p", "--savepoint-path", "--savepointPath", "savepoint_path", metavar="DIR",
              default=None, help="Directory of the savepoint (default: state.savepoints.dir).")
@click.option("-d", "--drain", is_flag=True, default=False,
              help="Emit MAX_WATERMARK before the job finishes: every event-time window and "
                   "timer fires (use it to end a pipeline for good, not to resume it).")
@_cluster_option
@_dynamic
@click.argument("job_id", metavar="JOBID")
def stop(savepoint_path: str | None, drain: bool, jobmanager: str | None,
         dynamic: tuple[str, ...], job_id: str) -> None:
    """Stop the job JOBID with a savepoint: its sources stop after the savepoint and the job
    FINISHES (Flink's stop-with-savepoint; resume it with run -s)."""
    _check_job_id(job_id)
    click.echo(f"{'Draining' if drain else 'Suspending'} job {job_id}.")
    path = _take_savepoint(jobmanager, dynamic, job_id,
                           lambda c: c.stop_with_savepoint(job_id, savepoint_path, drain), False)
    click.echo(f"Savepoint completed. Path: {path}")


def _register_cluster_commands() -> None:
    from flintlock.client.cluster_cli import register

    register(cli)


_register_cluster_commands()


def main() -> None:
    """The ``flintlock`` command (``python -m flintlock``): every process of flintlock's, the
    client's, a JobManager's and a TaskManager's, runs this."""
    try:
        cli(prog_name="flintlock")
    finally:
        # The process ends here (click exits through SystemExit). Its objects need no garbage
        # collection any more: moving them to the permanent generation skips the collections of
        # the interpreter's finalization, 0.2-0.4 s in a process that imported pyspark, pyarrow
        # and grpc, on every command and every JobManager and TaskManager stop. atexit handlers
        # (logging, Spark sessions), thread joins and module teardown still run.
        gc.freeze()


if __name__ == "__main__":
    main()
