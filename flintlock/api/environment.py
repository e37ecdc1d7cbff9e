"""StreamExecutionEnvironment: the entry point of a program; compiles and submits jobs.

Configuration precedence (lowest first): the cluster configuration (``config.yaml`` via
``load_cluster_configuration``), the program's ``Configuration`` (``get_execution_environment``),
the CLI's ``-D``/``-p`` overrides (``flintlock.client.context.current_overrides``), the keys given
to ``configure()`` and ``set_restart_strategy()`` (the later call wins), and the environment's
setters (``set_parallelism``, ``set_max_parallelism``, ``set_runtime_mode``,
``disable_operator_chaining``), as in Flink.

The job carries the resulting configuration; on the cluster its keys override the cluster's own
(so a job's ``restart-strategy.*`` beats the cluster-wide one, Flink
``RestartBackoffTimeStrategyFactoryLoader``), except after
``set_restart_strategy(RestartStrategies.fall_back_restart())``, which sends no
``restart-strategy.*`` key, so the cluster's strategy applies.

Default parallelism: ``parallelism.default`` when configured anywhere, else ``os.cpu_count()``
for ``execution.target: local`` (Flink's LocalStreamEnvironment), else 1.

Follows Flink ``streaming/api/environment/StreamExecutionEnvironment`` and PyFlink's
``pyflink.datastream.stream_execution_environment``.
"""

from __future__ import annotations

import concurrent.futures
import enum
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from flintlock.api.checkpoint_config import CheckpointConfig, CheckpointingMode
from flintlock.api.datastream import DataStream
from flintlock.api.durations import Duration
from flintlock.api.restart_strategy import (
    RESTART_STRATEGY_PREFIX,
    RestartStrategies,
    RestartStrategyConfiguration,
)
from flintlock.api.schema import rows_to_ipc
from flintlock.api.slot_sharing_group import SlotSharingGroup
from flintlock.api.transformations import SinkTransformation, SourceTransformation
from flintlock.config import Configuration, load_cluster_configuration
from flintlock.config.options import (
    EXECUTION_TARGET,
    MAX_PARALLELISM,
    OPERATOR_CHAINING,
    PARALLELISM_DEFAULT,
    PIPELINE_NAME,
    RUNTIME_MODE,
)
from flintlock.config.sensitive import job_configuration
from flintlock.graph.job_graph_generator import create_job_graph
from flintlock.graph.plan import stream_graph_plan
from flintlock.graph.stream_graph import StreamGraph
from flintlock.graph.stream_graph_generator import (
    DEFAULT_BATCH_JOB_NAME,
    DEFAULT_STREAMING_JOB_NAME,
    StreamGraphSettings,
    generate_stream_graph,
    resolve_job_type,
)
from flintlock.graph.streaming import unbounded_sources
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobType

__all__ = ["RuntimeExecutionMode", "StreamExecutionEnvironment"]


class RuntimeExecutionMode(enum.Enum):
    """``execution.runtime-mode``: BATCH, STREAMING, or AUTOMATIC (BATCH when every source is
    bounded, else STREAMING)."""

    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"


def _current_overrides() -> Configuration:
    try:
        from flintlock.client.context import current_overrides
    except ImportError:
        return Configuration()
    overrides = current_overrides()
    return overrides if overrides is not None else Configuration()


