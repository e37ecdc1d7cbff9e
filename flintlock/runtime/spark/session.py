"""One Spark Connect session per TaskManager process (ARCHITECTURE section 4).

``SparkSessionProvider.get()`` creates the session lazily, once, thread-safely:

- ``spark.remote`` set (``sc://host:15002``): a Connect client to that server; ``spark.*`` settings
  are applied as runtime SQL confs (static ones are ignored with a debug log).
- otherwise an embedded local Connect server on ``local[<cores>]`` (``taskmanager.cpu.cores``,
  default this machine's cores): the server is started with all
  ``spark.*`` settings as its SparkConf (so static confs such as ``spark.ui.enabled`` work), on an
  ephemeral gRPC port (several TaskManager processes on one host never collide), then a Connect
  client session attaches to it. The embedded server lives as long as the process; a second
  provider in the same process attaches a new Connect session to the same server.

Pyspark internals used (4.3.0): ``pyspark.sql.connect.session.SparkSession._start_connect_server``
(what ``builder.remote("local")`` calls) and ``SparkConnectService.localPort()`` through Py4J (what
pyspark's own tests use to find an ephemeral port); ``ExecuteSessionTag`` through Py4J to name the
Spark job tag of a Connect operation tag (``cancel_jobs_with_connect_tag``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import sys
import tempfile
import threading
import uuid
import warnings
import weakref
from concurrent.futures import Future
from typing import Any

from flintlock.config import Configuration
from flintlock.config.options import (
    TM_CPU_CORES,
    TM_SPARK_CLASS_DATA_SHARING,
    TM_SPARK_CLASS_DATA_SHARING_DIR,
    TM_SPARK_FAST_LOCAL_FILESYSTEM,
    TM_SPARK_NICE,
)
from flintlock.config.sensitive import hide_credentials
from flintlock.runtime.spark.priority import call_niced, new_session_gateway

__all__ = [
    "DEFAULT_GC",
    "collector_flag",
    "driver_memory",
    "embedded_java_options",
    "SparkSessionProvider",
    "cancel_jobs_with_connect_tag",
    "connect_job_tag",
    "default_spark_settings",
    "embedded_active_job_ids",
    "embedded_sql_status_store",
    "embedded_cancel_all_jobs",
    "embedded_codegen_compilations",
    "embedded_server_pid",
    "embedded_spark_context",
]

log = logging.getLogger(__name__)

_server_lock = threading.Lock()
_local_server: dict[str, Any] = {}  # master, port: the embedded server of this process
_providers: weakref.WeakSet[SparkSessionProvider] = weakref.WeakSet()


def _close_all_at_exit() -> None:
    # Closing Connect channels from ``__del__`` during interpreter teardown can hang in grpc once
    # the embedded server is gone; close them first (atexit runs LIFO, after-registered first).
    for provider in list(_providers):
        provider.stop()


def _register_atexit() -> None:
    """(Re-)register the closer so it runs before the ``_on_exit`` hook of every Connect client
    created so far (atexit runs last-registered first): a closed client skips its exit RPCs,
    which would otherwise retry against a server that is already gone."""
    import atexit

    atexit.unregister(_close_all_at_exit)
    atexit.register(_close_all_at_exit)


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
# Task and query failures reach the client as exceptions (flintlock names the operator).
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tsm.name = org.apache.spark.scheduler.TaskSetManager
logger.tsm.level = off
logger.connect.name = org.apache.spark.sql.connect
logger.connect.level = off
logger.python.name = org.apache.spark.api.python
logger.python.level = off
"""

# Static confs (only settable when the embedded server starts).
_STATIC_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.artifact.isolation.enabled": "true",
    # Connect caches the last 16 analysed plans per session, keyed by the plan; a streaming
    # task's plans embed its epoch's rows (createDataFrame of Arrow segments), so the cache would
    # keep up to 16 epochs of rows in the driver heap. flintlock builds each epoch's plan once,
    # so the cache saves nothing there.
    "spark.connect.session.planCache.enabled": "false",
    # running Spark tasks' metrics reach the SQL status store with executor heartbeats (10 s by
    # default; in-process in local mode): what live I/O of batch subtasks reads (spark_progress)
    "spark.executor.heartbeatInterval": "3s",
}


