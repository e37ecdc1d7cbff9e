"""Checkpoints and exactly-once recovery of STREAMING jobs on the local cluster.

A generated stream with known event times goes through a map that fails at a chosen record
(the first attempt only), a key_by exchange and a tumbling event-time window into a FileSink.
With checkpointing on, the job restarts from its newest completed checkpoint: sources rewind to
their offsets, the window operator loads its state, and the files published by checkpoints
before the failure are neither written again nor lost. The committed output equals the
closed-form answer exactly (no row lost, none duplicated). The same holds for a
``KeyedProcessFunction``'s ValueState, and an unusable checkpoint directory fails the job at its
start, naming the key to fix.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.api.watermarks import WatermarkStrategy
from flintlock.api.windows import TumblingEventTimeWindows
from flintlock.client.job_client import JobExecutionException
from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy
from flintlock.runtime.minicluster import MiniCluster
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.faults import FailureBudget, InjectedFailure
from flintlock.testing.state_functions import RunningCount
from flintlock.testing.waiting import wait_until_async, wait_until_sync

pytestmark = [pytest.mark.spark]

N = 6000
SCHEMA = "id long, k string, ts long"


class FailAfterCheckpoint:
    """A map function that fails at the first record from ``from_record`` on that it sees once
    a checkpoint completed (a ``_metadata`` file exists), while ``budget`` allows."""

    def __init__(self, checkpoints: str, from_record: int, budget: FailureBudget) -> None:
        self.checkpoints, self.from_record, self.budget = checkpoints, from_record, budget

    def __call__(self, row: Any) -> Any:
        if row.id >= self.from_record and any(Path(self.checkpoints).glob("*/chk-*/_metadata")):
            n = self.budget.take()
            if n is not None:
                raise InjectedFailure(f"Injected failure at record {row.id} (failure {n})")
        return row


def _event(i: int) -> tuple[int, str, int]:
    return (i, f"k{i % 3}", i * 10)


def _expected(size: int) -> dict[tuple[str, int], tuple[int, int]]:
    out: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for i in range(N):
        _, k, ts = _event(i)
        acc = out[(k, ts - ts % size)]
        acc[0] += 1
        acc[1] += i
    return {key: (n, s) for key, (n, s) in out.items()}


@pytest.fixture(autouse=True)
def _warm_python_workers() -> None:
    """Run a Python map once first: a cold Spark Python worker makes a source's first epoch
    take seconds, and the injected failures need checkpoints to complete while data flows."""
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2}))
    env.set_parallelism(2)
    rows = env.from_collection([(i,) for i in range(10)], "id long").map(
        lambda r: (r.id + 1,), "id long").execute_and_collect()
    assert sorted(r.id for r in rows) == list(range(1, 11))


def _env(tmp_path: Path, **settings: Any) -> StreamExecutionEnvironment:
    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2,
                          "state.checkpoints.dir": str(tmp_path / "checkpoints"), **settings})
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.enable_checkpointing(500)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 500))
    return env


def test_a_failed_task_restores_the_window_state_and_the_file_output_is_exactly_once(
        tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    out = tmp_path / "out"
    env = _env(tmp_path)
    failures = FailureBudget(str(tmp_path / "failures"), times=1)
    source = DataGeneratorSource(_event, N, RateLimiterStrategy.per_second(500), SCHEMA)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    (env.from_source(source)
        .map(FailAfterCheckpoint(str(tmp_path / "checkpoints"), 3000, failures), SCHEMA)
        .assign_timestamps_and_watermarks(strategy)
        .key_by("k").window(TumblingEventTimeWindows.of(1000))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s"))
        .sink_to(FileSink.parquet(str(out))))
    result = env.execute("exactly once")
    assert failures.used() == 1  # the failure happened, and the job restarted
    rows = pq.read_table(out).to_pylist()
    got = [((r["k"], int(r["window_start"].timestamp() * 1000)), (r["n"], r["s"])) for r in rows]
    assert sorted(got) == sorted(_expected(1000).items())
    # files were published by checkpoints before the job ended (part-<subtask>-<spark name>)
    assert any(p.name.count("-") > 3 for p in out.glob("part-*")), sorted(out.iterdir())
    assert result is not None


def test_keyed_state_is_restored_so_every_running_count_is_written_exactly_once(
        tmp_path: Path) -> None:
    out = tmp_path / "counts"
    env = _env(tmp_path)
    failures = FailureBudget(str(tmp_path / "failures"), times=1)
    source = DataGeneratorSource(_event, 3000, RateLimiterStrategy.per_second(300), SCHEMA)
    # one source subtask: each key's rows reach the function in order, so counts are 1..n
    (env.from_source(source).set_parallelism(1)
        .map(FailAfterCheckpoint(str(tmp_path / "checkpoints"), 1500, failures), SCHEMA)
        .set_parallelism(1)
        .key_by("k").process(RunningCount(), "k string, n long")
        .sink_to(FileSink.parquet(str(out))))
    env.execute("running counts")
    assert failures.used() == 1
    got = sorted((r["k"], r["n"]) for r in pq.read_table(out).to_pylist())
    assert got == sorted((f"k{k}", n) for k in range(3) for n in range(1, 1001))


def test_a_sink_publishing_segment_files_is_exactly_once_across_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Parquet FileSink right after a key_by copies the producer's segment files as its part
    files (``segment_sink``); a failure after a checkpoint restarts from it and every record is
    published exactly once."""
    from flintlock.runtime.spark import streaming_task

    copied: list[int] = []
    copy = streaming_task.copy_segment_files

    def counting_copy(dirs: Any, target: str) -> tuple[int, int]:
        files, size = copy(dirs, target)
        copied.append(files)
        return files, size

    monkeypatch.setattr(streaming_task, "copy_segment_files", counting_copy)
    out = tmp_path / "out"
    env = _env(tmp_path, **{"taskmanager.network.pipelined.arrow-segment-threshold": "0"})
    failures = FailureBudget(str(tmp_path / "failures"), times=1)
    source = DataGeneratorSource(_event, N, RateLimiterStrategy.per_second(500), SCHEMA)
    (env.from_source(source)
        .map(FailAfterCheckpoint(str(tmp_path / "checkpoints"), 3000, failures), SCHEMA)
        .key_by("k").sink_to(FileSink.parquet(str(out))))
    env.execute("copied segments exactly once")
    assert failures.used() == 1
    assert copied and sum(copied) > 0
    rows = pq.read_table(out).to_pylist()
    assert sorted((r["id"], r["k"], r["ts"]) for r in rows) == [_event(i) for i in range(N)]


