"""``flintlock info`` prints the JobGraph plan and runs nothing (no Spark, no data needed)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from flintlock.client.cli import cli

REPO = Path(__file__).resolve().parents[2]
TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")


def _empty_tables(root: Path) -> Path:
    """Empty table directories: enough for compiling, nothing for running."""
    for t in TABLES:
        (root / t).mkdir(parents=True)
    return root


def test_info_shows_q1_source_filter_and_local_aggregate_chained_with_a_hash_edge(
        tmp_path: Path) -> None:
    data = _empty_tables(tmp_path / "data")
    result = CliRunner().invoke(cli, ["info", str(REPO / "examples/tpch/q1.py"), "--data", str(data)])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    nodes = plan["nodes"]
    assert plan["type"] == "BATCH"
    # two-phase aggregation: partial aggregates per key are written before the HASH exchange
    # Flink's JSON plan: the (HTML-escaped) vertex name is the description, operator is empty
    assert nodes[0]["operator"] == ""
    assert nodes[0]["description"].startswith("Source: lineitem -&gt; Filter")
    assert nodes[0]["description"].endswith("-&gt; LocalKeyedAggregate")
    assert "inputs" not in nodes[0]
    agg = nodes[1]
    assert agg["description"].startswith("GlobalKeyedAggregate")
    assert agg["inputs"] == [{"num": 0, "id": nodes[0]["id"], "ship_strategy": "HASH",
                              "exchange": "blocking"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing ran or was written
    assert all(not any((data / t).iterdir()) for t in TABLES)


def test_info_with_parallelism_override(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["info", "-p", "3", str(REPO / "examples/tpch/q6.py"), "--data",
              str(_empty_tables(tmp_path))]
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["nodes"][0]["parallelism"] == 3
