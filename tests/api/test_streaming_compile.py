"""STREAMING programs compile as Flink compiles them: the runtime-mode rules (AUTOMATIC picks
STREAMING for an unbounded source, BATCH refuses one), PIPELINED_BOUNDED exchanges, the streaming
task, and a clear refusal of operators the streaming data plane does not run yet. Plus the
DataGeneratorSource / monitored FileSource contracts and how a source subtask paces its epochs."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

import cloudpickle
import pytest
from flintlock_api_fakes import FakeSink, FakeSource

from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api.exceptions import InvalidProgramException
from flintlock.connectors import (
    DataGeneratorSource,
    FileSource,
    GeneratorSplit,
    MonitoredFilesSplit,
    RateLimiterStrategy,
    SourceException,
)
from flintlock.graph.job_graph_generator import SPARK_STREAMING_TASK
from flintlock.runtime.jobgraph.types import JobType, ResultPartitionType
from flintlock.runtime.spark.epoch_sources import GeneratorRange, epoch_source


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINTLOCK_CONF_DIR", raising=False)
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)


def _gen(i: int) -> tuple[int, str]:
    return (i, f"w{i % 3}")


def _env(p: int = 2) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment().set_parallelism(p)


def _unbounded() -> DataGeneratorSource:
    return DataGeneratorSource(_gen, None, RateLimiterStrategy.per_second(10), "id long, w string")


def test_automatic_mode_runs_an_unbounded_source_as_streaming_with_pipelined_exchanges() -> None:
    env = _env()
    env.from_source(_unbounded()).map(lambda r: (r.id,), "id long").rebalance() \
        .filter("id > 0").sink_to(FakeSink())
    jg = env.get_job_graph()
    assert jg.job_type is JobType.STREAMING and jg.name == "Flink Streaming Job"
    assert jg.configuration["execution.runtime-mode"] == "STREAMING"
    assert len(jg.vertices) == 2
    assert {v.invokable_class for v in jg.vertices} == {SPARK_STREAMING_TASK}
    (ds,) = [d for v in jg.vertices for d in v.results]
    assert ds.result_type is ResultPartitionType.PIPELINED_BOUNDED


def test_streaming_mode_accepts_bounded_sources_and_batch_refuses_unbounded_ones() -> None:
    env = _env().set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.from_source(FakeSource()).sink_to(FakeSink())
    assert env.get_job_graph().job_type is JobType.STREAMING

    env = _env().set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.from_source(_unbounded()).sink_to(FakeSink())
    with pytest.raises(InvalidProgramException, match="UNBOUNDED source .* 'BATCH'"):
        env.get_job_graph()


@pytest.mark.parametrize("build, operator", [
    (lambda s: s.key_by("w").sum("id"), "'KeyedAggregate' (an aggregation without windows"),
    (lambda s: s.distinct(), "(Distinct)"),
    (lambda s: s.sort("id"), "(Sort)"),
])
def test_operators_the_streaming_data_plane_cannot_run_yet_are_refused_by_name(build, operator) -> None:
    env = _env()
    build(env.from_source(_unbounded())).sink_to(FakeSink())
    with pytest.raises(InvalidProgramException) as info:
        env.get_job_graph()
    assert "is not supported in STREAMING mode" in str(info.value)
    assert "Local" not in str(info.value)  # the user's operator, not the two-phase split
    assert operator in str(info.value) and "BATCH" in str(info.value)


def test_data_generator_source_validates_its_arguments_and_splits_by_stride() -> None:
    with pytest.raises(ValueError, match="count"):
        DataGeneratorSource(_gen, -1, None, "id long")
    with pytest.raises(ValueError, match="output_type"):
        DataGeneratorSource(_gen, 5, None, "")
    with pytest.raises(TypeError, match="callable"):
        DataGeneratorSource(42, 5, None, "id long")
    with pytest.raises(ValueError, match="rows_per_second"):
        RateLimiterStrategy.per_second(0)
    lock = threading.Lock()
    with pytest.raises(InvalidProgramException, match="generator function"):
        DataGeneratorSource(lambda i: (i, lock), 5, None, "id long")
    source = DataGeneratorSource(_gen, 10, None, "id long, w string")
    assert source.bounded and not _unbounded().bounded
    splits = [s for (s,) in source.enumerate_splits(3)]
    assert [s.size() for s in splits] == [4, 3, 3]  # indices 0,3,6,9 | 1,4,7 | 2,5,8
    assert GeneratorSplit(0, 2, None).size() is None


def test_a_rate_limited_generator_emits_what_is_due_and_ends_after_its_count() -> None:
    source = DataGeneratorSource(_gen, 6, RateLimiterStrategy.per_second(4), "id long, w string")
    (split,) = source.enumerate_splits(2)[1]  # 2 records per second, 3 in all
    epochs = epoch_source(source, (split,), min_interval_s=0.1)
    first = epochs.next_epoch(10.0)
    assert first.splits == (GeneratorRange(split, 0, 1),) and not first.ended
    idle = epochs.next_epoch(10.2)
    assert idle.splits == () and 0.29 < idle.wait_s < 0.31  # the next record is due at 10.5
    assert epochs.next_epoch(10.5).splits == (GeneratorRange(split, 1, 2),)
    last = epochs.next_epoch(20.0)
    assert last.splits == (GeneratorRange(split, 2, 3),) and last.ended
    assert epochs.next_epoch(21.0).ended


def test_a_generator_catches_up_what_fell_due_while_it_ran_but_only_a_second_of_a_stall() -> None:
    source = DataGeneratorSource(_gen, None, RateLimiterStrategy.per_second(100), "id long, w string")
    (split,) = source.enumerate_splits(1)[0]
    epochs = epoch_source(source, (split,), min_interval_s=0.1)
    assert epochs.next_epoch(0.0).splits == (GeneratorRange(split, 0, 1),)
    # stalled 5 s (back pressure, idle): at most one second's worth (Flink's stored permits)
    assert epochs.next_epoch(5.0).splits == (GeneratorRange(split, 1, 101),)
    # the last epoch ran 2 s: the 2 s that fell due meanwhile are emitted, not dropped
    assert epochs.next_epoch(7.0, busy_s=2.0).splits == (GeneratorRange(split, 101, 301),)


def test_a_generator_behind_its_rate_emits_max_records_per_epoch_and_the_rest_stays_due() -> None:
    source = DataGeneratorSource(_gen, None, RateLimiterStrategy.per_second(100), "id long, w string")
    (split,) = source.enumerate_splits(1)[0]
    epochs = epoch_source(source, (split,), min_interval_s=0.1, max_records=150)
    assert epochs.next_epoch(0.0).splits == (GeneratorRange(split, 0, 1),)
    # a 3-s epoch: 300 fell due, of which one epoch takes 150
    assert epochs.next_epoch(3.0, busy_s=3.0).splits == (GeneratorRange(split, 1, 151),)
    # the 150 left out were not a stall: still due, with what fell due since (160 in all)
    assert epochs.next_epoch(3.1, busy_s=0.1).splits == (GeneratorRange(split, 151, 301),)
    assert epochs.next_epoch(3.2, busy_s=0.1).splits == (GeneratorRange(split, 301, 321),)


def test_a_monitored_directory_yields_each_new_file_once_to_one_subtask(tmp_path: Path) -> None:
    source = FileSource.text(str(tmp_path)).monitor_continuously(datetime.timedelta(seconds=1))
    assert not source.bounded and "monitored every 1000 ms" in source.describe()
    splits = source.enumerate_splits(2)
    assert splits == [[MonitoredFilesSplit(0, 2)], [MonitoredFilesSplit(1, 2)]]
    subtasks = [epoch_source(source, tuple(s)) for s in splits]
    assert all(e.next_epoch(0.0).splits == () for e in subtasks)  # empty directory: fine
    for i in range(6):
        (tmp_path / f"f{i}.txt").write_text(f"line {i}\n")
    (tmp_path / ".incomplete.txt").write_text("hidden until renamed\n")
    assert all(e.next_epoch(0.5).splits == () for e in subtasks)  # not listed again yet
    got = [[f.path for f in e.next_epoch(1.0).splits] for e in subtasks]
    assert sorted(p for g in got for p in g) == sorted(str(tmp_path / f"f{i}.txt") for i in range(6))
    assert all(e.next_epoch(2.0).splits == () for e in subtasks)  # each file once
    with pytest.raises(SourceException, match="does not exist"):
        FileSource.text(str(tmp_path / "missing")).monitor_continuously(1000).enumerate_splits(1)
    with pytest.raises(ValueError, match="at least 1 ms"):
        FileSource.text(str(tmp_path)).monitor_continuously(0)


def test_windows_with_a_late_side_output_compile_into_one_chain_after_the_key_by() -> None:
    from pyspark.sql import functions as F

    from flintlock.api.watermarks import WatermarkStrategy
    from flintlock.api.windows import OutputTag, SlidingEventTimeWindows
    from flintlock.runtime.operators.time_specs import (
        SideOutputSpec,
        WatermarkAssignerSpec,
        WindowSpec,
    )

    env = _env()
    late = OutputTag("late")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(datetime.timedelta(seconds=2))
    windows = (env.from_source(_unbounded())
               .assign_timestamps_and_watermarks(strategy.with_timestamp_column("id"))
               .key_by("w").window(SlidingEventTimeWindows.of(10_000, 5_000))
               .allowed_lateness(1_000).side_output_late_data(late).agg(F.count("id").alias("n")))
    windows.sink_to(FakeSink())
    windows.get_side_output(late).sink_to(FakeSink())
    jg = env.get_job_graph()
    assert jg.job_type is JobType.STREAMING and len(jg.vertices) == 2
    chains = [cloudpickle.loads(v.invokable_payload) for v in jg.vertices]
    specs = [[type(n.spec) for n in c.nodes] for c in chains]
    assert WatermarkAssignerSpec in specs[0]
    assert specs[1][0] is WindowSpec and SideOutputSpec in specs[1]  # one chain
    window = chains[1].nodes[0].spec
    assert window.time_column == "id" and window.allowed_lateness_ms == 1_000
    assert (window.assigner.size_ms, window.assigner.slide_ms) == (10_000, 5_000)


def test_window_and_watermark_arguments_are_checked_when_the_program_is_written() -> None:
    from flintlock.api.watermarks import WatermarkStrategy
    from flintlock.api.windows import OutputTag, SlidingEventTimeWindows, TumblingEventTimeWindows

    with pytest.raises(ValueError, match="multiple of its slide"):
        SlidingEventTimeWindows.of(10_000, 3_000)
    with pytest.raises(TypeError, match="timedelta or an int of milliseconds"):
        TumblingEventTimeWindows.of(1.5)
    stream = _env().from_source(_unbounded())
    with pytest.raises(InvalidProgramException, match="has no event time"):
        stream.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps())
    with pytest.raises(InvalidProgramException, match="has no side output 'late'"):
        stream.filter("id > 1").get_side_output(OutputTag("late"))
