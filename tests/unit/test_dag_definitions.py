"""DAG definitions (pgsched.dag): the examples load, every error names the node and the
field, all problems of a file are reported at once with their lines, cycles print their
path, and a 10,000-node graph validates."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from pgsched import dag
from pgsched.cli import main
from pgsched.errors import ValidationError

from ..helpers import REPO


def nodes(*specs: dict) -> dict:
    return {"name": "d", "nodes": [{"command": "true", **s} for s in specs]}


def test_the_examples_load_with_their_levels():
    etl = dag.load(REPO / "examples" / "dags" / "etl.yaml")
    assert etl.levels == [["extract_a", "extract_b"], ["merge"], ["train"], ["deploy"]]
    assert (etl.schedule.kind, etl.schedule.expr, etl.schedule.tz) == (
        "cron",
        "0 2 * * *",
        "Europe/Berlin",
    )
    assert etl.nodes["extract_a"].task.max_attempts == 3 and etl.nodes["merge"].depends_on == (
        "extract_a",
        "extract_b",
    )
    docs = dag.load(REPO / "examples" / "dags" / "documents.json")
    assert docs.failure_policy == "skip_downstream" and docs.schedule.kind == "none"
    assert docs.nodes["invoice"].condition == dag.Condition(
        "classify.result.type", "equals", "invoice"
    )
    assert docs.nodes["archive"].trigger_rule == "none_failed_min_one_success"
    assert docs.downstream()["classify"] == ["invoice", "receipt"]


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (nodes({"id": "a"}, {"id": "a"}), "nodes[a].id", "is used by two nodes"),
        (
            nodes({"id": "a", "depends_on": ["ghost"]}),
            "nodes[a].depends_on",
            "'ghost' is not a node of this DAG",
        ),
        (nodes({"id": "a", "depends_on": ["a"]}), "nodes[a].depends_on", "is the node itself"),
        (
            nodes({"id": "a", "depends_on": ["b", "b"]}, {"id": "b"}),
            "nodes[a].depends_on",
            "names a node twice",
        ),
        (
            {"name": "d", "nodes": [{"id": "a"}]},
            "nodes[a].handler",
            "needs exactly one of command, argv, python",
        ),
        (nodes({"id": "a", "python": "x:y"}), "nodes[a].handler", "needs exactly one"),
        (
            {"name": "d", "nodes": [{"id": "a", "python": "not a target"}]},
            "nodes[a].python",
            "must look like",
        ),
        (
            nodes({"id": "a", "trigger_rule": "all_good"}),
            "nodes[a].trigger_rule",
            "must be one of all_success",
        ),
        (nodes({"id": "a", "timeout": -1}), "nodes[a].timeout", "must be a number of seconds"),
        (nodes({"id": "a", "retries": 3}), "nodes[a].retries", "is not a node field"),
        (nodes({"id": "a b"}), "nodes[0].id", "must be 1-100 characters"),
        (
            nodes({"id": "a"}, {"id": "b", "condition": {"field": "a.result.x", "equals": 1}}),
            "nodes[b].condition.field",
            "'a' is not one",
        ),
        (
            nodes(
                {"id": "a"},
                {"id": "b", "depends_on": ["a"], "condition": {"field": "a.output", "equals": 1}},
            ),
            "nodes[b].condition.field",
            "must look like node.result",
        ),
        (
            nodes(
                {"id": "a"},
                {"id": "b", "depends_on": ["a"], "condition": {"field": "a.result", "is": 1}},
            ),
            "nodes[b].condition",
            "needs exactly one of equals, not_equals, in, exists",
        ),
        (
            nodes(
                {"id": "a"},
                {"id": "b", "depends_on": ["a"], "condition": {"field": "a.result", "in": 1}},
            ),
            "nodes[b].condition.in",
            "must be a list",
        ),
        (
            {"name": "d", "failure_policy": "panic", "nodes": [{"id": "a", "command": "true"}]},
            "failure_policy",
            "must be one of skip_downstream, fail_all, continue",
        ),
        (
            {
                "name": "d",
                "schedule": {"cron": "61 * * * *"},
                "nodes": [{"id": "a", "command": "true"}],
            },
            "schedule",
            "minute 61 is out of range 0-59",
        ),
        (
            {
                "name": "d",
                "schedule": {"cron": "@daily", "interval": "1h"},
                "nodes": [{"id": "a", "command": "true"}],
            },
            "schedule",
            "exactly one of cron, interval, once",
        ),
        ({"name": "d", "nodes": []}, "nodes", "must be a non-empty list"),
        ({"nodes": [{"id": "a", "command": "true"}]}, "name", "must be 1-99 characters"),
        ({"name": "d", "node": []}, "node", "is not a DAG field"),
        (
            {"name": "d", "description": 7, "nodes": [{"id": "a", "command": "true"}]},
            "description",
            "must be a string",
        ),
        (
            {"name": "d", "params": [1], "nodes": [{"id": "a", "command": "true"}]},
            "params",
            "must be a JSON object",
        ),
        (
            {
                "name": "d",
                "schedule": {"cron": "@daily", "timezone": "Mars/Base"},
                "nodes": [{"id": "a", "command": "true"}],
            },
            "schedule.timezone",
            "is not an IANA time zone",
        ),
    ],
)
def test_errors_name_the_node_and_the_field(data, field, words):
    with pytest.raises(ValidationError) as caught:
        dag.parse(data)
    assert caught.value.field == field and words in str(caught.value), str(caught.value)
    assert (
        isinstance(caught.value, dag.DagErrors) and caught.value.problems[0].line is None
    )  # plain data: no lines


def test_a_cycle_is_reported_with_its_path():
    data = nodes(
        {"id": "start"},
        {"id": "a", "depends_on": ["start", "c"]},
        {"id": "b", "depends_on": ["a"]},
        {"id": "c", "depends_on": ["b"]},
        {"id": "after", "depends_on": ["c"]},
    )
    with pytest.raises(ValidationError) as caught:
        dag.parse(data)
    assert (
        str(caught.value)
        == "DAG definition: 1 problem\n  nodes[a].depends_on: 'a -> b -> c -> a' is a cycle"
    )
    assert caught.value.field == "nodes[a].depends_on"


def test_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: d\nnodes:\n  - id: a\n    command: echo a: b\n")
    with pytest.raises(
        ValidationError, match="is not valid YAML or JSON at line 4, column 20"
    ) as caught:
        dag.load(path)
    assert [(p.field, p.line) for p in caught.value.problems] == [("file", 4)]
    assert str(caught.value).startswith(f"{path}: 1 problem\n  line 4: file: ")


# Three problems in three nodes; a fourth node with a bad dependency list; line numbers
# below are counted by hand.
THREE_PROBLEMS = """\
# nightly, with mistakes
name: nightly-etl
schedule: {cron: "0 2 * * *", timezone: Europe/Berlin}
nodes:
  - id: extract_a
    command: echo a
    timeout: -5
  - id: extract_b
    command: echo b
  - id: merge
    command: echo merging
    depends_on:
      - extract_a
      - extract_c
  - id: deploy
    command: echo deploying
    depends_on: [merge]
    trigger_rule: always
