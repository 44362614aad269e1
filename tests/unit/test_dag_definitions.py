"""DAG definitions (pgsched.dag): the examples load, every error names the node and the
field, cycles print their path, and a 10,000-node graph validates."""

from __future__ import annotations

import json
import time

import pytest

from pgsched import dag
from pgsched.errors import ValidationError

from ..helpers import REPO


def nodes(*specs: dict) -> dict:
    return {"name": "d", "nodes": [{"command": "true", **s} for s in specs]}


def test_the_examples_load_with_their_levels():
    etl = dag.load(REPO / "examples" / "dags" / "etl.yaml")
    assert etl.levels == [["extract_a", "extract_b"], ["merge"], ["train"], ["deploy"]]
    assert (etl.schedule.kind, etl.schedule.expr, etl.schedule.tz) == ("cron", "0 2 * * *", "Europe/Berlin")
    assert etl.nodes["extract_a"].task.max_attempts == 3 and etl.nodes["merge"].depends_on == ("extract_a", "extract_b")
    docs = dag.load(REPO / "examples" / "dags" / "documents.json")
    assert docs.failure_policy == "continue" and docs.schedule.kind == "none"
    assert docs.nodes["invoice"].condition == dag.Condition("classify.result.type", "equals", "invoice")
    assert docs.nodes["archive"].trigger_rule == "none_failed_min_one_success"
    assert docs.downstream()["classify"] == ["invoice", "receipt"]


@pytest.mark.parametrize(("data", "field", "words"), [
    (nodes({"id": "a"}, {"id": "a"}), "nodes[a].id", "is used by two nodes"),
    (nodes({"id": "a", "depends_on": ["ghost"]}), "nodes[a].depends_on", "'ghost' is not a node of this DAG"),
    (nodes({"id": "a", "depends_on": ["a"]}), "nodes[a].depends_on", "is the node itself"),
    (nodes({"id": "a", "depends_on": ["b", "b"]}, {"id": "b"}), "nodes[a].depends_on", "names a node twice"),
    ({"name": "d", "nodes": [{"id": "a"}]}, "nodes[a].handler", "needs exactly one of command, argv, python"),
    (nodes({"id": "a", "python": "x:y"}), "nodes[a].handler", "needs exactly one"),
    ({"name": "d", "nodes": [{"id": "a", "python": "not a target"}]}, "nodes[a].python", "must look like"),
    (nodes({"id": "a", "trigger_rule": "all_good"}), "nodes[a].trigger_rule", "must be one of all_success"),
    (nodes({"id": "a", "timeout": -1}), "nodes[a].timeout", "must be a number of seconds"),
    (nodes({"id": "a", "retries": 3}), "nodes[a].retries", "is not a node field"),
    (nodes({"id": "a b"}), "nodes[0].id", "must be 1-100 characters"),
    (nodes({"id": "a"}, {"id": "b", "condition": {"field": "a.result.x", "equals": 1}}),
     "nodes[b].condition.field", "'a' is not one"),
    (nodes({"id": "a"}, {"id": "b", "depends_on": ["a"], "condition": {"field": "a.output", "equals": 1}}),
     "nodes[b].condition.field", "must look like node.result"),
    (nodes({"id": "a"}, {"id": "b", "depends_on": ["a"], "condition": {"field": "a.result", "is": 1}}),
     "nodes[b].condition", "needs exactly one of equals, not_equals, in, exists"),
    (nodes({"id": "a"}, {"id": "b", "depends_on": ["a"], "condition": {"field": "a.result", "in": 1}}),
     "nodes[b].condition.in", "must be a list"),
    ({"name": "d", "failure_policy": "panic", "nodes": [{"id": "a", "command": "true"}]}, "failure_policy",
     "must be one of skip_downstream, fail_all, continue"),
    ({"name": "d", "schedule": {"cron": "61 * * * *"}, "nodes": [{"id": "a", "command": "true"}]}, "schedule",
     "'61' is out of range"),
    ({"name": "d", "schedule": {"cron": "@daily", "interval": "1h"}, "nodes": [{"id": "a", "command": "true"}]},
     "schedule", "exactly one of cron, interval, once"),
    ({"name": "d", "nodes": []}, "nodes", "must be a non-empty list"),
    ({"nodes": [{"id": "a", "command": "true"}]}, "name", "must be 1-99 characters"),
    ({"name": "d", "node": []}, "node", "is not a DAG field"),
])
def test_errors_name_the_node_and_the_field(data, field, words):
    with pytest.raises(ValidationError) as caught:
        dag.parse(data)
    assert caught.value.field == field and words in str(caught.value), str(caught.value)


def test_a_cycle_is_reported_with_its_path():
    data = nodes({"id": "start"}, {"id": "a", "depends_on": ["start", "c"]}, {"id": "b", "depends_on": ["a"]},
                 {"id": "c", "depends_on": ["b"]}, {"id": "after", "depends_on": ["c"]})
    with pytest.raises(ValidationError) as caught:
        dag.parse(data)
    assert str(caught.value) == "nodes[a].depends_on: 'a -> b -> c -> a' is a cycle"