def default_spark_settings(cores: int) -> dict[str, str]:
    """Defaults for a small machine: ``cores`` shuffle partitions, AQE on, no UI, no progress bar."""
    return {
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        **_STATIC_DEFAULTS,
    }


def _log4j_options() -> str:
    digest = hashlib.sha1(_LOG4J2.encode()).hexdigest()[:8]
    path = os.path.join(tempfile.gettempdir(), f"flintlock-log4j2-{os.getuid()}-{digest}.properties")
    if not os.path.exists(path):
        with open(path, "w") as fh:
            fh.write(_LOG4J2)
    return f"-Dlog4j2.configurationFile=file:{path}"


def _prepare_environment() -> None:
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # PySpark logs every failed query with its JVM stack trace at ERROR; flintlock reports the
    # error itself (naming the operator), so keep that logger for critical messages only.
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)


#: The embedded server's garbage collector unless ``spark.driver.extraJavaOptions`` picks one.
#: Measured (session cluster, 2 x 1 slot, 2 cores, TPC-H SF 1, warm, two clusters of each
#: alternating): ParallelGC Q3 5.0 s / Q8 6.7 s against G1's (the JVM default) 6.2 s / 7.9 s;
#: plain PySpark's Q3 gains ~5% from it. Many short Spark jobs in two JVMs on two cores pay for
#: G1's concurrent threads and write barriers; a 1 GiB heap keeps ParallelGC's pauses short.
DEFAULT_GC = "-XX:+UseParallelGC"
_GC_FLAG = re.compile(r"-XX:\+Use\w*GC\b")


#: JVM options with which a user manages class-data sharing themselves (then flintlock does not)
_USER_CDS_FLAGS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")


def collector_flag(options: str) -> str:
    """The garbage-collector flag a server started with JVM ``options`` runs with: the last
    ``-XX:+Use...GC`` among them, else ``DEFAULT_GC``."""
    flags = _GC_FLAG.findall(options)
    return flags[-1] if flags else DEFAULT_GC


def embedded_java_options(extra: str, heap: str | None = None) -> str:
    """The embedded server's driver JVM options: ``extra`` (the user's
    ``spark.driver.extraJavaOptions``) plus ``DEFAULT_GC`` when ``extra`` selects no collector and
    flintlock's log4j2 configuration when it names none.

    With ``heap`` (the ``-Xmx`` that spark-submit gives the server: ``spark.driver.memory``
    as written, e.g. ``"1g"``) the heap is fixed at that size, ``-Xms`` = ``-Xmx``, unless ``extra``
    sets ``-Xms``: Flink's rule for TaskManager JVMs (``ProcessMemoryUtils``). A growing heap
    commits and touches memory for minutes: a streaming job's server grew ~18 MiB/min of RSS over
    the second half of a 10-minute run, against ~1.8 MiB/min with a fixed heap (the JIT's code
    cache; docs/design.md, "Streaming memory over ten minutes")."""
    options = extra.strip()
    if not _GC_FLAG.search(options):
        options = f"{DEFAULT_GC} {options}".strip()
    if heap and not re.search(r"(^|\s)-Xms", options):
        options = f"-Xms{heap} {options}"
    if "log4j2.configurationFile" not in options:
        options = f"{options} {_log4j_options()}"
    return options


def driver_memory(settings: dict[str, str]) -> str:
    """The ``-Xmx`` spark-submit gives a server started with ``settings``: ``spark.driver.memory``,
    else ``$SPARK_DRIVER_MEMORY`` or ``$SPARK_MEM``, else Spark's default ``1g``
    (``SparkSubmitCommandBuilder``, which passes the string to ``-Xmx`` as written)."""
    return (settings.get("spark.driver.memory") or os.environ.get("SPARK_DRIVER_MEMORY")
            or os.environ.get("SPARK_MEM") or "1g")


#: what PySpark's ``_start_connect_server`` adds to a local Connect server's SparkConf (4.3.0)
_CONNECT_SERVER_CONF = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.sql.artifact.isolation.enabled": "true",
    "spark.sql.artifact.isolation.alwaysApplyClassloader": "true",
}


