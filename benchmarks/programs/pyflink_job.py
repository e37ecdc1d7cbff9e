"""Apache Flink (PyFlink Table API / SQL, batch mode) running one benchmark workload, cold.

Runs in the PyFlink venv (``benchmarks.pyflink_env``), never in flintlock's: it imports only
pyflink, pyarrow and the stdlib. The harness writes a spec file (``benchmarks.flink_sql``)::

    {"ddl": ["CREATE TABLE ...", ...], "query": "SELECT ...", "parallelism": 2,
     "result": "answer.arrow", "meta": "meta.json"}

    <pyflink-venv>/bin/python benchmarks/programs/pyflink_job.py spec.json

The program starts a local Flink (MiniCluster in the PyFlink gateway JVM), registers the tables,
runs the query, collects its rows and writes them as Arrow IPC; ``job_s`` in the meta file is the
query from ``execute_sql`` to the last collected row.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    from _answer import write_answer, write_meta
    from pyflink.table import EnvironmentSettings, TableEnvironment

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: pyflink_job.py SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    t_env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    t_env.get_config().set("parallelism.default", str(spec.get("parallelism", 1)))
    for ddl in spec["ddl"]:
        t_env.execute_sql(ddl)
    t0 = time.perf_counter()
    result = t_env.execute_sql(spec["query"])
    columns = result.get_resolved_schema().get_column_names()
    with result.collect() as rows_iter:
        rows = [tuple(r) for r in rows_iter]
    job_s = time.perf_counter() - t0
    write_answer(spec["result"], columns, rows)
    write_meta(spec["meta"], job_s=job_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
