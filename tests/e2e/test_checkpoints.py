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
from flintlock.api import KeyedProcessFunction, RestartStrategies
from flintlock.api.state import ValueStateDescriptor
from flintlock.api.watermarks import WatermarkStrategy
from flintlock.api.windows import TumblingEventTimeWindows
from flintlock.client.job_client import JobExecutionException
from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy
from flintlock.testing.faults import FailureBudget, InjectedFailure

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


class RunningCount(KeyedProcessFunction):
    """Emits (key, how many rows of that key so far) for every row: keyed ValueState."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (ctx.get_current_key(), n)


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


def test_an_unusable_checkpoint_directory_fails_the_job_at_its_start(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    env = _env(tmp_path, **{"state.checkpoints.dir": str(tmp_path / "file" / "checkpoints")})
    source = DataGeneratorSource(_event, 10, None, SCHEMA)
    env.from_source(source).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("no checkpoint dir")
    text = str(info.value) + str(info.value.__cause__)
    assert "not writable" in text and "state.checkpoints.dir" in text, text