def _server_options(settings: dict[str, str]) -> dict[str, str]:
    """The embedded server's SparkConf entries for ``settings``: an ephemeral loopback gRPC port
    and the driver's JVM options (``embedded_java_options``)."""
    opts = dict(settings)
    opts["spark.connect.grpc.binding.port"] = "0"
    opts["spark.connect.grpc.binding.address"] = "127.0.0.1"
    opts["spark.driver.extraJavaOptions"] = embedded_java_options(
        opts.get("spark.driver.extraJavaOptions", ""), driver_memory(opts))
    return opts


def _launch_server_jvm(master: str, settings: dict[str, str], nice: int = 0) -> None:
    """Launch the embedded server's JVM (PySpark's Py4J gateway) with the spark-submit
    arguments PySpark's ``_start_connect_server`` would give it, so that ``_start_local_server``
    then only creates the SparkContext (and with it the Connect server) in a JVM already up.

    It needs ``pyspark.core`` only (~0.2 s of imports, against ~0.8-1 s for the Connect client
    that ``_start_local_server`` imports), so the JVM boots (~1.5 s) while the rest loads. A
    no-op once the server or a gateway exists. The Connect server's authentication token goes
    into the environment first, as PySpark does (the JVM reads it when the server starts)."""
    with _server_lock:
        from pyspark.conf import SparkConf
        from pyspark.core.context import SparkContext

        if _local_server or SparkContext._gateway is not None:
            return
        opts = _server_options(settings)
        os.environ["SPARK_LOCAL_REMOTE"] = "1"
        os.environ.setdefault("SPARK_CONNECT_AUTHENTICATE_TOKEN",
                              opts.get("spark.connect.authenticate.token", str(uuid.uuid4())))
        conf = SparkConf(loadDefaults=True)  # no JVM yet: entries stay in Python
        conf.setAll([*opts.items(), ("spark.master", master), *_CONNECT_SERVER_CONF.items()])
        with new_session_gateway(nice):
            call_niced(nice, lambda: SparkContext._ensure_initialized(conf=conf))


def _start_local_server(master: str, settings: dict[str, str], nice: int = 0) -> int:
    """Start (once per process) the embedded Connect server ``nice`` (``taskmanager.spark.nice``)
    below this process's CPU priority (``runtime/spark/priority.py``); return its gRPC port."""
    with _server_lock:
        if _local_server:
            if _local_server["master"] != master:
                log.warning(
                    "embedded Spark Connect server already runs on %s; ignoring %s",
                    _local_server["master"], master,
                )
            return int(_local_server["port"])
        from pyspark.sql.connect.session import SparkSession as ConnectSession
        from pyspark.sql.session import SparkSession as ClassicSession

        opts = _server_options(settings)
        os.environ["SPARK_LOCAL_REMOTE"] = "1"
        with new_session_gateway(nice):  # launches the JVM unless _launch_server_jvm did
            call_niced(nice, lambda: ConnectSession._start_connect_server(master, opts))
        classic = ClassicSession._instantiatedSession
        assert classic is not None, "embedded Spark Connect server did not start"
        classic.sparkContext.setLogLevel("ERROR")
        jvm = classic._jvm
        service = getattr(jvm, "org.apache.spark.sql.connect.service.SparkConnectService$")
        port = int(getattr(service, "MODULE$").localPort())
        _local_server.update(master=master, port=port, classic=classic)
        return port


def cancel_jobs_with_connect_tag(session: Any, tag: str, reason: str) -> bool:
    """Cancel the running Spark jobs of ``session``'s operations tagged ``tag`` (``addTag``).

    ``interruptTag`` is one-shot on the server: it interrupts the operation's execution thread
    once (Spark Connect ``ExecuteThreadRunner.interrupt``), and an interrupt that lands while the
    operation is still being planned can be swallowed, leaving its Spark job running with nothing
    left to stop it. Every Spark job of a tagged operation also carries the job tag
    ``ExecuteSessionTag(userId, sessionId, tag)``, so the SparkContext can cancel it directly.
    Only possible with the embedded server of this process (not with ``spark.remote``).

    Returns:
        True when the cancellation was sent to the embedded server's SparkContext, False when
        there is no embedded server in this process (or Py4J failed; logged at debug).
    """
    classic = _local_server.get("classic")
    if classic is None:
        return False
    try:
        classic.sparkContext._jsc.sc().cancelJobsWithTag(connect_job_tag(session, tag), reason)
        return True
    except Exception:
        log.debug("cancelling the Spark jobs tagged %s failed", tag, exc_info=True)
        return False