"""


def test_a_file_reports_every_problem_with_its_line():
    with pytest.raises(dag.DagErrors) as caught:
        dag.load("examples/x.yaml", THREE_PROBLEMS)
    problems = caught.value.problems
    assert [(p.line, p.field, p.value) for p in problems] == [
        (7, "nodes[extract_a].timeout", -5),
        (12, "nodes[merge].depends_on", "extract_c"),
        (18, "nodes[deploy].trigger_rule", "always"),
    ]
    assert str(caught.value).splitlines() == [
        "examples/x.yaml: 3 problems",
        "  line 7: nodes[extract_a].timeout: -5 must be a number of seconds from above 0 to 3.16224e+07",
        "  line 12: nodes[merge].depends_on: 'extract_c' is not a node of this DAG",
        "  line 18: nodes[deploy].trigger_rule: 'always' must be one of all_success, all_done, all_failed, "
        "one_success, one_failed, none_failed, none_failed_min_one_success",
    ]
    # still a ValidationError carrying the first problem, for callers that catch one
    assert isinstance(caught.value, ValidationError)
    assert (caught.value.field, caught.value.value) == ("nodes[extract_a].timeout", -5)


def test_a_json_file_names_the_line_of_an_unknown_dependency(tmp_path):
    path = tmp_path / "docs.json"
    path.write_text(
        "{\n"
        '  "name": "docs",\n'
        '  "nodes": [\n'
        '    {"id": "classify", "command": "echo"},\n'
        '    {"id": "archive", "command": "echo archived",\n'
        '     "depends_on": ["clasify"]}\n'
        "  ]\n"
        "}\n"
    )
    with pytest.raises(dag.DagErrors) as caught:
        dag.load(path)
    assert [str(p) for p in caught.value.problems] == [
        "line 6: nodes[archive].depends_on: 'clasify' is not a node of this DAG"
    ]
    assert str(caught.value).splitlines()[0] == f"{path}: 1 problem"


def test_lines_fall_back_to_the_node_then_the_top_level_key():
    text = (
        "name: d\n"  # 1
        "description: [not, text]\n"  # 2
        "params: 3\n"  # 3
        "nodes:\n"  # 4
        "  - id: a\n"  # 5: no handler -> the node's line
        "  - {id: a, command: x}\n"  # 6: duplicate id -> its id key
        "  - 42\n"  # 7: not a mapping -> the item's line
        "  - id: b c\n"  # 8
        "    command: x\n"  # 9
        "    condition: {field: a.output, equals: 1}\n"
    )  # 10: condition.field
    with pytest.raises(dag.DagErrors) as caught:
        dag.load("f.yaml", text)
    assert [(p.line, p.field) for p in caught.value.problems] == [
        (2, "description"),
        (3, "params"),
        (5, "nodes[a].handler"),
        (6, "nodes[a].id"),
        (7, "nodes[2]"),
        (8, "nodes[3].id"),
        (10, "nodes[3].condition.field"),
    ]


def test_a_bad_node_hides_nothing():
    """Each node, and each task field of a node, is reported on its own; the top-level
    fields too."""
    data = {
        "name": "not a name!",
        "failure_policy": "panic",
        "schedule": {"interval": "never"},
        "nodes": [
            {
                "id": "a",
                "command": "true",
                "timeout": -1,
                "priority": 11,
                "queue": "no way",
                "retries": 3,
            },
            {"id": "b", "argv": "not a list", "depends_on": ["a", "a"]},
            {"id": "c", "command": "true", "python": "m:f", "condition": {"field": "b.result"}},
        ],
    }
    with pytest.raises(dag.DagErrors) as caught:
        dag.parse(data)
    assert [p.field for p in caught.value.problems] == [
        "name",
        "failure_policy",
        "schedule",
        "nodes[a].retries",
        "nodes[a].timeout",
        "nodes[a].priority",
        "nodes[a].queue",
        "nodes[b].depends_on",
        "nodes[b].argv",
        "nodes[c].handler",
        "nodes[c].condition",
    ]
    assert str(caught.value).startswith(
        "DAG definition: 11 problems\n  name: 'not a name!' must be 1-99"
    )


def test_graph_checks_wait_for_every_dependency_to_name_a_node():
    """A cycle or a condition is judged only on a sound graph: with an unknown dependency
    the cycle a -> b -> a is not reported; once it is fixed, the cycle and the condition are."""
    data = nodes(
        {"id": "a", "depends_on": ["b"]},
        {"id": "b", "depends_on": ["a"]},
        {"id": "c", "depends_on": ["ghost"]},
        {"id": "d", "condition": {"field": "a.result", "exists": True}},
    )
    with pytest.raises(dag.DagErrors) as caught:
        dag.parse(data)
    assert [str(p) for p in caught.value.problems] == [
        "nodes[c].depends_on: 'ghost' is not a node of this DAG"
    ]
    data["nodes"][2]["depends_on"] = ["a"]
    with pytest.raises(dag.DagErrors) as caught:
        dag.parse(data)
    assert [str(p) for p in caught.value.problems] == [
        "nodes[a].depends_on: 'a -> b -> a' is a cycle",
        "nodes[d].condition.field: 'a.result' must name a node in depends_on of 'd' ('a' is not one): "
        "the condition is tested when that node has ended",
    ]


def test_a_condition_must_name_a_direct_upstream_node():
    """An eager rule (one_success) may decide before an indirect upstream node has ended; a
    condition names a node in depends_on, whose end always re-decides the node."""
    data = nodes(
        {"id": "a"},
        {"id": "b", "depends_on": ["a"]},
        {"id": "c", "depends_on": ["b"], "condition": {"field": "a.result.x", "equals": 1}},
    )
    with pytest.raises(
        dag.DagErrors,
        match=r"nodes\[c\].condition.field: 'a.result.x' must name a node in "
        "depends_on of 'c'",
    ):
        dag.parse(data)
    data["nodes"][2]["depends_on"] = ["a", "b"]
    assert dag.parse(data).nodes["c"].condition.node == "a"


def test_nan_in_a_json_file_is_refused_not_read_as_text():
    with pytest.raises(dag.DagErrors, match="is not valid JSON: NaN is not a JSON value"):
        dag.load(
            "x.json", '{"name": "x", "nodes": [{"id": "a", "command": "true", "timeout": NaN}]}'
        )


def test_params_null_is_no_params_for_the_dag_and_for_a_node():
    d = dag.parse(
        {"name": "x", "params": None, "nodes": [{"id": "a", "command": "true", "params": None}]}
    )
    assert d.params == {} and d.nodes["a"].task.params == {}


def test_dag_validate_prints_every_problem_and_exits_1(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "pgsched.cli.root.setup_logging", lambda *args: None
    )  # keep the session's log handlers
    path = tmp_path / "x.yaml"
    path.write_text(THREE_PROBLEMS)
    result = CliRunner().invoke(main, ["dag", "validate", str(path)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == f"Error: {path}: 3 problems"
    assert [line.split(":")[0] for line in lines[1:]] == ["  line 7", "  line 12", "  line 18"]


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
    assert (
        len(big.order) == 10_000
        and len(big.levels) == depth
        and all(len(lv) == width for lv in big.levels)
    )
    position = {n: i for i, n in enumerate(big.order)}
    assert all(position[up] < position[n.id] for n in big.nodes.values() for up in n.depends_on)


U = dag.Upstream


@pytest.mark.parametrize(
    ("rule", "up", "expected"),
    [
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
    ],
)
def test_trigger_rules_decide_as_airflow(rule, up, expected):
    assert dag.decide(rule, up) == expected
    assert up.done <= up.total


@pytest.mark.parametrize(
    ("rule", "up", "expected"),
    [
        ("all_success", U(2, failed=1), "wait"),
        ("all_success", U(2, failed=1, succeeded=1), "run"),
        ("none_failed", U(2, failed=2), "run"),
        ("none_failed_min_one_success", U(2, failed=2), "run"),  # a failure counts as a success
        ("none_failed_min_one_success", U(2, skipped=2), "skipped"),
        ("none_failed_min_one_success", U(2, failed=1, succeeded=1), "run"),
        (
            "all_success",
            U(2, failed=1, skipped=1),
            "skipped",
        ),  # skips still skip: branches stay not taken
        ("one_failed", U(2, failed=1), "run"),  # rules about failures are unchanged
        ("all_failed", U(2, failed=1, succeeded=1), "skipped"),
    ],
)
def test_continue_lets_downstream_run_regardless(rule, up, expected):
    assert dag.decide(rule, up, "continue") == expected


def test_decide_refuses_unknown_names():
    with pytest.raises(ValueError, match="trigger rule 'always'"):
        dag.decide("always", U(1))
    with pytest.raises(ValueError, match="failure policy 'ignore'"):
        dag.decide("all_success", U(1), "ignore")


def test_a_command_yaml_reads_as_a_boolean_says_to_quote_it():
    with pytest.raises(dag.DagErrors) as caught:
        dag.load("x.yaml", "name: x\nnodes:\n  - id: a\n    command: true\n")
    assert [(p.field, p.line) for p in caught.value.problems] == [("nodes[a].command", 4)]
    assert "must be text, not bool (in YAML, quote commands such as true" in str(caught.value)
