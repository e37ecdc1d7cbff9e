"""The benchmark report's arithmetic and text, and the answer check (no Spark, no processes)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from benchmarks.report import ratio_table, render_markdown
from benchmarks.stats import (
    Summary,
    check_targets,
    geomean,
    linearity,
    summarize,
    summarize_control_plane,
)
from benchmarks.verify import WrongAnswer, check_answer


def m(workload: str, system: str, run: int, wall: float, job: float | None = None,
      warmup: bool = False) -> dict:
    return {"workload": workload, "system": system, "run": run, "warmup": warmup,
            "wall_s": wall, "job_s": job, "rest_s": None}


def doc() -> dict:
    ms = [m("q1", "flintlock-session", 0, 99.0, 99.0, warmup=True)]  # a warm-up never counts
    for i, (w, j) in enumerate([(3.0, 2.0), (5.0, 4.0), (4.0, 3.0)], start=1):
        ms.append(m("q1", "flintlock-session", i, w, j))
    for i, (w, j) in enumerate([(8.0, 1.0), (6.0, 2.0), (7.0, 1.5)], start=1):
        ms.append(m("q1", "pyspark-cold", i, w, j))
    for i, j in enumerate([1.0, 3.0, 2.0], start=1):
        ms.append(m("q1", "pyspark-warm", i, j, j))
    for i, j in enumerate([1.0, 1.0, 1.0], start=1):
        ms.append(m("q6", "flintlock-session", i, 2.0, 4.0 * j))
        ms.append(m("q6", "pyspark-warm", i, j, j))
    return {"settings": {"sf": 1, "runs": 3, "warmups": 1}, "machine": {"logical_cores": 2},
            "measurements": ms,
            "latency": {"client_s": [0.5, 0.6, 0.7], "rest_s": [0.3, 0.4, 0.45]},
            "control_plane": [{"subtasks": 1000, "deployed_s": [0.4, 0.5, 0.6],
                               "finished_s": [1.0, 1.0, 1.0]},
                              {"subtasks": 10000, "deployed_s": [6.0, 6.0, 7.0],
                               "finished_s": [9.0, 12.0, 11.0]}]}


def test_summaries_skip_warmups_and_give_median_min_max() -> None:
    wall = summarize(doc()["measurements"], "wall_s")
    assert wall["q1"]["flintlock-session"] == Summary(4.0, 3.0, 5.0, 3)
    assert wall["q1"]["pyspark-cold"] == Summary(7.0, 6.0, 8.0, 3)


def test_ratios_and_geometric_mean() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([None, 0.0]) is None
    table = "\n".join(ratio_table(doc()))
    # q1 warm: median job 3.0 / 2.0 = 1.50; q6 warm: 4.0 / 1.0 = 4.00; gm = sqrt(6)
    assert "| TPC-H Q1 | 1.50 |" in table
    assert "| TPC-H Q6 | 4.00 |" in table
    assert f"**{math.sqrt(6):.2f}**" in table
    # q1 as run vs cold PySpark: wall 4.0 / 7.0
    assert f"| {4 / 7:.2f} |" in table


def test_targets_name_what_is_missed() -> None:
    targets = {t.name: t for t in check_targets(doc())}
    assert targets["TPC-H warm, geometric mean"].met is False
    assert targets["TPC-H warm, every query"].measured == "worst q6 4.00x"
    assert targets["as users run them vs cold PySpark"].met is True
    assert targets["as users run them vs PyFlink"].met is None  # not measured
    assert targets["small-job latency"].met is True  # median REST 0.4 s
    assert targets["control plane, deploy rate"].met is False  # 10,000 / 6.0 s = 1,667/s
    assert targets["control plane, 10,000 subtasks"].measured == "6.00 s; FINISHED after 11.00 s"
    assert targets["control plane, 10,000 subtasks"].met is True


def test_control_plane_rate_and_linearity() -> None:
    cp = summarize_control_plane(doc()["control_plane"])
    assert [round(r["deploy_rate"]) for r in cp] == [2000, 1667]
    assert linearity(cp) == pytest.approx((6.0 / 10000) / (0.5 / 1000))


def test_markdown_has_every_section_and_flags_smoke_runs() -> None:
    d = doc()
    text = render_markdown(d, "benchmarks/results/x.json", {"engine": "images/bench-engine.png"})
    for heading in ("## Targets (issue 6)", "## Data workloads", "## Small-job latency",
                    "## Control-plane throughput", "![engine time per workload](images/bench-engine.png)"):
        assert heading in text
    assert "| TPC-H Q1 | 4.00 (3.00–5.00) |" in text
    assert "Not a benchmark result" not in text
    d["settings"]["sf"] = 0.01
    assert "Not a benchmark result" in render_markdown(d, "x.json")


def test_answer_check_accepts_ties_in_any_order_and_tolerates_rounding() -> None:
    ref_cols = ["k", "v", "d"]
    ref = [(1, Decimal("2.50"), dt.date(1995, 1, 1)), (1, Decimal("1.00"), None), (0, 3.0, None)]
    got = [(1, 1.0000000001, None), (1, 2.5, dt.date(1995, 1, 1)), (0, Decimal("3.00"), None)]
    check_answer("t", ref_cols, got, ref_cols, ref, [("k", True)])


@pytest.mark.parametrize("got, message", [
    ([(1, 2.5), (0, 3.0)], "columns"),
    ([(1, 2.5)], "rows != expected"),
    ([(0, 3.0), (1, 2.5)], "not ordered by k DESC"),
    ([(1, 2.6), (0, 3.0)], "v: 2.6 != 2.5"),
])
def test_answer_check_fails_loudly(got: list, message: str) -> None:
    cols = ["k", "v"] if message != "columns" else ["k", "value"]
    with pytest.raises(WrongAnswer, match=message):
        check_answer("t", cols, got, ["k", "v"], [(1, 2.5), (0, 3.0)], [("k", True)])