def connect_job_tag(session: Any, tag: str) -> str:
    """The SparkContext job tag of ``session``'s operations tagged ``tag`` on this process's
    embedded server (Spark Connect ``ExecuteSessionTag(userId, sessionId, tag)``).

    Raises:
        RuntimeError: there is no embedded server in this process.
    """
    classic = _local_server.get("classic")
    if classic is None:
        raise RuntimeError("no embedded Spark Connect server in this process")
    tags = getattr(classic._jvm, "org.apache.spark.sql.connect.service.ExecuteSessionTag$")
    user_id = getattr(session.client, "_user_id", None) or ""
    return str(getattr(tags, "MODULE$").apply(user_id, session.session_id, tag))


def embedded_sql_status_store() -> Any:
    """The SQL status store (``SQLAppStatusStore``: executions, plan graphs, live SQL metrics)
    of this process's embedded server, a Py4J object; None without a server here."""
    classic = _local_server.get("classic")
    return None if classic is None else classic._jsparkSession.sharedState().statusStore()


def embedded_active_job_ids() -> list[int] | None:
    """Ids of the Spark jobs running on this process's embedded server (None: no server here).

    What tests use to show that a cancelled or failed job left no Spark work behind.
    """
    classic = _local_server.get("classic")
    if classic is None:
        return None
    return sorted(int(i) for i in classic.sparkContext.statusTracker().getActiveJobsIds())


def embedded_spark_context() -> Any:
    """The SparkContext of this process's embedded Connect server (None: no server here); what
    ``jvm_status`` reads the server's JVM through."""
    classic = _local_server.get("classic")
    return None if classic is None else classic.sparkContext


def embedded_server_pid() -> int | None:
    """The pid of this process's embedded server's JVM (None: no server here, or its JVM was
    not launched by this process)."""
    if not _local_server:
        return None
    from pyspark.core.context import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    return None if proc is None else int(proc.pid)


def embedded_codegen_compilations() -> int | None:
    """How many classes Spark's code generator (Janino) compiled in this process's embedded
    server so far (Spark's ``CodegenMetrics.compilationTime`` count; None: no server here).

    What shows that a streaming task's epochs reuse the classes compiled for its first epochs:
    each new class also costs JIT compilation and code-cache sweeping in the server's JVM.
    """
    context = embedded_spark_context()
    if context is None:
        return None
    metrics = getattr(context._jvm, "org.apache.spark.metrics.source.CodegenMetrics$")
    return int(getattr(metrics, "MODULE$").METRIC_COMPILATION_TIME().getCount())


def embedded_cancel_all_jobs() -> None:
    """Cancel every Spark job of this process's embedded server (tests: clean up after a leak)."""
    classic = _local_server.get("classic")
    if classic is not None:
        classic.sparkContext.cancelAllJobs()


#: how long a Connect call keeps retrying an unreachable server, about (s)
CONNECT_RETRY_BUDGET_S = 60


