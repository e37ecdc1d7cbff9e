"""ConfigOption registry: Flink's configuration keys, defaults and types (fact sheet).

Every key flintlock understands is declared here once, with its Flink default and a validator;
``Configuration`` (``flintlock.config.configuration``) rejects unknown keys and bad values by name.
Durations are given as Flink writes them (``"10 s"``, ``"500ms"``, ``"1 min"``) and read in
seconds; memory sizes (``"64m"``) in bytes. ``spark.*`` keys pass through to the TaskManagers'
Spark sessions unvalidated.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["ConfigOption", "OPTIONS", "parse_duration_s", "parse_memory_bytes", "option"]

T = TypeVar("T")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")
_DURATION_UNITS = {
    "": 1e-3, "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "m": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_MEMORY = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
_MEMORY_UNITS = {
    "": 1, "b": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
    "gibibytes": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
}


def parse_duration_s(value: Any) -> float:
    """Flink duration text -> seconds. A bare number means milliseconds (as in Flink)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 1000.0
    m = _DURATION.match(str(value).lower())
    if not m or m.group(2) not in _DURATION_UNITS:
        raise ValueError(f"{value!r} is not a duration (examples: '500 ms', '10 s', '1 min')")
    return float(m.group(1)) * _DURATION_UNITS[m.group(2)]


