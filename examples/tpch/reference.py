"""DuckDB reference answers for the TPC-H examples, over the same Parquet files.

``QUERIES[name]`` is the standard TPC-H query text with the spec's validation substitution parameters,
column names matching the flintlock examples' outputs. ``SORT_KEYS[name]`` is the ORDER BY of each
query as ``[(column, descending)]`` (used by the test comparison to check order).

    import duckdb
    from examples.tpch.reference import connect, run
    con = connect("data/tpch-sf1")
    rows = run(con, "q1")          # list of tuples; columns in run.columns
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")

QUERIES: dict[str, str] = {
    "q1": """
SELECT
    l_returnflag,
    l_linestatus,
    sum(l_quantity) AS sum_qty,
    sum(l_extendedprice) AS sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    avg(l_quantity) AS avg_qty,
    avg(l_extendedprice) AS avg_price,
    avg(l_discount) AS avg_disc,
    count(*) AS count_order
FROM lineitem
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus
""",
    "q3": """
SELECT
    l_orderkey,
    sum(l_extendedprice * (1 - l_discount)) AS revenue,
    o_orderdate,
    o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING'
  AND c_custkey = o_custkey
  AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15'
  AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority
ORDER BY revenue DESC, o_orderdate
LIMIT 10
""",
    "q5": """
SELECT
    n_name,
    sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer, orders, lineitem, supplier, nation, region
WHERE c_custkey = o_custkey
  AND l_orderkey = o_orderkey
  AND l_suppkey = s_suppkey
  AND c_nationkey = s_nationkey
  AND s_nationkey = n_nationkey
  AND n_regionkey = r_regionkey
  AND r_name = 'ASIA'
  AND o_orderdate >= DATE '1994-01-01'
  AND o_orderdate < DATE '1994-01-01' + INTERVAL 1 YEAR
GROUP BY n_name
ORDER BY revenue DESC
""",
    "q6": """
SELECT
    sum(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01'
  AND l_shipdate < DATE '1994-01-01' + INTERVAL 1 YEAR
  AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01
  AND l_quantity < 24
""",
    "q10": """
SELECT
    c_custkey,
    c_name,
    sum(l_extendedprice * (1 - l_discount)) AS revenue,
    c_acctbal,
    n_name,
    c_address,
    c_phone,
    c_comment
FROM customer, orders, lineitem, nation
WHERE c_custkey = o_custkey
  AND l_orderkey = o_orderkey
  AND o_orderdate >= DATE '1993-10-01'
  AND o_orderdate < DATE '1993-10-01' + INTERVAL 3 MONTH
  AND l_returnflag = 'R'
  AND c_nationkey = n_nationkey
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
ORDER BY revenue DESC
LIMIT 20
""",
    "q12": """
SELECT
    l_shipmode,
    sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'
             THEN 1 ELSE 0 END) AS high_line_count,
    sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH'
             THEN 1 ELSE 0 END) AS low_line_count
FROM orders, lineitem
WHERE o_orderkey = l_orderkey
  AND l_shipmode IN ('MAIL', 'SHIP')
  AND l_commitdate < l_receiptdate
  AND l_shipdate < l_commitdate
  AND l_receiptdate >= DATE '1994-01-01'
  AND l_receiptdate < DATE '1994-01-01' + INTERVAL 1 YEAR
GROUP BY l_shipmode
ORDER BY l_shipmode
""",
    "q18": """
SELECT
    c_name,
    c_custkey,
    o_orderkey,
    o_orderdate,
    o_totalprice,
    sum(l_quantity) AS sum_qty
FROM customer, orders, lineitem
WHERE o_orderkey IN (
        SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300)
  AND c_custkey = o_custkey
  AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
ORDER BY o_totalprice DESC, o_orderdate
LIMIT 100
""",
}

# ORDER BY of each query: [(column, descending)].
SORT_KEYS: dict[str, list[tuple[str, bool]]] = {
    "q1": [("l_returnflag", False), ("l_linestatus", False)],
    "q3": [("revenue", True), ("o_orderdate", False)],
    "q5": [("revenue", True)],
    "q6": [],
    "q10": [("revenue", True)],
    "q12": [("l_shipmode", False)],
    "q18": [("o_totalprice", True), ("o_orderdate", False)],
}

# Row limit of each query (None: no LIMIT clause).
LIMITS: dict[str, int | None] = {"q3": 10, "q10": 20, "q18": 100}


def connect(tpch_dir: str | os.PathLike[str]) -> Any:
    """A DuckDB connection with one view per TPC-H table over ``<tpch_dir>/<table>/*.parquet``."""
    import duckdb

    con = duckdb.connect()
    for t in TABLES:
        glob = (Path(tpch_dir) / t / "*.parquet").as_posix().replace("'", "''")
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{glob}')")
    return con


def run(con: Any, name: str) -> tuple[list[str], list[tuple]]:
    """Run query ``name``; returns ``(column names, rows)``."""
    cur = con.execute(QUERIES[name])
    cols = [d[0] for d in cur.description]
    return cols, cur.fetchall()