class StreamExecutionEnvironment:
    """Records a program's transformations and turns them into jobs."""

    def __init__(self, configuration: Configuration | None = None) -> None:
        self._configuration = configuration.copy() if configuration is not None else Configuration()
        self._sinks: list[SinkTransformation] = []
        self._next = 0
        self._parallelism: int | None = None
        self._max_parallelism: int | None = None
        self._runtime_mode: RuntimeExecutionMode | None = None
        self._chaining: bool | None = None
        #: keys from configure() and set_restart_strategy(), the later call winning
        self._programmatic = Configuration()
        #: set_restart_strategy(fall_back_restart()): the job sends no restart-strategy.* key
        self._restart_fallback = False
        #: register_slot_sharing_group(): group name -> its slot's ResourceProfile
        self._slot_sharing_groups: dict[str, ResourceProfile] = {}

    @staticmethod
    def get_execution_environment(
        configuration: Configuration | None = None,
    ) -> StreamExecutionEnvironment:
        """A new environment for the program (``configuration`` = the program's settings)."""
        return StreamExecutionEnvironment(configuration)

    # ---- settings -----------------------------------------------------------------------------------

    def register_slot_sharing_group(self, slot_sharing_group: SlotSharingGroup) -> StreamExecutionEnvironment:
        """Declare the resources of a slot sharing group that operators name by its name
        (PyFlink ``register_slot_sharing_group``; fine-grained resource management).

        Raises:
            ValueError: not a ``SlotSharingGroup``, or one without resources.
        """
        if not isinstance(slot_sharing_group, SlotSharingGroup):
            raise ValueError(f"register_slot_sharing_group takes a SlotSharingGroup, got "
                             f"{type(slot_sharing_group).__name__}")
        if slot_sharing_group.resource_profile.is_unknown:
            raise ValueError(f"slot sharing group {slot_sharing_group.name!r} has no resources to "
                             "register; build it with set_cpu_cores(...).set_task_heap_memory_mb(...)")
        self._slot_sharing_groups[slot_sharing_group.name] = slot_sharing_group.resource_profile
        return self

    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        """Default parallelism of this program's operators; wins over every configuration."""
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"parallelism must be an int >= 1, got {parallelism!r}")
        self._parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        """The default parallelism operators without their own get."""
        if self._parallelism is not None:
            return self._parallelism
        conf = self.get_configuration()
        if conf.contains(PARALLELISM_DEFAULT):
            return int(conf.get(PARALLELISM_DEFAULT))
        if conf.get(EXECUTION_TARGET) == "local":
            return os.cpu_count() or 1
        return int(PARALLELISM_DEFAULT.default or 1)

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        """Max parallelism (key groups) of all operators, 1..32768."""
        if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in [1, 32768], got {max_parallelism!r}")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int:
        """The configured max parallelism, or -1 (derived per operator from its parallelism)."""
        return int(self.get_configuration().get(MAX_PARALLELISM))

    def set_runtime_mode(self, mode: RuntimeExecutionMode) -> StreamExecutionEnvironment:
        self._runtime_mode = RuntimeExecutionMode(mode)
        return self

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        """Run every operator as its own task (``pipeline.operator-chaining.enabled: false``)."""
        self._chaining = False
        return self

    def is_chaining_enabled(self) -> bool:
        return bool(self.get_configuration().get(OPERATOR_CHAINING))

    def enable_checkpointing(self, interval: Duration,
                             mode: CheckpointingMode | None = None) -> StreamExecutionEnvironment:
        """Checkpoint a STREAMING job every ``interval`` (ms or ``timedelta``), in ``mode``
        (EXACTLY_ONCE when not given); PyFlink ``enable_checkpointing``. See
        ``get_checkpoint_config()`` for the other settings.

        Raises:
            ValueError: an interval below 10 ms.
        """
        config = self.get_checkpoint_config().set_checkpoint_interval(interval)
        if mode is not None:
            config.set_checkpointing_mode(mode)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        """The program's checkpointing settings (edits write Flink's keys into this program)."""
        return CheckpointConfig(self)

    def configure(self, configuration: Configuration | Mapping[str, Any]) -> StreamExecutionEnvironment:
        """Apply ``configuration``'s keys to this program (PyFlink ``configure``).

        They win over ``config.yaml``, the ``Configuration`` given at creation and ``-D``; the
        explicit setters win over them. E.g. ``env.configure({"restart-strategy.type":
        "fixed-delay", "restart-strategy.fixed-delay.attempts": 3})``.

        Raises:
            IllegalConfigurationException: an unknown key or an invalid value (named).
        """
        conf = configuration if isinstance(configuration, Configuration) else Configuration(
            configuration)
        if any(key.startswith(RESTART_STRATEGY_PREFIX) for key in conf):
            self._restart_fallback = False
        self._programmatic.add_all(conf)
        return self

    def set_restart_strategy(
        self, restart_strategy_configuration: RestartStrategyConfiguration,
    ) -> StreamExecutionEnvironment:
        """Set this program's restart strategy (PyFlink ``set_restart_strategy``), e.g.
        ``env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 10_000))``.

        Replaces every ``restart-strategy.*`` key set before with the strategy's keys; they
        override the cluster's restart strategy. ``RestartStrategies.fall_back_restart()`` sends
        no key at all (not even those of ``config.yaml`` or ``-D``), so the cluster's strategy
        applies, until a later ``configure()`` sets a ``restart-strategy.*`` key again.

        Raises:
            TypeError: not a ``RestartStrategyConfiguration``.
        """
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise TypeError(
                "set_restart_strategy expects a RestartStrategies.*() configuration (e.g. "
                "RestartStrategies.fixed_delay_restart(3, 10_000)), got "
                f"{type(restart_strategy_configuration).__name__}")
        keys = restart_strategy_configuration.to_configuration()
        self._programmatic = Configuration(_without_restart_strategy(self._programmatic.to_dict()))
        self._programmatic.add_all(keys)
        self._restart_fallback = not keys
        return self

    def get_restart_strategy(self) -> RestartStrategyConfiguration:
        """The restart strategy of this program's configuration (``fall_back_restart()`` when
        none is configured: the cluster's applies).

        Raises:
            IllegalConfigurationException: the ``restart-strategy.*`` keys are invalid.
        """
        return RestartStrategies.from_configuration(self.get_configuration())

    def get_configuration(self) -> Configuration:
        """The effective configuration (a copy; see the module docstring for precedence)."""
        conf = load_cluster_configuration()
        conf.add_all(self._configuration)
        conf.add_all(_current_overrides())
        conf.add_all(self._programmatic)
        if self._restart_fallback:
            conf = Configuration(_without_restart_strategy(conf.to_dict()))
        if self._parallelism is not None:
            conf.set(PARALLELISM_DEFAULT, self._parallelism)
        if self._max_parallelism is not None:
            conf.set(MAX_PARALLELISM, self._max_parallelism)
        if self._runtime_mode is not None:
            conf.set(RUNTIME_MODE, self._runtime_mode.value)
        if self._chaining is not None:
            conf.set(OPERATOR_CHAINING, str(self._chaining).lower())
        return conf

    # ---- sources ----------------------------------------------------------------------------------------

    def from_source(self, source: Any, source_name: str | None = None) -> DataStream:
        """A stream reading a ``flintlock.connectors`` source (``FileSource.parquet(path)``, ...).

        The operator is named ``"Source: <source_name or source.describe()>"``.
        """
        describe = getattr(source, "describe", None)
        if not callable(describe):
            raise TypeError(f"from_source: expected a flintlock.connectors source, got "
                            f"{type(source).__name__}")
        t = SourceTransformation(id=self._next_id(), name=f"Source: {source_name or describe()}",
                                 source=source)
        return DataStream(self, t)

    def from_collection(self, rows: Iterable[Any], schema: Any | None = None) -> DataStream:
        """A stream of ``rows`` (tuples, dicts or Rows); ``schema`` a DDL string or StructType.

        Without a schema it is inferred from dict/Row rows.
        """
        from flintlock.connectors.collection import CollectionSource

        payload, ddl = rows_to_ipc(rows, schema)
        return self.from_source(CollectionSource(payload, ddl))

    def socket_text_stream(self, host: str, port: int, delimiter: str = "\n",
                           max_retry: int = 0) -> DataStream:
        """Lines of text from a TCP socket in a column ``value`` (unbounded, parallelism 1;
        Flink ``socketTextStream``; see ``flintlock.connectors.socket``)."""
        from flintlock.connectors.socket import SocketTextSource

        source = SocketTextSource(host, int(port), delimiter, max_retry)
        t = SourceTransformation(id=self._next_id(), name=f"Source: {source.describe()}",
                                 source=source, non_parallel=True)
        return DataStream(self, t)

    def from_sequence(self, start: int, end: int) -> DataStream:
        """The numbers ``start..end`` (both inclusive) in a bigint column ``id``."""
        from flintlock.connectors.collection import SequenceSource

        if end < start:
            raise ValueError(f"from_sequence: end {end} is below start {start}")
        return self.from_source(SequenceSource(int(start), int(end)))

    # ---- compiling ------------------------------------------------------------------------------------

    def _next_id(self) -> int:
        self._next += 1
        return self._next

    def _add_sink(self, sink: SinkTransformation) -> None:
        self._sinks.append(sink)

    def get_stream_graph(self, job_name: str | None = None) -> StreamGraph:
        """The StreamGraph of the sinks added so far (they stay registered).

        Raises:
            InvalidProgramException: no sinks, BATCH mode with an unbounded source, an operator
                STREAMING mode does not run yet, or an invalid program.
        """
        conf = self.get_configuration()
        job_type = self.job_type(conf)
        default_name = (DEFAULT_BATCH_JOB_NAME if job_type is JobType.BATCH
                        else DEFAULT_STREAMING_JOB_NAME)
        name = job_name or conf.get(PIPELINE_NAME) or default_name
        conf.set(RUNTIME_MODE, job_type.value)
        conf.set(PIPELINE_NAME, name)
        settings = StreamGraphSettings(
            job_name=name,
            default_parallelism=self.get_parallelism(),
            max_parallelism=int(conf.get(MAX_PARALLELISM)),
            chaining_enabled=bool(conf.get(OPERATOR_CHAINING)),
            job_type=job_type,
            configuration=job_configuration(conf.to_dict()),
            slot_sharing_group_resources=dict(self._slot_sharing_groups),
        )
        return generate_stream_graph(self._sinks, settings)

    def job_type(self, conf: Configuration | None = None) -> JobType:
        """BATCH or STREAMING for the sinks added so far (``execution.runtime-mode``; AUTOMATIC:
        STREAMING when a source is unbounded).

        Raises:
            InvalidProgramException: BATCH with an unbounded source.
        """
        conf = conf or self.get_configuration()
        return resolve_job_type(str(conf.get(RUNTIME_MODE)),
                                all_sources_bounded=not unbounded_sources(self._sinks))

    def get_execution_plan(self) -> str:
        """Flink's StreamGraph plan JSON (``{"nodes": [...]}``) of the program so far."""
        return json.dumps(stream_graph_plan(self.get_stream_graph()), indent=2)

    def get_job_graph(self, job_name: str | None = None) -> JobGraph:
        """Compile the program so far into a JobGraph (with operator chaining)."""
        return create_job_graph(self.get_stream_graph(job_name))

    # ---- executing --------------------------------------------------------------------------------------

    def execute_async(self, job_name: str | None = None) -> Any:
        """Submit the job and return its ``JobClient``.

        The registered sinks are consumed (cleared) even when compiling fails, as Flink clears
        its transformations, so a later ``execute()`` only runs what was added after this one.
        """
        from flintlock.client.executor import execute_job

        try:
            job_graph = self.get_job_graph(job_name)
            conf = self.get_configuration()
        finally:
            self._sinks.clear()
        return execute_job(job_graph, conf)

    def execute(self, job_name: str | None = None) -> Any:
        """Run the job, wait for it and return its ``JobExecutionResult``.

        Raises:
            InvalidProgramException: the program does not compile.
            Whatever ``JobClient.get_job_execution_result`` raises for a failed job.
        """
        job_client = self.execute_async(job_name)
        result = job_client.get_job_execution_result()
        if isinstance(result, concurrent.futures.Future):
            result = result.result()
        return result


def _without_restart_strategy(values: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if not k.startswith(RESTART_STRATEGY_PREFIX)}