def parse_memory_bytes(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _MEMORY.match(str(value).lower())
    if not m or m.group(2) not in _MEMORY_UNITS:
        raise ValueError(f"{value!r} is not a memory size (examples: '64m', '1g', '1024')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2)]


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not re.fullmatch(r"-?\d+", text):
        raise ValueError(f"{value!r} is not an integer")
    return int(text)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number") from None


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"{value!r} is not a boolean (true/false)")


def _str(value: Any) -> str:
    return str(value)


def _enum(*allowed: str) -> Callable[[Any], str]:
    lowered = {a.lower(): a for a in allowed}

    def parse(value: Any) -> str:
        text = str(value).strip()
        if text.lower() not in lowered:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
        return lowered[text.lower()]

    return parse


def _at_least(parse: Callable[[Any], Any], low: float) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        v = parse(value)
        if v < low:
            raise ValueError(f"{value!r} is below the minimum {low:g}")
        return v

    return check


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One configuration key: its Flink name, default, parser and description.

    Attributes:
        key: Flink's key (``"taskmanager.numberOfTaskSlots"``).
        default: the typed default (``None`` = no default).
        parse: text or value -> typed value; raises ``ValueError`` with the reason.
        description: one line for docs and errors.
        deprecated_keys: old keys still accepted.
    """

    key: str
    default: T | None
    parse: Callable[[Any], T]
    description: str
    deprecated_keys: tuple[str, ...] = field(default=())


OPTIONS: dict[str, ConfigOption[Any]] = {}


def option(key: str, default: Any, parse: Callable[[Any], Any], description: str,
           deprecated_keys: tuple[str, ...] = ()) -> ConfigOption[Any]:
    opt = ConfigOption(key, default, parse, description, deprecated_keys)
    OPTIONS[key] = opt
    return opt


duration = parse_duration_s
pos_int = _at_least(_int, 1)
nonneg_int = _at_least(_int, 0)

# ---- core / pipeline (CoreOptions, PipelineOptions, ExecutionOptions) ---------------------------
PARALLELISM_DEFAULT = option("parallelism.default", 1, pos_int, "Default parallelism of operators.")
MAX_PARALLELISM = option("pipeline.max-parallelism", -1, _int,
                         "Max parallelism (number of key groups); -1 derives it from parallelism.")
OPERATOR_CHAINING = option("pipeline.operator-chaining.enabled", True, _bool,
                           "Chain operators into one task where Flink's rules allow.",
                           ("pipeline.operator-chaining",))
PIPELINE_NAME = option("pipeline.name", None, _str, "The job name.")
RUNTIME_MODE = option("execution.runtime-mode", "AUTOMATIC",
                      _enum("STREAMING", "BATCH", "AUTOMATIC"),
                      "STREAMING, BATCH or AUTOMATIC (BATCH when all sources are bounded, else "
                      "STREAMING).")
EXECUTION_TARGET = option(
    "execution.target", "local", _enum("local", "remote", "per-job", "embedded"),
    "Where execute() runs jobs: an in-process MiniCluster (local), a session cluster (remote), a "
    "JobManager started for each job (per-job), or the application cluster whose JobManager runs "
    "the program (embedded; set by `flintlock run --target application`).")
SHUTDOWN_ON_APPLICATION_FINISH = option(
    "execution.shutdown-on-application-finish", True, _bool,
    "An application cluster shuts down once the program's main() returned and its jobs ended.")
EXECUTION_ATTACHED = option("execution.attached", True, _bool, "Wait for the job's result.")

# ---- JobManager -------------------------------------------------------------------------------------
JM_RPC_ADDRESS = option("jobmanager.rpc.address", "localhost", _str, "JobManager RPC host.")
JM_RPC_PORT = option("jobmanager.rpc.port", 6123, nonneg_int, "JobManager RPC port.")
JM_BIND_HOST = option("jobmanager.bind-host", "127.0.0.1", _str, "Interface the JobManager binds.")
FAILOVER_STRATEGY = option("jobmanager.execution.failover-strategy", "region",
                           _enum("region", "full"), "Which tasks restart after a task failure.")
SCHEDULER = option("jobmanager.scheduler", None, _enum("Default", "Adaptive", "AdaptiveBatch"),
                   "Scheduler type; unset: AdaptiveBatch for BATCH jobs (parallelism decided "
                   "from the data), Default for STREAMING jobs.")
ATTEMPTS_HISTORY = option("jobmanager.execution.attempts-history-size", 16, pos_int,
                          "Prior attempts kept per subtask.")
PARTITION_RELEASE = option("jobmanager.partition.release-during-job-execution", True, _bool,
                           "Release result partitions once all consumers finished.")
RESTART_STRATEGY = option("restart-strategy.type", None,
                          _enum("none", "off", "disable", "fixed-delay", "fixeddelay",
                                "failure-rate", "failurerate", "exponential-delay",
                                "exponentialdelay"),
                          "Restart strategy; unset means no restarts (no checkpointing).",
                          ("restart-strategy",))
FIXED_DELAY_ATTEMPTS = option("restart-strategy.fixed-delay.attempts", 1, nonneg_int,
                              "Restarts allowed by fixed-delay.")
FIXED_DELAY_DELAY = option("restart-strategy.fixed-delay.delay", 1.0, duration,
                           "Delay between fixed-delay restarts.")
FR_MAX = option("restart-strategy.failure-rate.max-failures-per-interval", 1, pos_int,
                "Failures allowed per interval.")
FR_INTERVAL = option("restart-strategy.failure-rate.failure-rate-interval", 60.0, duration,
                     "Failure-rate measuring interval.")
FR_DELAY = option("restart-strategy.failure-rate.delay", 1.0, duration, "Failure-rate restart delay.")
EXP_INITIAL = option("restart-strategy.exponential-delay.initial-backoff", 1.0, duration,
                     "First back-off.")
EXP_MAX = option("restart-strategy.exponential-delay.max-backoff", 60.0, duration, "Largest back-off.")
EXP_MULT = option("restart-strategy.exponential-delay.backoff-multiplier", 1.5, _float,
                  "Back-off growth factor.")
EXP_RESET = option("restart-strategy.exponential-delay.reset-backoff-threshold", 3600.0, duration,
                   "Quiet time after which the back-off resets.")
EXP_JITTER = option("restart-strategy.exponential-delay.jitter-factor", 0.1, _float,
                    "Random jitter as a fraction of the back-off.")
EXP_ATTEMPTS = option("restart-strategy.exponential-delay.attempts-before-reset-backoff",
                      2**31 - 1, pos_int, "Restarts allowed before a reset.")

# ---- slots and heartbeats ------------------------------------------------------------------------
HEARTBEAT_INTERVAL = option("heartbeat.interval", 10.0, duration, "Heartbeat request interval.")
HEARTBEAT_TIMEOUT = option("heartbeat.timeout", 50.0, duration,
                           "A peer silent this long is considered lost.")
HEARTBEAT_RPC_FAILURE_THRESHOLD = option(
    "heartbeat.rpc-failure-threshold", 2, int,
    "Consecutive heartbeat RPCs that found the target unreachable (connection refused or "
    "reset) until it is marked lost, before heartbeat.timeout; -1 disables this.")
SLOT_REQUEST_TIMEOUT = option("slot.request.timeout", 300.0, duration,
                              "Pending slot requests fail after this long.")
SLOT_IDLE_TIMEOUT = option("slot.idle.timeout", 50.0, duration,
                           "Idle slots are returned to their TaskManager after this long.")
SLOT_REQUEST_MAX_INTERVAL = option(
    "slot.request.max-interval", 0.02, duration,
    "Slots offered while requests wait are matched once they serve every waiting request, or "
    "this long after the first of them arrived, so that a job's subtasks spread evenly over the "
    "TaskManagers its slots come from (Flink's DeclarativeSlotPoolBridge batch matching); 0 "
    "matches each offer at once.")
TASK_SLOTS = option("taskmanager.numberOfTaskSlots", 1, pos_int, "Slots per TaskManager.")
FAULT_TASK_SLOWDOWN = option(
    "$internal.fault.task-slowdown", 1.0, _at_least(_float, 1.0),
    "Injected fault (tests and benchmarks): every task of this TaskManager takes this many times "
    "as long as its work (it waits (factor - 1) x its run time before it reports FINISHED; a "
    "cancel ends the wait). 1: no fault.")
FAULT_TASK_SLOWDOWN_MODE = option(
    "$internal.fault.task-slowdown.mode", "wait", _enum("wait", "throttle"),
    "How a TaskManager made slow on purpose is slow. wait: each task waits (factor - 1) x its "
    "run time after its work, its Spark work itself at full speed. throttle: the TaskManager's "
    "embedded Spark server (its JVM and Python workers) runs 1/factor of the time, stopped "
    "(SIGSTOP) for the rest of every 100 ms, as on a node with factor times slower CPUs "
    "(runtime/spark/throttle.py).")
TASK_METRICS_REPORT_INTERVAL = option(
    "metrics.task.report-interval", 1.0, duration,
    "How often a TaskManager sends the live metrics of its running streaming subtasks (records, "
    "busy / back-pressured / idle time per second, watermarks) to their JobMasters (flintlock; "
    "Flink fetches them with metrics.fetcher.update-interval).")
METRIC_FETCHER_UPDATE_INTERVAL = option(
    "metrics.fetcher.update-interval", 10.0, duration,
    "How old the TaskManager metrics REST and the web UI show may be: each TaskManager is asked "
    "at most once per interval, whatever the number of requests (Flink's MetricFetcher). 0: "
    "asked on every request (Flink's 0 turns the fetcher off).")
LOCAL_TASKMANAGERS = option("local.number-taskmanager", 1, pos_int,
                            "TaskManagers of a local (MiniCluster) run.",
                            ("minicluster.number-of-taskmanagers",))
TM_CPU_CORES = option(
    "taskmanager.cpu.cores", None, pos_int,
    "CPU cores of a TaskManager: its embedded Spark server runs local[<cores>] and its subtasks "
    "use that many Spark partitions. Default: this machine's cores; `flintlock cluster start` "
    "gives each of its N TaskManagers cores/N, so they do not oversubscribe the host.")
TM_SPARK_WARM_UP = option(
    "taskmanager.spark.warm-up", True, _bool,
    "Run one small plan on a TaskManager's fresh Spark server in the background once it has "
    "registered, so the first job does not pay for class loading and code generation "
    "(flintlock's own key). TaskManagers an active ResourceManager starts default to false: a "
    "job already waits for their slots, and the plan would compete with its first tasks.")


TM_SPARK_CLASS_DATA_SHARING = option(
    "taskmanager.spark.class-data-sharing", True, _bool,
    "Start the embedded Spark server's JVM with a class-data-sharing archive of Spark's classes "
    "(JDK dynamic AppCDS; built once per machine and Spark install, in the background when "
    "missing): the server starts ~2.5 s sooner and its first queries run up to 2x faster "
    "(flintlock's own key).")
TM_SPARK_FAST_LOCAL_FILESYSTEM = option(
    "taskmanager.spark.fast-local-filesystem", True, _bool,
    "Give the embedded Spark server a local file system that sets file permissions through "
    "java.nio instead of forking chmod for every file and directory it writes (Hadoop's without "
    "its native library); compiled once per machine with the JDK's javac, skipped without one. "
    "A configured spark.hadoop.fs.file.impl wins (flintlock's own key).")
TM_SPARK_CLASS_DATA_SHARING_DIR = option(
    "taskmanager.spark.class-data-sharing.dir", None, _str,
    "Where the class-data-sharing archives live. Default: $XDG_CACHE_HOME/flintlock/jvm, else "
    "~/.cache/flintlock/jvm (flintlock's own key).")


def _nice(value: Any) -> int:
    nice = _int(value)
    if not 0 <= nice <= 19:
        raise ValueError(f"{value!r} is not a nice value between 0 and 19")
    return nice


TM_SPARK_NICE = option(
    "taskmanager.spark.nice", 10, _nice,
    "Scheduling niceness (0-19, Linux nice) of the TaskManager's embedded Spark server and the "
    "Python workers it starts; its own RPC and heartbeats keep the process's (flintlock's own "
    "key). On a busy host the data plane then yields the CPU to every flintlock process's "
    "control plane, so heartbeats stay on time; 0 runs Spark at the TaskManager's priority.")
TM_HOST = option("taskmanager.host", "127.0.0.1", _str, "Host the TaskManager binds and advertises.")
TM_RPC_PORT = option("taskmanager.rpc.port", 0, nonneg_int, "TaskManager RPC port (0 = any).")
REGISTRATION_TIMEOUT = option("taskmanager.registration.timeout", 300.0, duration,
                              "A TaskManager gives up registering after this long.")
CANCELLATION_TIMEOUT = option("task.cancellation.timeout", 180.0, duration,
                              "A task that does not stop after cancel within this long is fatal.")
RPC_ASK_TIMEOUT = option("rpc.ask-timeout", 10.0, duration, "Timeout of RPC calls.",
                         ("pekko.ask.timeout", "akka.ask.timeout"))


def _framesize(value: Any) -> int:
    size = parse_memory_bytes(value)
    if not 1024 <= size <= 2**31 - 1 - 1024:  # gRPC's message limits are int32
        raise ValueError(f"{value!r} is not between 1k and 2 GiB - 1025 bytes")
    return size


RPC_FRAMESIZE = option(
    "rpc.framesize", 256 * 1024 * 1024, _framesize,
    "The largest RPC message in bytes (Flink's pekko.framesize): a request or reply body between "
    "JobManager, TaskManagers and clients that is larger fails with a CodecError. Default 256m, "
    "since JobGraphs carry the user's code (Flink's default is 10 MiB). Only callers that proved "
    "the cluster secret in the call's metadata can make a process read a body at all.",
    ("pekko.framesize", "akka.framesize"))

# ---- shuffle / data plane ----------------------------------------------------------------------
SHUFFLE_DIR = option("shuffle.storage-dir", None, _str,
                     "Where result partitions are written (default: a temp dir per TaskManager). "
                     "Unset: partitions are TM-local and lost with their TaskManager (the "
                     "producers re-run); set: treated as shared storage (NFS path, s3a://, "
                     "hdfs://) whose partitions survive the loss of the TaskManager.")
BUFFERS_PER_CHANNEL = option(
    "taskmanager.network.memory.buffers-per-channel", 2, nonneg_int,
    "Credits per PIPELINED partition a producer may always use ahead of its slowest consumer, "
    "counted in segments (Flink counts network buffers).")
FLOATING_BUFFERS_PER_GATE = option(
    "taskmanager.network.memory.floating-buffers-per-gate", 8, nonneg_int,
    "Extra segments a PIPELINED partition may hold unconsumed (added to buffers-per-channel), "
    "each granted only while every consumer has less than (buffers-per-channel + "
    "floating-buffers-per-gate) x taskmanager.memory.segment-size bytes of it unconsumed.")
SEGMENT_SIZE = option(
    "taskmanager.memory.segment-size", 32 * 1024, _at_least(parse_memory_bytes, 4096),
    "The size of a network buffer (bytes; Flink's memory segment, default 32 KiB, at least "
    "4 KiB): with the buffer counts above it bounds the bytes a PIPELINED partition holds "
    "unconsumed beyond its exclusive segments.")
ARROW_SEGMENT_THRESHOLD = option(
    "taskmanager.network.pipelined.arrow-segment-threshold", 2**20, parse_memory_bytes,
    "A streaming epoch whose input is estimated below this size (bytes) exchanges its output as "
    "Arrow IPC segments through the TaskManager (one Spark collect, no Spark write job); larger "
    "or unknown inputs write Parquet segments with Spark. 0: always Parquet.")
ARROW_PARTITION_THRESHOLD = option(
    "taskmanager.network.blocking.arrow-partition-threshold", 2**20, parse_memory_bytes,
    "A batch subtask whose input is estimated below this size (bytes) writes its BLOCKING result "
    "partitions as Arrow IPC files through the TaskManager (one Spark collect, no Spark write "
    "job, no listing by the consumers); larger or unknown inputs write Parquet with Spark. 0: "
    "always Parquet.")
BUFFER_TIMEOUT = option(
    "execution.buffer-timeout", 0.1, duration,
    "Least time between two epochs of a rate-limited streaming source (Flink's flush interval).")
# ---- checkpointing (issue 12; Flink CheckpointingOptions, ExecutionCheckpointingOptions) ---------
CHECKPOINTING_INTERVAL = option(
    "execution.checkpointing.interval", None, duration,
    "Interval of periodic checkpoints of a STREAMING job; unset: checkpointing is off.")
CHECKPOINTING_MODE = option(
    "execution.checkpointing.mode", "EXACTLY_ONCE", _enum("EXACTLY_ONCE", "AT_LEAST_ONCE"),
    "EXACTLY_ONCE aligns barriers (a channel that delivered barrier n waits until every channel "
    "has); AT_LEAST_ONCE does not wait, so a restore may replay records into state twice.")
CHECKPOINTING_TIMEOUT = option(
    "execution.checkpointing.timeout", 600.0, duration,
    "A checkpoint not completed this long after it was triggered is aborted (expired).")
CHECKPOINTING_MIN_PAUSE = option(
    "execution.checkpointing.min-pause", 0.0, duration,
    "Least time between the end of one checkpoint and the trigger of the next.")
CHECKPOINTING_MAX_CONCURRENT = option(
    "execution.checkpointing.max-concurrent-checkpoints", 1, pos_int,
    "Checkpoints that may be pending at once.")
CHECKPOINTING_TOLERABLE_FAILURES = option(
    "execution.checkpointing.tolerable-failed-checkpoints", 0, nonneg_int,
    "Consecutive checkpoint failures tolerated; one more fails the job (a restart by its restart "
    "strategy).")
CHECKPOINTS_DIR = option(
    "state.checkpoints.dir", None, _str,
    "Where completed checkpoints are stored (<dir>/<job id>/chk-<n>/_metadata and the state "
    "files); default: a directory of the JobManager process, deleted when the job ends.",
    ("execution.checkpointing.dir",))
CHECKPOINTS_RETAINED = option(
    "state.checkpoints.num-retained", 1, pos_int,
    "Completed checkpoints kept; older ones are deleted when a newer one completes.",
    ("execution.checkpointing.num-retained",))
CHECKPOINTS_RETENTION = option(
    "execution.checkpointing.externalized-checkpoint-retention", "NO_EXTERNALIZED_CHECKPOINTS",
    _enum("DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION", "NO_EXTERNALIZED_CHECKPOINTS"),
    "Whether the retained checkpoints outlive the job: RETAIN_ON_CANCELLATION keeps them when "
    "the job is cancelled or fails; otherwise they are deleted when the job ends.")
SAVEPOINTS_DIR = option("state.savepoints.dir", None, _str,
                        "Default directory of savepoints.", ("execution.checkpointing.savepoint-dir",))
SAVEPOINT_PATH = option(
    "execution.savepoint.path", None, _str,
    "Start the job from this savepoint or retained checkpoint (its directory or _metadata file); "
    "operator state is matched by operator uid (`flintlock run -s`).")
SAVEPOINT_IGNORE_UNCLAIMED = option(
    "execution.savepoint.ignore-unclaimed-state", False, _bool,
    "Allow a savepoint whose state belongs to operators the program no longer has (`flintlock run "
    "--allow-non-restored-state`); that state is dropped.")

SPARK_REMOTE = option("spark.remote", None, _str,
                      "Spark Connect URL (sc://host:15002); default: an embedded local[cores] server.")

# ---- high availability (issue 13; Flink HighAvailabilityOptions, JobResultStoreOptions) ----------
HA_TYPE = option(
    "high-availability.type", "NONE", _enum("NONE", "ZOOKEEPER", "FILE"),
    "NONE; ZOOKEEPER (leader election and the job stores' pointers in ZooKeeper, data in "
    "high-availability.storageDir); FILE (one host: a lock file and the stores under "
    "high-availability.storageDir, for laptops and tests).",
    ("high-availability", "recovery.mode"))
HA_STORAGE_DIR = option(
    "high-availability.storageDir", None, _str,
    "Where submitted JobGraphs, the leader's address (FILE) and job results are kept; required "
    "with high availability. Every JobManager of the cluster must see the same directory.",
    ("high-availability.zookeeper.storageDir",))
HA_CLUSTER_ID = option(
    "high-availability.cluster-id", "/default", _str,
    "Separates clusters sharing one ZooKeeper ensemble or storage directory.")
HA_ZK_QUORUM = option("high-availability.zookeeper.quorum", None, _str,
                      "host:port[,host:port...] of the ZooKeeper ensemble.")
HA_ZK_ROOT = option("high-availability.zookeeper.path.root", "/flink", _str,
                    "ZooKeeper root node under which each cluster-id keeps its nodes.")
HA_ZK_SESSION_TIMEOUT = option(
    "high-availability.zookeeper.client.session-timeout", 60.0, duration,
    "ZooKeeper session timeout (a bare number is ms): a leader whose session expired loses "
    "leadership.")
HA_ZK_CONNECTION_TIMEOUT = option(
    "high-availability.zookeeper.client.connection-timeout", 15.0, duration,
    "How long to wait for a ZooKeeper connection (a bare number is ms).")
HA_ZK_RETRY_WAIT = option("high-availability.zookeeper.client.retry-wait", 5.0, duration,
                          "Pause between ZooKeeper connection attempts (a bare number is ms).")
HA_ZK_MAX_RETRIES = option("high-availability.zookeeper.client.max-retry-attempts", 3, pos_int,
                           "ZooKeeper connection attempts before giving up.")
JOB_RESULT_STORE_PATH = option(
    "job-result-store.storage-path", None, _str,
    "Where job results are stored (default: <high-availability.storageDir>/job-result-store/"
    "<cluster-id>).")
BATCH_JOB_RECOVERY = option(
    "execution.batch.job-recovery.enabled", False, _bool,
    "With high availability, record each finished subtask of a BATCH job (its result "
    "partitions and sink output) in the HA storage, so a new leader keeps the subtasks whose "
    "outputs are still there and runs only the rest (Flink 1.20's batch job recovery, "
    "FLIP-383). Needs shuffle.storage-dir on storage every TaskManager reaches: partitions on a "
    "TaskManager's own disk are produced again.")
JOB_RESULT_STORE_DELETE_ON_COMMIT = option(
    "job-result-store.delete-on-commit", False, _bool,
    "Delete a job's result entry once its cleanup finished, instead of keeping it as "
    "<job id>.json. Flink deletes by default; flintlock keeps them, because a new leader lists "
    "the jobs that finished under the previous one from these entries.")

# ---- REST / client -----------------------------------------------------------------------------------
REST_ADDRESS = option("rest.address", "localhost", _str, "Where clients find the REST server.")
REST_PORT = option("rest.port", 8081, nonneg_int, "REST port.", ("web.port",))
REST_BIND_ADDRESS = option("rest.bind-address", "127.0.0.1", _str, "Interface REST binds.")
CLIENT_TIMEOUT = option("client.timeout", 60.0, duration, "Client request timeout.")
WEB_REFRESH = option("web.refresh-interval", 3.0, duration, "Web UI refresh interval.")


def _host_list(value: Any) -> tuple[str, ...]:
    """Host names, comma separated (``"flink.example.com, jm-1"``), lower-cased; ``*``: any."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    hosts = tuple(str(h).strip().lower() for h in items if str(h).strip())
    for host in hosts:
        if host != "*" and not re.fullmatch(r"[a-z0-9._\-:\[\]]+", host):
            raise ValueError(f"{host!r} is not a host name (examples: 'flink.example.com', '*')")
    return hosts


REST_ALLOWED_HOSTS = option(
    "rest.server.allowed-hosts", (), _host_list,
    "Extra names the REST server answers to in the Host header, comma separated (flintlock's own "
    "key). Always allowed: IP addresses, localhost, rest.address and this host's name. Requests "
    "naming any other host get 400, which stops DNS-rebinding attacks from web pages; '*' "
    "turns the check off (e.g. behind a reverse proxy that rewrites Host).")

# ---- security ------------------------------------------------------------------------------------
CLUSTER_SECRET = option(
    "security.cluster.secret", None, _str,
    "Shared secret that authenticates RPC peers and job submissions (flintlock's own key). "
    "Nothing is unpickled from a peer that did not present it. `flintlock cluster start` generates "
    "one when unset.")
REST_SERVER_MAX_CONTENT = option("rest.server.max-content-length", 104_857_600, parse_memory_bytes,
                                 "Largest REST request body the server accepts (bytes).")
REST_CLIENT_MAX_CONTENT = option("rest.client.max-content-length", 104_857_600, parse_memory_bytes,
                                 "Largest REST response body the client accepts (bytes).")
# REST server connection limits (issue 16; flintlock's own keys: Flink's Netty server has none)
REST_SERVER_HEADER_TIMEOUT = option(
    "rest.server.header-timeout", 10.0, _at_least(duration, 1e-3),
    "Time a REST connection has to send a complete request head (request line and headers), "
    "from when it opens or, on a kept-alive connection, from the first byte of the next request; "
    "the connection is closed when it runs out (flintlock's own key).")
REST_SERVER_IDLE_TIMEOUT = option(
    "rest.server.idle-timeout", 5.0, _at_least(duration, 1e-3),
    "Time a kept-alive REST connection may wait for its next request before it is closed "
    "(rounded up to whole seconds; flintlock's own key).")
REST_SERVER_MAX_CONNECTIONS = option(
    "rest.server.max-connections", 256, pos_int,
    "REST connections served at once: a request that arrives while more connections than this "
    "are open (its own included), or more requests than this are in flight, is answered 503 "
    "Service Unavailable (flintlock's own key).")
WEB_SUBMIT = option("web.submit.enable", True, _bool, "Allow job submission from the web UI.")
WEB_FLINK_DASHBOARD = option(
    "web.flink-dashboard.path", None, _str,
    "Apache Flink's own web dashboard, served by the JobManager at /flink/ next to flintlock's at "
    "/ (flintlock's own key): a flink-dist jar (its web/ folder), a FLINK_HOME (lib/flink-dist-*.jar) "
    "or a directory holding the dashboard's index.html. Unset: not served.")
CLUSTER_STATE_DIR = option(
    "cluster.state-dir", None, _str,
    "Directory of a standalone cluster's pid files, logs and port files "
    "(default: ~/.flintlock/cluster).")

# ---- TLS (Flink SecurityOptions; PEM files instead of Java keystores) -----------------------------
SSL_INTERNAL_ENABLED = option(
    "security.ssl.internal.enabled", False, _bool,
    "TLS with mutual authentication for the RPC connections between JobManagers and "
    "TaskManagers (gRPC).")
SSL_REST_ENABLED = option(
    "security.ssl.rest.enabled", False, _bool,
    "TLS (https) for the REST API and web UI; clients then connect with https.")
SSL_REST_AUTHENTICATION = option(
    "security.ssl.rest.authentication-enabled", False, _bool,
    "Mutual TLS for REST: clients must present a certificate the REST truststore trusts.")
SSL_INTERNAL_KEYSTORE = option(
    "security.ssl.internal.keystore", None, _str,
    "PEM file with this process's certificate chain and private key for RPC TLS (Flink: a Java "
    "keystore).")
SSL_INTERNAL_KEY_PASSWORD = option(
    "security.ssl.internal.key-password", None, _str,
    "Password of the internal keystore's private key when it is encrypted.",
    ("security.ssl.internal.keystore-password",))
SSL_INTERNAL_TRUSTSTORE = option(
    "security.ssl.internal.truststore", None, _str,
    "PEM file with the CA certificates RPC peers' certificates must chain to.")
SSL_REST_KEYSTORE = option(
    "security.ssl.rest.keystore", None, _str,
    "PEM file with the REST server's certificate chain and private key (clients with "
    "authentication-enabled: the client certificate).")
SSL_REST_KEY_PASSWORD = option(
    "security.ssl.rest.key-password", None, _str,
    "Password of the REST keystore's private key when it is encrypted.",
    ("security.ssl.rest.keystore-password",))
SSL_REST_TRUSTSTORE = option(
    "security.ssl.rest.truststore", None, _str,
    "PEM file with the CA certificates clients trust for the REST server (unset: the system's "
    "CAs); with authentication-enabled, also the CAs client certificates must chain to.")

# ---- failure recovery (issue 4: exception history) ---------------------------------------------
WEB_EXCEPTION_HISTORY_SIZE = option(
    "web.exception-history-size", 16, pos_int,
    "Failures (root entries with their concurrent failures) kept per job in the exception "
    "history that GET /jobs/:jobid/exceptions shows.")

# ---- logs, metrics and web submission (issue 5: REST, logs and metrics) -------------------------


def _port_range(value: Any) -> str:
    """A port (``9249``) or an inclusive range (``9249-9260``), as Flink's reporter ports."""
    text = str(value).strip()
    m = re.fullmatch(r"(\d{1,5})(?:\s*-\s*(\d{1,5}))?", text)
    low = int(m.group(1)) if m else -1
    high = int(m.group(2)) if m and m.group(2) else low
    if not m or not 0 <= low <= high <= 65535:
        raise ValueError(f"{value!r} is not a port or a port range (examples: '9249', '9249-9260')")
    return f"{low}-{high}" if high != low else str(low)


LOG_DIR = option(
    "env.log.dir", None, _str,
    "Directory of the process log files and of the TaskManagers' per-attempt task logs (default: "
    "a temporary directory per process, removed when the process stops).")
WEB_UPLOAD_DIR = option(
    "web.upload.dir", None, _str,
    "Directory of the programs uploaded with POST /jars/upload (default: a temporary directory "
    "removed when the JobManager stops).")
PROM_PORT = option(
    "metrics.reporter.prom.port", None, _port_range,
    "Port or port range (9249-9260) of this process's Prometheus endpoint (/metrics); the first "
    "free port is used. Unset: no Prometheus endpoint.")
PROM_HOST = option(
    "metrics.reporter.prom.host", "127.0.0.1", _str,
    "Interface the Prometheus endpoint binds (flintlock's own key; Flink binds all interfaces).")

LOOP_LAG_TICK = option(
    "metrics.event-loop.tick-interval", 0.05, duration,
    "How often each process probes its asyncio loop for lag (Status.Python.EventLoop.* metrics; "
    "flintlock's own key, after dask's distributed.admin.tick.interval).")
LOOP_LAG_WARN = option(
    "metrics.event-loop.warn-threshold", 1.0, duration,
    "A loop that has not run for this long is logged as unresponsive, with the stack of its "
    "thread (flintlock's own key, after dask's distributed.admin.tick.limit).")

IO_POOL_SIZE = option(
    "cluster.io-pool.size", 4 * (os.cpu_count() or 1), pos_int,
    "Threads of a JobManager's I/O pool (sink commits, checkpoint metadata, cleanup of job "
    "files), started with the process so none starts on its event loop. Default: 4 x cores "
    "(Flink's ClusterOptions.CLUSTER_IO_EXECUTOR_POOL_SIZE).")

THREAD_DUMP_MAX_DEPTH = option(
    "cluster.thread-dump.stacktrace-max-depth", 50, pos_int,
    "Frames per thread in the JobManager's and TaskManagers' thread dumps "
    "(GET /jobmanager/thread-dump, /taskmanagers/:id/thread-dump).")

# ---- planner / data plane speed (issue 6: make it fast) -----------------------------------------
AGG_PHASE_STRATEGY = option(
    "table.optimizer.agg-phase-strategy", "AUTO", _enum("AUTO", "TWO_PHASE", "ONE_PHASE"),
    "Two-phase (local/global) aggregation: AUTO splits decomposable aggregations (sum, count, "
    "min, max, avg) into a local phase chained before the exchange and a global merge phase "
    "when the local phase can chain; TWO_PHASE splits them even when it cannot; ONE_PHASE never.")


def _bytes_or_off(value: Any) -> int:
    """A size in bytes (``1048576``, ``"10m"``) or -1 (off)."""
    if str(value).strip() == "-1":
        return -1
    return parse_memory_bytes(value)


BROADCAST_JOIN_THRESHOLD = option(
    "table.optimizer.join.broadcast-threshold", 10 << 20, _bytes_or_off,
    "Largest estimated size (bytes of rows in memory; the files a join side reads through "
    "projections and filters only) of a join input that is broadcast to the other side's "
    "subtasks instead of hash-partitioning both sides; -1 turns automatic broadcast joins off. "
    "The default, 10 MiB, is Spark's spark.sql.autoBroadcastJoinThreshold (Flink's is 1 MB): "
    "the join runs as Spark's broadcast hash join, and a side the run-time decision would "
    "broadcast anyway costs one vertex less when broadcast at compile time.")


from flintlock.config import batch_execution_options as _batch_execution_options  # noqa: E402,F401  (registers its keys)
from flintlock.config import optimizer_options as _optimizer_options  # noqa: E402,F401  (registers its keys)
from flintlock.config import resource_manager_options as _resource_manager_options  # noqa: E402,F401  (registers its keys)