def test_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: d\nnodes:\n  - id: a\n    command: echo a: b\n")
    with pytest.raises(ValidationError, match="is not valid YAML or JSON at line 4"):
        dag.load(path)


def test_ten_thousand_nodes_validate():
    """A layered graph of 10,000 nodes and about 30,000 edges: valid, ordered, levelled.
    (The brief asks for well under a second; the time is printed, not asserted.)"""
    width, depth = 100, 100
    specs = []
    for level in range(depth):
        for i in range(width):
            ups = [] if level == 0 else [f"n{level - 1}_{(i + k) % width}" for k in range(3)]
            specs.append({"id": f"n{level}_{i}", "command": "true", "depends_on": ups})
    data = {"name": "big", "nodes": specs}
    started = time.perf_counter()
    big = dag.parse(json.loads(json.dumps(data)))
    took = time.perf_counter() - started
    print(f"10,000 nodes validated in {took:.3f}s")
    assert len(big.order) == 10_000 and len(big.levels) == depth and all(len(lv) == width for lv in big.levels)
    position = {n: i for i, n in enumerate(big.order)}
    assert all(position[up] < position[n.id] for n in big.nodes.values() for up in n.depends_on)


U = dag.Upstream


@pytest.mark.parametrize(("rule", "up", "expected"), [
    # all_success: any failure settles it at once; a skip skips; otherwise wait for all
    ("all_success", U(2, succeeded=2), "run"),
    ("all_success", U(2, succeeded=1), "wait"),
    ("all_success", U(3, failed=1), "upstream_failed"),  # the others still running
    ("all_success", U(2, upstream_failed=1, succeeded=1), "upstream_failed"),
    ("all_success", U(2, skipped=1, succeeded=1), "skipped"),
    # all_failed
    ("all_failed", U(2, failed=1, upstream_failed=1), "run"),
    ("all_failed", U(2, failed=1), "wait"),
    ("all_failed", U(2, failed=1, succeeded=1), "skipped"),
    ("all_failed", U(2, skipped=1), "skipped"),
    # all_done
    ("all_done", U(3, succeeded=1, failed=1, skipped=1), "run"),
    ("all_done", U(3, succeeded=1, failed=1), "wait"),
    # one_success: the first success runs it; all done without one
    ("one_success", U(3, succeeded=1), "run"),
    ("one_success", U(3, failed=1), "wait"),
    ("one_success", U(2, failed=1, skipped=1), "upstream_failed"),
    ("one_success", U(2, skipped=2), "skipped"),
    # one_failed
    ("one_failed", U(3, failed=1), "run"),
    ("one_failed", U(3, upstream_failed=1), "run"),
    ("one_failed", U(2, succeeded=1), "wait"),
    ("one_failed", U(2, succeeded=1, skipped=1), "skipped"),
    # none_failed: skips are fine
    ("none_failed", U(2, succeeded=1, skipped=1), "run"),
    ("none_failed", U(2, skipped=2), "run"),
    ("none_failed", U(2, succeeded=1), "wait"),
    ("none_failed", U(2, failed=1), "upstream_failed"),
    # none_failed_min_one_success
    ("none_failed_min_one_success", U(2, succeeded=1, skipped=1), "run"),
    ("none_failed_min_one_success", U(2, skipped=2), "skipped"),
    ("none_failed_min_one_success", U(2, upstream_failed=1, succeeded=1), "upstream_failed"),
    ("none_failed_min_one_success", U(2, skipped=1), "wait"),
    # no upstream: runs
    ("all_success", U(0), "run"),
])
def test_trigger_rules_decide_as_airflow(rule, up, expected):
    assert dag.decide(rule, up) == expected
    assert up.done <= up.total


@pytest.mark.parametrize(("rule", "up", "expected"), [
    ("all_success", U(2, failed=1), "wait"),
    ("all_success", U(2, failed=1, succeeded=1), "run"),
    ("none_failed", U(2, failed=2), "run"),
    ("none_failed_min_one_success", U(2, failed=2), "run"),  # a failure counts as a success
    ("none_failed_min_one_success", U(2, skipped=2), "skipped"),
    ("none_failed_min_one_success", U(2, failed=1, succeeded=1), "run"),
    ("all_success", U(2, failed=1, skipped=1), "skipped"),  # skips still skip: branches stay not taken
    ("one_failed", U(2, failed=1), "run"),  # rules about failures are unchanged
    ("all_failed", U(2, failed=1, succeeded=1), "skipped"),
])
def test_continue_lets_downstream_run_regardless(rule, up, expected):
    assert dag.decide(rule, up, "continue") == expected


def test_decide_refuses_unknown_names():
    with pytest.raises(ValueError, match="trigger rule 'always'"):
        dag.decide("always", U(1))
    with pytest.raises(ValueError, match="failure policy 'ignore'"):
        dag.decide("all_success", U(1), "ignore")
