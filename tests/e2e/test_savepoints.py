"""Savepoints of STREAMING jobs on the local cluster: stop with a savepoint, change the program,
resume from the savepoint.

A keyed running count (``ValueState``) over one in-order source writes ``(key, n)`` for every
row. The first run is stopped with a savepoint part-way; the second run (with a stateless
operator added) resumes from it. Together the two runs' committed files hold every
``(key, 1..n)`` exactly once: the source resumed at its offset, the counts at their state, and
nothing after the savepoint was published by the stopped run. Operators without ``uid()`` cannot
be matched: the restore fails naming the cause, unless non-restored state is allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.client.job_client import JobExecutionException
from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.testing.state_functions import RunningCount
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark]

N = 3000
SCHEMA = "id long, k string"


def _event(i: int) -> tuple[int, str]:
    return (i, f"k{i % 3}")


def _env(**settings: Any) -> StreamExecutionEnvironment:
    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2,
                          **settings})
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_restart_strategy(RestartStrategies.no_restart())
    return env


def _program(env: StreamExecutionEnvironment, out: Path, uids: bool = True,
             added_operator: bool = False, rate: int = 300) -> None:
    source = DataGeneratorSource(_event, N, RateLimiterStrategy.per_second(rate), SCHEMA)
    events = env.from_source(source).set_parallelism(1)
    if uids:
        events = events.uid("events")
    if added_operator:  # a stateless operator that was not there when the savepoint was taken
        events = events.filter("id >= 0").set_parallelism(1)
    counts = events.key_by("k").process(RunningCount(), "k string, n long")
    if uids:
        counts = counts.uid("counts")
    counts.sink_to(FileSink.parquet(str(out)))


def _status(client: Any) -> JobStatus:
    status = client.get_job_status()
    return status.result() if hasattr(status, "result") else status


def _stop_part_way(env: StreamExecutionEnvironment, savepoints: Path) -> str:
    client = env.execute_async("first run")

    def counted_some_rows() -> bool:
        graph = client.get_job_details()
        live = [s.live for v in graph.vertices if "KeyedProcess" in v.name or "Process" in v.name
                for s in v.subtasks if s.live is not None]
        return sum(m.records_in for m in live) >= 600

    wait_until_sync(counted_some_rows, 120)
    path = client.stop_with_savepoint(str(savepoints))
    wait_until_sync(lambda: _status(client) is JobStatus.CANCELED, 60)
    return path


def _counts(*outs: Path) -> list[tuple[str, int]]:
    rows = [r for out in outs if out.exists() for r in pq.read_table(out).to_pylist()]
    return sorted((r["k"], r["n"]) for r in rows)


EXPECTED = sorted((f"k{k}", n) for k in range(3) for n in range(1, N // 3 + 1))


def test_stop_with_savepoint_then_a_changed_program_resumes_exactly(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    env = _env()
    _program(env, first)
    path = _stop_part_way(env, tmp_path / "savepoints")
    assert Path(path, "_metadata").is_file() and Path(path).parent == tmp_path / "savepoints"
    stopped = _counts(first)
    assert 0 < len(stopped) < N, len(stopped)  # stopped part-way, its output published
    resumed = _env(**{"execution.savepoint.path": path})
    _program(resumed, second, added_operator=True, rate=3000)
    resumed.execute("second run")
    assert _counts(first, second) == EXPECTED


def test_operators_without_uid_cannot_be_matched_unless_allowed(tmp_path: Path) -> None:
    env = _env()
    _program(env, tmp_path / "first", uids=False)
    path = _stop_part_way(env, tmp_path / "savepoints")
    again = _env(**{"execution.savepoint.path": path})
    _program(again, tmp_path / "refused", uids=False, rate=3000)
    with pytest.raises(JobExecutionException) as info:
        again.execute("refused")
    text = str(info.value) + str(info.value.__cause__)
    assert "Cannot map checkpoint/savepoint state" in text and "uid" in text, text
    allowed = _env(**{"execution.savepoint.path": path,
                      "execution.savepoint.ignore-unclaimed-state": "true"})
    _program(allowed, tmp_path / "fresh", uids=False, rate=3000)
    allowed.execute("allowed")
    assert _counts(tmp_path / "fresh") == EXPECTED  # the state was dropped: counts from 1


def test_a_savepoint_path_that_does_not_exist_fails_the_job_clearly(tmp_path: Path) -> None:
    env = _env(**{"execution.savepoint.path": str(tmp_path / "nowhere")})
    _program(env, tmp_path / "out", rate=3000)
    with pytest.raises(JobExecutionException) as info:
        env.execute("no savepoint")
    text = str(info.value) + str(info.value.__cause__)
    assert "does not exist" in text and "nowhere" in text, text