def _bounded_retries() -> Any:
    """PySpark's retry policy, bounded to about ``CONNECT_RETRY_BUDGET_S`` instead of its 10+
    minutes: a task whose Spark server is gone fails within a minute and failover takes over
    (Flink fails a task whose resources are lost rather than waiting for them)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    # backoffs 0.05, 0.2, 0.8, 3.2, then 10 s each: ~64 s over 10 retries
    return DefaultPolicy(max_retries=10, max_backoff=10_000,
                         max_server_retry_delay=CONNECT_RETRY_BUDGET_S * 1000)


def _remote_channel(url: str) -> Any:
    """A Connect channel to a remote server that sends only the URL's own ``token``.

    PySpark's channel builder falls back to ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, which starting
    an embedded server sets for the whole process; a remote server would then be asked for TLS
    with the embedded server's token (the handshake fails and the client retries for minutes).
    """
    from pyspark.sql.connect.client.core import DefaultChannelBuilder

    class _RemoteChannelBuilder(DefaultChannelBuilder):
        @property
        def token(self) -> str | None:
            return self._params.get(DefaultChannelBuilder.PARAM_TOKEN)  # type: ignore[no-any-return]

    return _RemoteChannelBuilder(url)


class SparkSessionProvider:
    """Lazily creates and hands out this process's Spark Connect session.

    Args:
        configuration: the TaskManager configuration; ``spark.remote`` and ``spark.*`` are used.
    """

    def __init__(self, configuration: Configuration | None = None) -> None:
        self._configuration = configuration if configuration is not None else Configuration()
        self._lock = threading.Lock()
        self._session: Any = None
        self._master: str | None = None
        self._owned = True
        self._starting: Future[Any] | None = None
        self._start_lock = threading.Lock()
        self._plan: tuple[str, dict[str, str], str | None] | None = None

    @classmethod
    def wrap(cls, session: Any) -> SparkSessionProvider:
        """A provider around an existing session (tests share one); ``stop()`` leaves it alone."""
        provider = cls()
        provider._session = session
        provider._owned = False
        provider._master = "shared"
        return provider

    def start_in_background(self) -> Future[Any]:
        """Begin creating the session in a daemon thread; its future holds the session (or the
        error that ``get()`` raised). ``get()`` afterwards waits for that same session; a second
        call returns the first call's future.

        An embedded server's JVM is launched first (``_launch_server_jvm``: ``pyspark.core``
        is imported here, in the calling thread, ~0.2 s); while it boots (~1.5 s) this thread
        imports the Connect client's modules (~0.8-1 s), which the session needs once the JVM
        is up, and then returns: a TaskManager loads its runtime and starts its RPC service
        meanwhile (imports in two threads would only take turns on the GIL)."""
        with self._start_lock:  # not self._lock: get() holds that while it creates the session
            if self._starting is not None:
                return self._starting
            future: Future[Any] = Future()
            self._starting = future
        _prepare_environment()
        import pyspark.core.context  # (see above)

        def create() -> None:
            try:
                remote, settings, _ = self._server_plan()
                if not remote.startswith("sc://"):
                    _launch_server_jvm(remote, settings, self._configuration.get(TM_SPARK_NICE))
                future.set_result(self.get())
            except BaseException as exc:  # the caller sees it when it waits for the session
                future.set_exception(exc)

        threading.Thread(target=create, name="spark-session-start", daemon=True).start()
        import pyspark.sql.connect.session  # noqa: F401 (see above)

        return future

    def get(self) -> Any:
        """The ``pyspark.sql.connect.session.SparkSession`` (created on first call, ~5 s)."""
        session = self._session
        if session is not None:
            return session
        with self._lock:
            if self._session is None:
                self._session = self._create()
            return self._session

    def _server_plan(self) -> tuple[str, dict[str, str], str | None]:
        """``(remote, settings, archive_dir)``, worked out once: ``spark.remote`` or the
        embedded server's master; the ``spark.*`` settings (for an embedded server with the
        class-data-sharing archive and the fast local file system); the archive directory
        when the archive is still to be built."""
        with self._start_lock:
            if self._plan is None:
                remote = self._remote()
                settings = default_spark_settings(self._cores())
                settings.update(self._configuration.spark_settings())
                archive_dir = None
                if not remote.startswith("sc://"):
                    archive_dir = self._with_class_data_sharing(settings)
                    self._with_fast_local_filesystem(settings)
                self._plan = (remote, settings, archive_dir)
            return self._plan

    def _create(self) -> Any:
        _prepare_environment()
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        remote, settings, archive_dir = self._server_plan()
        runtime: dict[str, str | int | bool]  # the runtime confs (RuntimeConf._set_all's type)
        if str(remote).startswith("sc://"):
            url = str(remote)
            runtime = {k: v for k, v in settings.items() if k not in _STATIC_DEFAULTS}
        else:
            port = _start_local_server(str(remote), settings,
                                       self._configuration.get(TM_SPARK_NICE))
            if archive_dir is not None:  # no archive yet: the next server of this host has one
                from flintlock.runtime.spark.class_data_sharing import start_background_build

                start_background_build(archive_dir, embedded_java_options(
                    settings.get("spark.driver.extraJavaOptions", "")))
            url = f"sc://localhost:{port}"
            runtime = {k: v for k, v in settings.items() if k.startswith("spark.sql.")}
        self._master = hide_credentials(str(remote))  # shown by REST: no Connect token
        if str(remote).startswith("sc://"):
            session = ConnectSession.builder.channelBuilder(_remote_channel(url)).create()
        else:
            session = ConnectSession.builder.remote(url).create()
        session.client.set_retry_policies([_bounded_retries()])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            session.conf._set_all(configs=runtime, silent=True)
        _providers.add(self)
        _register_atexit()
        log.info("Spark Connect session %s on %s", session.session_id, hide_credentials(url))
        return session

    def _with_class_data_sharing(self, settings: dict[str, str]) -> str | None:
        """Add the class-data-sharing archive to the embedded server's JVM options
        (``class_data_sharing``, ``taskmanager.spark.class-data-sharing``); returns the archive
        directory when the archive is missing (so that one is built), else None."""
        if not self._configuration.get(TM_SPARK_CLASS_DATA_SHARING):
            return None
        from flintlock.runtime.spark.class_data_sharing import archive_options, default_directory

        directory = (self._configuration.get(TM_SPARK_CLASS_DATA_SHARING_DIR)
                     or str(default_directory()))
        extra = settings.get("spark.driver.extraJavaOptions", "")
        if any(flag in extra for flag in _USER_CDS_FLAGS):  # the user's own archive settings
            return None
        try:
            sharing = archive_options(directory, embedded_java_options(extra))
        except OSError as exc:  # an unreadable Spark install or JVM: start without one
            log.info("no class-data-sharing archive for the Spark server: %s", exc)
            return None
        if not sharing:
            return directory
        settings["spark.driver.extraJavaOptions"] = f"{extra} {sharing}".strip()
        return None

    def _with_fast_local_filesystem(self, settings: dict[str, str]) -> None:
        """Make ``NioLocalFileSystem`` the embedded server's ``file:`` file system
        (``local_filesystem``, ``taskmanager.spark.fast-local-filesystem``) unless the user
        configured one or no jar can be built."""
        if (not self._configuration.get(TM_SPARK_FAST_LOCAL_FILESYSTEM)
                or "spark.hadoop.fs.file.impl" in settings):
            return
        from flintlock.runtime.spark import local_filesystem
        from flintlock.runtime.spark.class_data_sharing import default_directory

        jar = local_filesystem.ensure_jar(self._configuration.get(TM_SPARK_CLASS_DATA_SHARING_DIR)
                                          or str(default_directory()))
        if jar is not None:
            local_filesystem.add_to_server_class_path(jar)
            settings["spark.hadoop.fs.file.impl"] = local_filesystem.FILE_SYSTEM_CLASS

    def _cores(self) -> int:
        return int(self._configuration.get(TM_CPU_CORES) or os.cpu_count() or 1)

    def _remote(self) -> str:
        """``spark.remote``, else the embedded server's master ``local[<cores>]``."""
        return str(self._configuration.get_raw("spark.remote") or f"local[{self._cores()}]")

    def server_info(self) -> dict[str, str]:
        """``{"master": ..., "server": ...}`` without starting the session: the master it runs
        (or will run) on, and for an embedded server its name (``<host>:<pid>``: one per
        process), so that TaskManagers sharing it (the MiniCluster's) count it once
        (``ResourceOverview.spark_servers``)."""
        master = self._master or hide_credentials(self._remote())
        if not master.startswith("local"):
            return {"master": master}
        return {"master": master, "server": f"{socket.gethostname()}:{os.getpid()}"}

    def describe(self) -> dict[str, str]:
        """``{"master": ..., "version": ...}`` (starts the session if needed)."""
        session = self.get()
        return {"master": self._master or "", "version": str(session.version)}

    def stop(self) -> None:
        """Close the Connect session (the embedded server stays up for the process)."""
        with self._lock:
            session, self._session = self._session, None
        if session is not None and self._owned:
            try:
                session.client.close()
            except Exception:  # pragma: no cover - best effort
                log.debug("closing Spark Connect session failed", exc_info=True)
