"""``flintlock run --target application``: a cluster of its own for one program.

Flink's application mode (``flink run --target <x>-application``, fact sheet 10): the client starts
a JobManager process that runs the program's main() itself (``flintlock application-cluster``,
``flintlock.client.application``), with an active ResourceManager that starts TaskManager
processes as the program's jobs need slots and stops them when idle. The cluster ends when the
application does; nothing is left behind.

Everything of one application lives in ``<cluster.state-dir>/applications/<application id>/``:
``jobmanager.pid``, ``jobmanager.port`` (its REST port), ``secret`` (0600, generated unless
``security.cluster.secret`` is set) and ``log/`` (the JobManager's and TaskManagers' logs, kept
after the application ended).

- **attached** (default): the JobManager's output (the program's prints, errors) shows in this
  terminal; the command returns the application's status as its exit code (0 succeeded, 1 failed,
  2 cancelled). Ctrl-C stops the application cluster (its jobs stop with it).
- **detached** (``-d``): returns once the JobManager serves REST, printing where; its output
  goes to ``log/jobmanager.out``.

Defaults an application cluster sets unless configured: ``resourcemanager.type: active``,
``rest.port: 0`` and ``jobmanager.rpc.port: 0`` (any free port, so several applications and a
session cluster share a host), ``env.log.dir`` as above, and ``taskmanager.numberOfTaskSlots``
= this host's cores: its TaskManagers run on this host, and one TaskManager with a Spark server
of all cores starts faster and uses less memory than one per slot (measured: two TaskManagers
of one slot took 10.5 s each to start on 2 cores, one of two slots 6.4 s).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from flintlock.client.remote import cluster_state_dir
from flintlock.client.secret_file import write_secret_file
from flintlock.config import Configuration, load_cluster_configuration
from flintlock.config.options import CLUSTER_SECRET, EXECUTION_TARGET
from flintlock.exceptions import FlintlockException
from flintlock.runtime.entrypoint.common import SECRET_ENV

__all__ = ["ApplicationCluster", "ApplicationClusterException", "start_application_cluster",
           "start_dedicated_job_manager", "wait_for_application"]

#: settings an application cluster gets unless the configuration has them
_DEFAULTS = {"resourcemanager.type": "active", "rest.port": "0", "jobmanager.rpc.port": "0"}


class ApplicationClusterException(FlintlockException):
    """The application cluster could not be started; the message says why and where the logs are."""


@dataclass
class ApplicationCluster:
    """A JobManager started for one application (or, ``per-job``, for one job)."""

    application_id: str
    state_dir: Path
    process: subprocess.Popen[bytes]
    #: "" when the application ended before its REST port could be read
    rest_url: str
    secret: str = ""

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"


def start_application_cluster(program: str, args: list[str], overrides: Configuration,
                              detached: bool, timeout_s: float = 120.0) -> ApplicationCluster:
    """Start the JobManager of an application cluster for ``program`` and wait until it serves
    REST.

    Args:
        overrides: the command line's configuration (``-D``, ``-p``); passed on to the JobManager
            and from it to the TaskManagers.
        detached: the JobManager's output goes to ``log/jobmanager.out`` instead of this
            process's stdout and stderr, and it runs in its own session.

    Raises:
        ApplicationClusterException: the program file does not exist, or the JobManager ended or
            did not serve within ``timeout_s``.
    """
    if not Path(program).is_file():
        raise ApplicationClusterException(
            f"Program file {program!r} does not exist or is not a file.")
    return start_dedicated_job_manager("application-cluster", [program, *args], overrides,
                                       "applications", show_output=not detached,
                                       timeout_s=timeout_s)


def start_dedicated_job_manager(command_name: str, tail: list[str], overrides: Configuration,
                                kind_dir: str, show_output: bool,
                                timeout_s: float = 120.0) -> ApplicationCluster:
    """Start ``flintlock <command_name> -D ... --port-file F <tail>`` in its own session with
    its state in ``<cluster.state-dir>/<kind_dir>/<id>/`` and wait until it serves REST.

    Raises:
        ApplicationClusterException: it ended or did not serve within ``timeout_s``.
    """
    conf = load_cluster_configuration().add_all(overrides)
    cluster_id = secrets.token_hex(16)
    state = cluster_state_dir(conf) / kind_dir / cluster_id
    (state / "log").mkdir(parents=True)
    secret = conf.get(CLUSTER_SECRET) or os.environ.get(SECRET_ENV)
    if not secret:
        secret = secrets.token_hex(32)
        write_secret_file(state / "secret", secret)
    defaults = {**_DEFAULTS, "taskmanager.numberOfTaskSlots": str(os.cpu_count() or 1)}
    settings = {key: value for key, value in defaults.items() if conf.get_raw(key) is None}
    settings.update({k: v for k, v in overrides.to_dict().items() if k != EXECUTION_TARGET.key})
    if conf.get_raw("env.log.dir") is None:
        settings["env.log.dir"] = str(state / "log")
    port_file = state / "jobmanager.port"
    command = [sys.executable, "-m", "flintlock", command_name,
               *[a for k, v in settings.items() for a in ("-D", f"{k}={v}")],
               "--port-file", str(port_file), *tail]
    env = {**os.environ, SECRET_ENV: str(secret), "PYTHONUNBUFFERED": "1"}
    if show_output:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    else:
        with open(state / "log" / "jobmanager.out", "ab") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, env=env, start_new_session=True)
    (state / "jobmanager.pid").write_text(str(process.pid))
    port = _wait_for_rest_port(process, port_file, state, timeout_s)
    return ApplicationCluster(cluster_id, state, process,
                              f"http://127.0.0.1:{port}" if port is not None else "", str(secret))


def _wait_for_rest_port(process: subprocess.Popen[bytes], port_file: Path, state: Path,
                        timeout_s: float) -> int | None:
    """The JobManager's REST port, once its port file has it; None when the application ended
    first (its exit code tells how)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return int(json.loads(port_file.read_text())["rest_port"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        if process.poll() is not None:
            if process.returncode in (0, 1, 2):
                return None  # the application already ended (its REST port file is gone)
            raise ApplicationClusterException(
                f"the application's JobManager exited with code {process.returncode} during "
                f"start-up; see {state / 'log'}")
        time.sleep(0.05)
    process.terminate()
    raise ApplicationClusterException(
        f"the application's JobManager did not serve within {timeout_s:.0f} s; see "
        f"{state / 'log'}")


def wait_for_application(cluster: ApplicationCluster) -> int:
    """Wait for an attached application to end; returns its exit code. Ctrl-C (SIGINT) stops
    the application cluster (SIGTERM to its JobManager, which stops its TaskManagers)."""
    try:
        return cluster.process.wait()
    except KeyboardInterrupt:
        cluster.process.send_signal(signal.SIGTERM)
        try:
            return cluster.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.process.pid, signal.SIGKILL)
            return cluster.process.wait()