def test_an_unusable_checkpoint_directory_fails_the_job_at_its_start(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    env = _env(tmp_path, **{"state.checkpoints.dir": str(tmp_path / "file" / "checkpoints")})
    source = DataGeneratorSource(_event, 10, None, SCHEMA)
    env.from_source(source).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("no checkpoint dir")
    text = str(info.value) + str(info.value.__cause__)
    assert "not writable" in text and "state.checkpoints.dir" in text, text


def test_a_task_manager_lost_mid_stream_restarts_from_the_checkpoint_exactly_once(
        spark_provider: Any, tmp_path: Path) -> None:
    """A TaskManager cut off from the JobManager (its heartbeats time out) while the job runs:
    its subtasks restart on the other TaskManager from the newest completed checkpoint; its own
    attempts, still running until they notice, publish nothing."""
    from pyspark.sql import functions as F

    out, checkpoints = tmp_path / "out", tmp_path / "checkpoints"
    conf = {"heartbeat.interval": "250 ms", "heartbeat.timeout": "2 s", "rpc.ask-timeout": "3 s",
            "state.checkpoints.dir": str(checkpoints),
            "execution.checkpointing.interval": "500 ms",
            "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "5",
            "restart-strategy.fixed-delay.delay": "200 ms"}
    env = StreamExecutionEnvironment.get_execution_environment(Configuration(conf))
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    source = DataGeneratorSource(_event, N, RateLimiterStrategy.per_second(500), SCHEMA)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    (env.from_source(source).assign_timestamps_and_watermarks(strategy)
        .key_by("k").window(TumblingEventTimeWindows.of(1000))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s")).name("windows")
        .sink_to(FileSink.parquet(str(out))))
    job = env.get_job_graph("task manager lost")
    lost: dict[str, str] = {}

    async def body(cluster: MiniCluster) -> None:
        await cluster.submit_job(job)

        async def a_checkpoint_completed() -> bool:
            return any(checkpoints.glob("*/chk-*/_metadata"))

        await wait_until_async(a_checkpoint_completed, 90)
        graph = await cluster.dispatcher_gateway.request_job(job.job_id)
        (windows,) = [v for v in graph.vertices if "windows" in v.name]
        lost["tm"] = str(windows.subtasks[0].task_manager)
        cluster.rpc_service.partition(f"taskexecutor-{lost['tm']}")
        result = await cluster.wait_for_job_result(job.job_id, timeout_s=120)
        assert result.application_status == "SUCCEEDED", result.failure
        graph = await cluster.dispatcher_gateway.request_job(job.job_id)
        assert any(f"TaskManager {lost['tm']} is lost" in e.error.message
                   for e in graph.exception_history)
        stats = graph.checkpoint_stats
        assert stats is not None and stats.counts.restored >= 1, stats

    gen_mini_cluster(task_managers=2, slots_per_task_manager=2, config=conf, timeout=180,
                     spark=spark_provider, fault_injection=True)(body)()
    rows = pq.read_table(out).to_pylist()
    got = [((r["k"], int(r["window_start"].timestamp() * 1000)), (r["n"], r["s"])) for r in rows]
    assert sorted(got) == sorted(_expected(1000).items())


def test_failed_checkpoints_beyond_the_tolerable_number_restart_the_job_exactly_once(
        tmp_path: Path) -> None:
    """A checkpoint cannot be written (its directory is taken by a file, as a storage outage
    would): it is declined and aborted, and with no failure tolerated the job restarts from the
    newest completed checkpoint; the output is still exactly once."""
    from pyspark.sql import functions as F

    out, checkpoints = tmp_path / "out", tmp_path / "checkpoints"
    env = _env(tmp_path)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(4, 200))
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(0)
    source = DataGeneratorSource(_event, N, RateLimiterStrategy.per_second(500), SCHEMA)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    (env.from_source(source).assign_timestamps_and_watermarks(strategy)
        .key_by("k").window(TumblingEventTimeWindows.of(1000))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s"))
        .sink_to(FileSink.parquet(str(out))))
    client = env.execute_async("failing checkpoints")
    wait_until_sync(lambda: any(checkpoints.glob("*/chk-*/_metadata")), 120)
    (job_dir,) = [p for p in checkpoints.iterdir() if p.is_dir()]
    n = max(int(p.name[4:]) for p in job_dir.glob("chk-*")) + 1
    while (job_dir / f"chk-{n}").exists():  # already being written: block the one after
        n += 1
    (job_dir / f"chk-{n}").write_text("in the way")  # checkpoint n cannot be written
    client.get_job_execution_result(timeout_s=180)
    graph = client.get_job_details()
    stats = graph.checkpoint_stats
    assert stats is not None and stats.counts.failed >= 1 and stats.counts.restored >= 1, stats
    messages = [e.error.message for e in graph.exception_history]
    assert any("tolerable failure threshold" in m and f"checkpoint {n} " in m
               for m in messages), messages
    rows = pq.read_table(out).to_pylist()
    got = [((r["k"], int(r["window_start"].timestamp() * 1000)), (r["n"], r["s"])) for r in rows]
    assert sorted(got) == sorted(_expected(1000).items())
