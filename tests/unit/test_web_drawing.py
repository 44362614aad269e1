"""Unit tests for the geometry of the admin's SVG drawings: the DAG run graph's layers
and the task trend chart (pgsched.web.graph, pgsched.web.charts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgsched.web.charts import nice_ceiling, trend
from pgsched.web.graph import NODE_W, draw, layers


def test_a_node_sits_one_layer_right_of_its_deepest_upstream_node():
    upstream = {"a": [], "b": ["a"], "c": ["a", "b"], "d": [], "e": ["d", "c"]}
    assert layers(upstream) == {"a": 0, "b": 1, "c": 2, "d": 0, "e": 3}


def test_a_long_chain_needs_no_recursion_and_a_cycle_is_refused():
    chain = {f"n{i}": ([f"n{i - 1}"] if i else []) for i in range(5000)}
    assert layers(chain)["n4999"] == 4999
    with pytest.raises(ValueError, match="cycle"):
        layers({"a": ["c"], "b": ["a"], "c": ["b"]})


def test_drawing_puts_edges_left_to_right_and_colours_by_state():
    nodes = [
        {"node_id": "extract", "upstream": [], "state": "succeeded"},
        {"node_id": "load", "upstream": ["extract"], "state": "running"},
        {"node_id": "check", "upstream": ["extract"], "state": "failed"},
        {"node_id": "report", "upstream": ["load", "check"], "state": "upstream_failed"},
        {"node_id": "later", "upstream": ["report"], "state": "waiting"},
    ]
    d = draw(nodes)
    at = {n["id"]: n for n in d.nodes}
    assert at["load"]["x"] == at["check"]["x"] > at["extract"]["x"]
    assert at["load"]["y"] != at["check"]["y"]
    assert [at[s]["fill"] for s in ("extract", "load", "check", "report", "later")] == [
        "#1f8a4c",
        "#f2c94c",
        "#c0392b",
        "#9aa3b2",
        "#ffffff",
    ]
    assert len(d.edges) == 5
    for e in d.edges:  # each edge starts at its source's right side and ends at its target's left
        start = e["d"].split()[0]
        assert start == f"M{at[e['source']]['x'] + NODE_W},{at[e['source']]['y'] + d.node_h // 2}"
        assert e["d"].endswith(f" {at[e['target']]['x']},{at[e['target']]['y'] + d.node_h // 2}")
    assert max(n["x"] for n in d.nodes) + NODE_W < d.width
    assert draw([]).nodes == []


def test_trend_scales_both_series_on_one_axis():
    t0 = datetime(2026, 11, 30, tzinfo=UTC)
    rows = [
        {
            "scheduled_at": t0 + timedelta(minutes=i),
            "latency": 0.1 * i,
            "duration": None if i == 1 else 3.0,
        }
        for i in range(3)
    ]
    chart = trend(rows)
    latency, duration = chart.lines
    assert latency["dots"][0][1] == chart.bottom  # 0 s on the axis
    assert len(duration["dots"]) == 2  # the execution that never ran is left out
    assert chart.y_ticks[-1][1] == "5 s" and chart.y_ticks[0] == (chart.bottom, "0")
    assert trend([]).lines == []
    assert [nice_ceiling(v) for v in (0.7, 3, 4.2, 11, 260)] == [1, 5, 5, 20, 500]
