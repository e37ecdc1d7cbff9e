"""The ``flintlock`` command line (Flink ``CliFrontend``): ``run`` and ``info``.

``flintlock run [-p N] [-D key=value ...] program.py [args]`` runs the program's main; each
``execute()`` runs where ``flintlock.client.target`` decides (the configured session cluster, one
that ``flintlock cluster start`` left running, else a local cluster), with live progress, and ends
with the JobID, runtime and status, or the root cause and exit code 1. ``flintlock info program.py [args]`` prints the plan JSON
of each job the program would run and runs nothing.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from pathlib import Path

import click

from flintlock.client.context import ClientContext
from flintlock.client.job_client import JobExecutionException
from flintlock.client.program import (
    ProgramInvocationException,
    ProgramMissingJobException,
    run_program,
)
from flintlock.client.target import resolve_execution_target
from flintlock.config import Configuration, IllegalConfigurationException
from flintlock.exceptions import FlintlockException

__all__ = ["cli", "main"]


def _overrides(parallelism: int | None, dynamic: tuple[str, ...]) -> Configuration:
    conf = Configuration.from_dynamic_properties(dynamic)
    if parallelism is not None:
        conf.set_string("parallelism.default", parallelism)
    return conf


def _fail(message: str, code: int = 1) -> None:
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


_parallelism = click.option("-p", "--parallelism", type=click.IntRange(min=1), default=None,
                            help="Default parallelism of the program's jobs.")
_program_command = cli.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)


@_program_command
@_parallelism
@click.option("--target", type=click.Choice(["local", "remote"]), default=None,
              help="Run on a local cluster or a session cluster (default: the configured cluster, "
                   "else one `flintlock cluster start` left running, else local).")
@_jobmanager_option
@click.option("-d", "--detached", is_flag=True, help="Submit and return the JobID at once.")
@_dynamic
@click.argument("program", type=click.Path(dir_okay=False))
@_program_args
def run(parallelism: int | None, target: str | None, jobmanager: str | None, detached: bool,
        dynamic: tuple[str, ...], program: str, args: tuple[str, ...]) -> None:
    """Run PROGRAM's main; every execute() becomes a job."""
    try:
        overrides = _overrides(parallelism, dynamic)
        if jobmanager is not None:
            _apply_jobmanager(overrides, jobmanager)
        if target is not None:
            overrides.set_string("execution.target", target)
        overrides, where = resolve_execution_target(overrides)
    except IllegalConfigurationException as exc:
        _fail(f"Error: {exc}")
    click.echo(f"Running {Path(program).name} on {where.description}.", err=True)
    context = ClientContext(overrides=overrides, show_progress=None, detached=detached)
    _run_program_or_exit(program, args, context)


@_program_command
@_parallelism
@_dynamic
@click.argument("program", type=click.Path(dir_okay=False))
@_program_args
def info(parallelism: int | None, dynamic: tuple[str, ...], program: str,
         args: tuple[str, ...]) -> None:
    """Print the plan JSON of PROGRAM's jobs without running them."""
    try:
        context = ClientContext(overrides=_overrides(parallelism, dynamic), capture_plans=[])
    except IllegalConfigurationException as exc:
        _fail(f"Error: {exc}")
    _run_program_or_exit(program, args, context)
    assert context.capture_plans is not None
    for job_graph in context.capture_plans:
        click.echo(json.dumps(dict(job_graph.plan), indent=2))


def _register_cluster_commands() -> None:
    from flintlock.client.cluster_cli import register

    register(cli)


_register_cluster_commands()


def main() -> None:
    cli(prog_name="flintlock")


if __name__ == "__main__":
    main()
