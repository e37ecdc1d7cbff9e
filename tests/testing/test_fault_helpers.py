"""flintlock.testing fault helpers on their own: failure budgets, gates, partition sabotage."""

from __future__ import annotations

import threading
from pathlib import Path

import cloudpickle
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import Row

from flintlock.testing.faults import (
    FailureBudget,
    Gate,
    InjectedFailure,
    fail_at_record,
    fail_at_records,
)
from flintlock.testing.partition_sabotage import (
    delete_partition,
    partition_dirs,
    truncate_partition,
)


def test_failure_budget_is_claimed_once_per_failure_even_concurrently(tmp_path: Path) -> None:
    budget = FailureBudget(str(tmp_path / "b"), times=3)
    claimed: list[int | None] = []
    lock = threading.Lock()

    def claim() -> None:
        n = budget.take()
        with lock:
            claimed.append(n)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(n for n in claimed if n is not None) == [1, 2, 3]
    assert claimed.count(None) == 5 and budget.used() == 3
    with pytest.raises(ValueError, match="times"):
        FailureBudget(str(tmp_path), times=-1)


def test_fail_at_record_fails_the_first_attempts_then_passes(tmp_path: Path) -> None:
    budget = FailureBudget(str(tmp_path / "b"), times=2)
    fn = fail_at_record(lambda r: (r.id, r.id * 2), record=7, budget=budget)
    # pickled and loaded as Spark's Python workers do: the state lives in the directory
    shipped = cloudpickle.loads(cloudpickle.dumps(fn))
    assert shipped(Row(id=6)) == (6, 12)
    for attempt in (1, 2):
        with pytest.raises(InjectedFailure, match=rf"^Injected failure at record 7 \(attempt {attempt}\)$"):
            cloudpickle.loads(cloudpickle.dumps(fn))(Row(id=7))
    assert shipped(Row(id=7)) == (7, 14)
    assert budget.used() == 2
    assert repr(fn) == ("fail_at_record(test_fail_at_record_fails_the_first_attempts_then_passes."
                        "<locals>.<lambda>, record=7)")
    # filter and flat_map functions are wrapped the same way; other fields can be matched
    keep = fail_at_record(lambda r: r.name != "b", record="b", field="name",
                          budget=FailureBudget(str(tmp_path / "f"), times=1))
    with pytest.raises(InjectedFailure, match="record 'b'"):
        keep(Row(name="b"))
    assert keep(Row(name="b")) is False


def test_gate_blocks_at_its_record_until_opened(tmp_path: Path) -> None:
    gate = Gate(str(tmp_path / "gate"))
    fn = cloudpickle.loads(cloudpickle.dumps(gate.blocking(lambda r: r.id, record=1, timeout_s=30)))
    assert fn(Row(id=2)) == 2  # other records pass at once
    results: list[int] = []
    waiter = threading.Thread(target=lambda: results.append(fn(Row(id=1))))
    waiter.start()
    deadline = threading.Event()
    for _ in range(500):
        if gate.waiters() == 1:
            break
        deadline.wait(0.01)
    assert gate.waiters() == 1 and results == [] and not gate.is_open
    gate.open()
    waiter.join(10)
    assert results == [1] and gate.is_open
    with pytest.raises(InjectedFailure, match="was not opened within 0.05 s"):
        Gate(str(tmp_path / "never")).blocking(lambda r: r, timeout_s=0.05)(Row(id=1))


def _fake_partition(shuffle: Path, job: str, dataset: str, leaf: str) -> Path:
    d = shuffle / job / dataset / leaf / "sp=0"
    d.mkdir(parents=True)
    pq.write_table(pa.table({"x": list(range(100))}), d / "part-0.parquet")
    return d.parent


def test_delete_and_truncate_partition_files(tmp_path: Path) -> None:
    shuffle = tmp_path / "shuffle"
    p0 = _fake_partition(shuffle, "job", "ds", "0-0-aaaa")
    p0_retry = _fake_partition(shuffle, "job", "ds", "0-1-bbbb")
    p1 = _fake_partition(shuffle, "job", "ds", "1-0-cccc")
    assert partition_dirs(str(shuffle), "job", "ds", 0) == [str(p0), str(p0_retry)]
    assert partition_dirs(str(shuffle), "job", "ds") == [str(p0), str(p0_retry), str(p1)]

    truncated = truncate_partition(str(shuffle), "job", "ds", 1)
    assert truncated == [str(p1 / "sp=0" / "part-0.parquet")]
    with pytest.raises(pa.ArrowInvalid):
        pq.read_table(truncated[0])

    assert delete_partition(str(shuffle), "job", "ds", 0) == [str(p0), str(p0_retry)]
    assert not p0.exists() and not p0_retry.exists() and p1.exists()
    with pytest.raises(FileNotFoundError, match="no stored partition 0 of dataset ds"):
        delete_partition(str(shuffle), "job", "ds", 0)
    with pytest.raises(ValueError, match="keep_fraction"):
        truncate_partition(str(shuffle), "job", "ds", 1, keep_fraction=1.0)


def test_fail_at_records_fails_once_at_each_listed_record_even_when_replayed(tmp_path: Path) -> None:
    fn = cloudpickle.loads(cloudpickle.dumps(  # as shipped to a Spark Python worker
        fail_at_records(lambda r: r.flight_id * 2, records=[3, 5], directory=str(tmp_path),
                        field="flight_id")))
    assert repr(fn).endswith("records=[3, 5])")
    rows = [Row(flight_id=i) for i in range(7)]
    with pytest.raises(InjectedFailure, match="record 3"):
        [fn(r) for r in rows]
    assert fn.used() == [3]
    with pytest.raises(InjectedFailure, match="record 5"):  # replayed from the start
        [fn(r) for r in rows]
    assert [fn(r) for r in rows] == [0, 2, 4, 6, 8, 10, 12]  # each record failed once
    assert fn.used() == [3, 5]
