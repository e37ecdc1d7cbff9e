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


def data_plane_doc() -> dict:
    """A run with the load issue's parts: standalone systems, local mode, slot sharing, load."""
    ms = []
    for q, (fs, ps, local, cold) in {"q1": (3.0, 2.0, 9.0, 10.0), "q6": (1.0, 0.5, 8.0, 7.0)}.items():
        for i in (1, 2):
            ms += [m(q, "flintlock-session@standalone", i, fs, fs),
                   m(q, "pyspark-warm@standalone", i, ps, ps),
                   m(q, "flintlock-local", i, local), m(q, "pyspark-cold", i, cold)]
    return {"settings": {"sf": 1, "runs": 3, "warmups": 1}, "machine": {"logical_cores": 2},
            "measurements": ms,
            "slot_sharing": {"measured": 2, "p2_2x1_s": [9.0, 5.0, 5.0],
                             "p4_2x4_s": [12.0, 6.0, 6.5], "parallelism": {"p2_2x1": 2,
                                                                            "p4_2x4": 2}},
            "load": {"q18_s": 20.0, "jobs": 50, "jobs_s": 30.0, "finished": 51, "restarts": 0,
                     "heartbeat_timeouts": [], "polls": 40,
                     "lag_ms": {"jobmanager": {"LagP99Ms": 90.0, "LagMaxMs": 300.0},
                                "taskmanager tm-1": {"LagP99Ms": 210.0, "LagMaxMs": 250.0}}}}


def test_the_load_issues_targets_from_one_run() -> None:
    targets = {t.name: t for t in check_targets(data_plane_doc())}
    standalone = "TPC-H warm on a Spark standalone cluster"
    assert targets[f"{standalone}, geometric mean"].measured == f"{math.sqrt(1.5 * 2):.2f}x"
    assert targets[f"{standalone}, every query"].measured == "worst q6 2.00x"
    local = targets["local mode vs cold PySpark, every TPC-H query"]
    assert local.met is False and "not faster on q6" in local.measured
    sharing = targets["slot sharing"]  # medians of the last 2: 6.25 / 5.0
    assert (sharing.measured, sharing.met) == ("1.25x", False)
    load = targets["under load (Q18 at p4 on 2 x 4 slots, then many jobs at once)"]
    assert load.met is False and load.measured.startswith("worst p99 210 ms; 51 of 51 jobs")
    doc = data_plane_doc()
    doc["load"]["lag_ms"]["taskmanager tm-1"]["LagP99Ms"] = 150.0
    assert {t.name: t for t in check_targets(doc)}[load.name].met is True
    doc["load"]["heartbeat_timeouts"] = ["the heartbeat of TaskManager x timed out"]
    assert {t.name: t for t in check_targets(doc)}[load.name].met is False


def test_markdown_shows_slot_sharing_load_and_the_standalone_ratio() -> None:
    text = render_markdown(data_plane_doc(), "x.json")
    assert "## Slot sharing" in text and "| 2 x 4 slots | 4 | 2 | 6.25 (6.00–6.50) (12.00, 6.00, 6.50) |" in text
    assert "Ratio p4 / p2: **1.25**." in text
    assert "## Under load" in text and "| taskmanager tm-1 | 210 | 250 |" in text
    assert "on standalone Spark: session / PySpark warm (engine)" in text
    assert "| TPC-H Q6 | 2.00 |" in ratio_table(data_plane_doc())[3]


def test_control_plane_rate_and_linearity() -> None:
    cp = summarize_control_plane(doc()["control_plane"])
    assert [round(r["deploy_rate"]) for r in cp] == [2000, 1667]
    assert linearity(cp) == pytest.approx((6.0 / 10000) / (0.5 / 1000))


def test_markdown_has_every_section_and_flags_smoke_runs() -> None:
    d = doc()
    text = render_markdown(d, "benchmarks/results/x.json", {"engine": "images/bench-engine.png"})
    for heading in ("## Targets (issues 6 and 10)", "## Data workloads", "## Small-job latency",
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
