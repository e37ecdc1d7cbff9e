"""Which sink chains adopt their gate's segment files, how the files are copied, and which
part files of no rows an epoch's write leaves behind (``flintlock.runtime.spark.segment_sink``;
STYLE layer 1, no Spark).

The end-to-end behaviour (part files published once, exactly once across a failure) is in
``tests/e2e/test_streaming.py`` and ``tests/e2e/test_checkpoints.py``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flintlock.connectors import FileSink
from flintlock.runtime.ids import OperatorID
from flintlock.runtime.operators.specs import ChainedNode, FilterSpec, OperatorChain, SinkSpec
from flintlock.runtime.spark.segment_sink import (
    MTIME_SLACK_S,
    adoptable_schema,
    adopting_sink,
    copy_segment_files,
    drop_empty_part_files,
)


def _node(spec: object, gates: tuple[int, ...] = (), chained: int | None = None) -> ChainedNode:
    return ChainedNode(OperatorID.generate(), type(spec).__name__, spec, gates, chained)


def test_only_a_parquet_sink_with_default_options_reading_one_gate_adopts() -> None:
    parquet = FileSink.parquet("/tmp/out")
    assert adopting_sink(OperatorChain((_node(SinkSpec(parquet), (0,)),))) is parquet
    # another format, writer options, two gates, or an operator before the sink: Spark writes
    assert adopting_sink(OperatorChain((_node(SinkSpec(FileSink.csv("/tmp/o")), (0,)),))) is None
    with_options = FileSink("parquet", "/tmp/o", options={"compression": "zstd"})
    assert adopting_sink(OperatorChain((_node(SinkSpec(with_options), (0,)),))) is None
    assert adopting_sink(OperatorChain((_node(SinkSpec(parquet), (0, 1)),))) is None
    filtered = OperatorChain((_node(FilterSpec("x > 1"), (0,)), _node(SinkSpec(parquet), (), 0)))
    assert adopting_sink(filtered) is None
    assert adopting_sink(OperatorChain(())) is None


@pytest.mark.parametrize(("ddl", "adoptable"), [
    ("`id` bigint, `word` string", True),
    ("`id` bigint NOT NULL, `m` map<string,decimal(10,2)>, `s` struct<sp:int>", True),
    ("`id` bigint, `sp` int", False),  # the files hold the user's `sp` under another name
    ("`SP` int", False),
    ("", False),  # unknown schema
])
def test_a_user_column_named_like_the_subpartition_column_is_not_adopted(
        ddl: str, adoptable: bool) -> None:
    assert adoptable_schema(ddl) is adoptable


def test_copies_keep_the_names_of_the_parquet_files_and_skip_hidden_ones(tmp_path: Path) -> None:
    seg0, seg1 = tmp_path / "seg-0" / "sp=1", tmp_path / "seg-1" / "sp=1"
    for d, name in ((seg0, "part-00000-a.c000.snappy.parquet"),
                    (seg1, "part-00001-b.c000.snappy.parquet")):
        d.mkdir(parents=True)
        (d / name).write_bytes(name.encode() * 3)
        (d / f".{name}.crc").write_bytes(b"crc")
        (d / "_SUCCESS").write_bytes(b"")
    target = tmp_path / "sink" / "_temporary" / "job" / "0"
    files, size = copy_segment_files([str(seg0), f"file://{seg1}"], str(target))
    names = sorted(p.name for p in target.iterdir())
    assert names == ["part-00000-a.c000.snappy.parquet", "part-00001-b.c000.snappy.parquet"]
    assert files == 2 and size == sum(len(n) * 3 for n in names)
    assert (target / names[1]).read_bytes() == names[1].encode() * 3
    # the segment files stay (the producer releases them when every consumer acknowledged)
    assert (seg0 / names[0]).exists()


def test_a_missing_segment_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        copy_segment_files([str(tmp_path / "gone" / "sp=0")], str(tmp_path / "t"))


def test_only_new_parquet_files_of_no_rows_are_dropped(tmp_path: Path) -> None:
    """A streaming epoch's Spark write of no rows leaves one Parquet file of no rows (the schema);
    it goes with its checksum file, while the files of rows, the files modified before the write
    started and other files stay."""
    schema = pa.schema([("id", pa.int64())])
    empty, rows = pa.table({"id": pa.array([], pa.int64())}), pa.table({"id": [1, 2]}, schema)
    old = tmp_path / "part-00000-old-c000.snappy.parquet"
    pq.write_table(empty, old)
    started = time.time()
    os.utime(old, (started - MTIME_SLACK_S - 1, started - MTIME_SLACK_S - 1))
    pq.write_table(empty, tmp_path / "part-00000-new-c000.snappy.parquet")
    (tmp_path / ".part-00000-new-c000.snappy.parquet.crc").write_bytes(b"crc")
    pq.write_table(rows, tmp_path / "part-00001-new-c000.snappy.parquet")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    sink = FileSink.parquet(str(tmp_path))
    assert drop_empty_part_files(f"file://{tmp_path}", sink, started) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "_SUCCESS", "part-00000-old-c000.snappy.parquet", "part-00001-new-c000.snappy.parquet"]
    assert drop_empty_part_files(str(tmp_path / "missing"), sink, started) == 0


@pytest.mark.parametrize(("sink", "content", "dropped"), [
    (FileSink.json("/o"), b"", True),
    (FileSink.json("/o"), b'{"id":1}\n', False),
    (FileSink.csv("/o", header=False), b"", True),
    (FileSink.csv("/o", header=False), b"1,a\n", False),
    (FileSink.csv("/o"), b"id,s\n", True),  # Spark's CSV of no rows: the header line
    (FileSink.csv("/o"), b"id,s\n1,a\n", False),
    (FileSink.csv("/o"), b"id,s", False),
])
def test_text_part_files_of_no_rows_are_dropped(tmp_path: Path, sink: FileSink, content: bytes,
                                                dropped: bool) -> None:
    name = f"part-00000-new-c000.{sink.format}"
    (tmp_path / name).write_bytes(content)
    assert drop_empty_part_files(str(tmp_path), sink, time.time()) == int(dropped)
    assert (tmp_path / name).exists() is not dropped
