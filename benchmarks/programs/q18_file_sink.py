"""TPC-H Q18 written to a FileSink (Parquet): the load issue's job, for slot sharing and load.

    flintlock run --target remote -p 4 benchmarks/programs/q18_file_sink.py <tpch dir> <out dir>

The program of ``examples/tpch/q18.py`` with a ``FileSink.parquet`` instead of a collect, so the
whole job, its sink commit included, runs on the cluster; the harness reads the files back and
checks them against DuckDB's answer.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's `examples`


def main(argv: list[str]) -> int:
    from examples.tpch import q18
    from flintlock import StreamExecutionEnvironment
    from flintlock.connectors import FileSink

    tpch, out = argv
    env = StreamExecutionEnvironment.get_execution_environment()
    q18.build(env, tpch).sink_to(FileSink.parquet(out))
    env.execute("Q18 to a FileSink")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
