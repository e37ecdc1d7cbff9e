"""Where ``flintlock run`` runs a program's jobs (Flink ``CliFrontend``'s choice of executor).

Flink's ``flink run`` submits to the cluster its configuration names and runs nothing locally
unless told (``-t local``). ``flintlock run`` decides in this order, first match wins:

1. ``--target local|remote``, ``-m host:port`` or ``execution.target`` in ``-D`` or ``config.yaml``:
   as given.
2. ``rest.address`` or ``rest.port`` in ``-D`` or ``config.yaml``: the session cluster there.
3. A cluster that ``flintlock cluster start`` left running in the state directory
   (``cluster.state-dir``, default ``~/.flintlock/cluster``): its JobManager's pid file names a live
   process and its port file gives the REST port.
4. Otherwise a local cluster (a MiniCluster in the client process).

``python program.py`` is not the CLI and always runs locally unless the program's configuration
says otherwise, like Flink's ``StreamExecutionEnvironment`` in an IDE.
"""

from __future__ import annotations

from dataclasses import dataclass

from flintlock.client.remote import cluster_state_dir, rest_url
from flintlock.client.standalone_cluster import running_cluster_rest_port
from flintlock.config import (
    Configuration,
    IllegalConfigurationException,
    load_cluster_configuration,
)
from flintlock.config.options import EXECUTION_TARGET, REST_ADDRESS, REST_PORT

__all__ = ["ExecutionTarget", "resolve_execution_target"]


@dataclass(frozen=True)
class ExecutionTarget:
    """``kind``: ``"local"``, ``"remote"`` or ``"per-job"``; ``description``: one line for the
    user."""

    kind: str
    description: str


def resolve_execution_target(overrides: Configuration) -> tuple[Configuration, ExecutionTarget]:
    """Decide where the CLI's jobs run; returns a copy of ``overrides`` with ``execution.target``
    set, and what to tell the user.

    Args:
        overrides: the command line's configuration (``-D``, ``-m``, ``--target``, ``-p``).

    Raises:
        IllegalConfigurationException: ``config.yaml`` or an override has an invalid value.
    """
    conf = load_cluster_configuration().add_all(overrides)
    resolved = overrides.copy()
    if conf.contains(EXECUTION_TARGET):
        kind = conf.get(EXECUTION_TARGET)
        if kind == "embedded":
            raise IllegalConfigurationException(
                "execution.target: embedded is what an application cluster's JobManager runs "
                "the program with; run it with `flintlock run --target application` instead")
        if kind == "local":
            return resolved.set(EXECUTION_TARGET, "local"), _local("as configured")
        if kind == "per-job":
            return resolved.set(EXECUTION_TARGET, "per-job"), ExecutionTarget(
                "per-job", "a JobManager started for each job, with TaskManagers started for it")
        return resolved.set(EXECUTION_TARGET, "remote"), _remote(conf, "as configured")
    if conf.contains(REST_ADDRESS) or conf.contains(REST_PORT):
        return resolved.set(EXECUTION_TARGET, "remote"), _remote(conf, "rest.address/rest.port")
    state = cluster_state_dir(conf)
    if running_cluster_rest_port(state) is not None:
        # the REST client reads the port (and the secret) from the state directory
        return resolved.set(EXECUTION_TARGET, "remote"), _remote(
            conf, f"started by `flintlock cluster start`, state in {state}; "
                  "--target local runs on a local cluster instead")
    return resolved.set(EXECUTION_TARGET, "local"), _local(
        "no cluster configured or running; `flintlock cluster start` starts one")


def _local(why: str) -> ExecutionTarget:
    return ExecutionTarget("local", f"a local cluster in this process ({why})")


def _remote(conf: Configuration, why: str) -> ExecutionTarget:
    return ExecutionTarget("remote", f"the session cluster at {rest_url(conf)} ({why})")
