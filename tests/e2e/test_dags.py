"""DAGs end to end: the example files applied with the CLI, run by real worker
processes, with node states, order and results asserted in the database; and a worker
SIGKILLed in the middle of a 50-node run."""

from __future__ import annotations

import json
import os
import signal
import tempfile

from ..helpers import REPO, cli, sessions_ended, wait_until

EXAMPLES = REPO / "examples"


def run_of(sql, run_id: int) -> dict:
    return sql.execute("SELECT * FROM pgsched.dag_run WHERE id = %s", [run_id]).fetchone()


def nodes_of(sql, run_id: int) -> dict[str, dict]:
    return {
        r["node_id"]: r
        for r in sql.execute("SELECT * FROM pgsched.dag_node_run WHERE run_id = %s", [run_id])
    }


def finished_run(sql, run_id: int, timeout: float = 60) -> dict:
    return wait_until(
        lambda: (r := run_of(sql, run_id))["finished_at"] and r,
        timeout=timeout,
        message=f"DAG run {run_id} to end",
    )


def trigger(dsn: str, name: str, *params: str) -> int:
    return json.loads(cli(dsn, "dag", "trigger", name, *params, "--json").stdout)["run_id"]


def test_the_etl_pipeline_runs_extracts_in_parallel_then_merge_train_deploy(dsn, sql, start):
    out = cli(dsn, "dag", "apply", str(EXAMPLES / "dags" / "etl.yaml")).stdout
    assert out.splitlines()[0] == "nightly-etl: created (5 new node(s))"
    assert cli(dsn, "dag", "apply", str(EXAMPLES / "dags" / "etl.yaml")).stdout.startswith(
        "nightly-etl: unchanged (5 unchanged node(s))"
    )
    start("worker", "--poll-interval", "0.5", "--concurrency", "4")
    run_id = trigger(dsn, "nightly-etl")
    run = finished_run(sql, run_id)
    assert run["state"] == "succeeded"
    nodes = nodes_of(sql, run_id)
    assert {n: r["state"] for n, r in nodes.items()} == dict.fromkeys(
        ["extract_a", "extract_b", "merge", "train", "deploy"], "succeeded"
    )
    # merge started only after both extracts had finished; then train, then deploy
    assert nodes["merge"]["started_at"] >= max(
        nodes["extract_a"]["finished_at"], nodes["extract_b"]["finished_at"]
    )
    assert nodes["train"]["started_at"] >= nodes["merge"]["finished_at"]
    assert nodes["deploy"]["started_at"] >= nodes["train"]["finished_at"]
    # a command's result is its last line of output, and merge received both extracts'
    assert nodes["extract_a"]["result"] == "extracted 120 rows from A"
    params = sql.execute(
        "SELECT params FROM pgsched.execution_history WHERE id = %s",
        [nodes["merge"]["execution_id"]],
    ).fetchone()["params"]
    assert params["upstream"] == {
        "extract_a": "extracted 120 rows from A",
        "extract_b": "extracted 80 rows from B",
    }
    shown = cli(dsn, "dag", "run", "show", str(run_id)).stdout
    assert f"DAG run {run_id} of nightly-etl: succeeded" in shown.splitlines()[0]
    assert "└─ merge" in shown and "also after extract_a" in shown
    listed = json.loads(cli(dsn, "dag", "runs", "nightly-etl", "--json").stdout)
    assert [(r["id"], r["state"], r["node_states"]) for r in listed] == [
        (run_id, "succeeded", {"succeeded": 5})
    ]


def test_the_document_example_takes_the_branch_its_classifier_chose(dsn, sql, start):
    cli(dsn, "dag", "apply", str(EXAMPLES / "dags" / "documents.json"))
    invoice_run = trigger(dsn, "documents")  # the DAG's default document is an invoice
    # classify waits on the queue 'examples', which no worker serves yet: status says so
    assert (
        "warning: queue 'examples' of tenant 'default' has ready executions and no running "
        "worker serves it" in cli(dsn, "status").stdout
    )
    start(
        "worker",
        "--poll-interval",
        "0.5",
        "--queue",
        "default",
        "--queue",
        "examples",
        "--pythonpath",
        str(EXAMPLES),
    )
    receipt_run = trigger(dsn, "documents", "--params", '{"document": "receipt-77.jpg"}')
    assert finished_run(sql, invoice_run)["state"] == "succeeded"
    assert finished_run(sql, receipt_run)["state"] == "succeeded"
    nodes = nodes_of(sql, invoice_run)
    assert {n: r["state"] for n, r in nodes.items()} == {
        "classify": "succeeded",
        "invoice": "succeeded",
        "receipt": "skipped",
        "archive": "succeeded",
    }
    assert nodes["classify"]["result"] == {"type": "invoice", "document": "invoice-2025-0042.pdf"}
    assert nodes["invoice"]["result"] == {
        "booked": "invoice-2025-0042.pdf",
        "ledger": "accounts-payable",
    }
    assert (
        nodes["receipt"]["error"]
        == 'condition not met: {"in": ["receipt", "ticket"]} on classify.result.type'
    )
    nodes = nodes_of(sql, receipt_run)
    assert {n: r["state"] for n, r in nodes.items()} == {
        "classify": "succeeded",
        "invoice": "skipped",
        "receipt": "succeeded",
        "archive": "succeeded",
    }
    assert nodes["receipt"]["result"] == {"filed": "documents.receipt"}
    # a branch not taken is an outcome, not a failure: --failed-only finds nothing to re-run
    refused = cli(dsn, "dag", "rerun", str(receipt_run), "--failed-only", check=False)
    assert refused.returncode == 1 and "nothing to re-run" in refused.stderr
    # node tasks are listed only when asked for
    names = {t["name"] for t in json.loads(cli(dsn, "task", "list", "--json").stdout)}
    assert names == {"documents"}
    names = {
        t["name"] for t in json.loads(cli(dsn, "task", "list", "--dag-nodes", "--json").stdout)
    }
    assert names == {
        "documents",
        "documents.classify",
        "documents.invoice",
        "documents.receipt",
        "documents.archive",
    }


def test_a_failing_node_skips_its_downstream_and_rerun_failed_only_finishes_the_run(
    dsn, sql, start, tmp_path
):
    flag = tmp_path / "fixed"
    definition = tmp_path / "flaky.yaml"
    definition.write_text(f"""
name: flaky
nodes:
  - id: a
    command: echo 1
  - id: b
    command: test -e {flag} && echo 2
  - id: c
    command: echo 3
    depends_on: [a, b]
""")
    cli(dsn, "dag", "apply", str(definition))
    start("worker", "--poll-interval", "0.5")
    first = trigger(dsn, "flaky")
    assert finished_run(sql, first)["state"] == "partially_succeeded"
    assert {n: r["state"] for n, r in nodes_of(sql, first).items()} == {
        "a": "succeeded",
        "b": "failed",
        "c": "upstream_failed",
    }
    # the dead node is in the dead-letter queue, but is re-run through its DAG run
    dead = json.loads(cli(dsn, "dlq", "list", "--json").stdout)
    assert [d["task_name"] for d in dead] == ["flaky.b"]
    refused = cli(dsn, "dlq", "retry", str(dead[0]["id"]), check=False)
    assert refused.returncode == 1 and f"dag rerun {first} --failed-only" in refused.stderr
    flag.touch()
    again = json.loads(cli(dsn, "dag", "rerun", str(first), "--failed-only", "--json").stdout)[
        "run_id"
    ]
    assert finished_run(sql, again)["state"] == "succeeded"
    nodes = nodes_of(sql, again)
    assert nodes["a"]["kept"] and not nodes["b"]["kept"]
    assert nodes["a"]["execution_id"] == nodes_of(sql, first)["a"]["execution_id"]  # not run again
    assert sql.execute(
        "SELECT params FROM pgsched.execution_history WHERE id = %s", [nodes["c"]["execution_id"]]
    ).fetchone()["params"]["upstream"] == {"a": 1, "b": 2}


def test_cancel_kills_a_running_node_and_cancels_the_rest(dsn, sql, start, tmp_path):
    definition = tmp_path / "slow.json"
    definition.write_text(
        json.dumps(
            {
                "name": "slow",
                "nodes": [
                    {"id": "sleepy", "command": "sleep 30"},
                    {"id": "after", "command": "true", "depends_on": ["sleepy"]},
                ],
            }
        )
    )
    cli(dsn, "dag", "apply", str(definition))
    start("worker", "--poll-interval", "0.5")
    run_id = trigger(dsn, "slow")
    wait_until(
        lambda: "running" in cli(dsn, "dag", "run", "show", str(run_id)).stdout,
        message="sleepy running",
    )
    assert (
        cli(dsn, "dag", "cancel", str(run_id)).stdout.strip()
        == f"DAG run {run_id} cancelling: running nodes are being stopped"
    )
    run = finished_run(sql, run_id, timeout=10)
    assert run["state"] == "cancelled"
    assert {n: r["state"] for n, r in nodes_of(sql, run_id).items()} == {
        "sleepy": "cancelled",
        "after": "cancelled",
    }
    assert (run["finished_at"] - run["created_at"]).total_seconds() < 10


def test_a_worker_sigkilled_mid_run_leaves_a_50_node_run_that_still_completes_each_node_once(
    dsn, sql, start, tmp_path
):
    """Layers of 5 nodes, each depending on two of the layer before; every node appends its
    name to a file, so a node that ran twice would show twice."""
    ran = tmp_path / "ran.txt"
    nodes = []
    for layer in range(10):
        for i in range(5):
            ups = [f"n{layer - 1}_{i}", f"n{layer - 1}_{(i + 1) % 5}"] if layer else []
            nodes.append(
                {
                    "id": f"n{layer}_{i}",
                    "command": f"sleep 1; echo n{layer}_{i} >> {ran}",
                    "depends_on": ups,
                    "max_attempts": 2,
                    "retry_base": 0.2,
                }
            )
    (tmp_path / "big.json").write_text(json.dumps({"name": "big", "nodes": nodes}))
    cli(dsn, "dag", "apply", str(tmp_path / "big.json"))
    start("scheduler", "--max-sleep", "0.5")
    worker = start(
        "worker", "--poll-interval", "0.2", "--heartbeat-interval", "0.5", "--concurrency", "5"
    )
    run_id = trigger(dsn, "big")

    def running_nodes() -> list[int]:
        return [
            r["execution_id"]
            for r in sql.execute(
                "SELECT n.execution_id FROM pgsched.dag_node_run n JOIN pgsched.execution e ON e.id = n.execution_id "
                "WHERE n.run_id = %s AND e.state = 'running'",
                [run_id],
            )
        ]

    # A layer's 5 nodes end together: after a dozen lines, wait for the next layer to be
    # running (the kill must come mid-layer, not in the gap while a layer is enqueued).
    # Each node runs 1 s, so the kill lands while they do even on a loaded machine (at
    # 0.3 s a layer once ended between the look and the kill, and nothing was lost)
    wait_until(
        lambda: ran.exists() and len(ran.read_text().split()) >= 12 and running_nodes(),
        timeout=60,
        message="a dozen nodes done and the next ones running",
    )
    worker.proc.send_signal(signal.SIGKILL)  # mid-layer: some nodes are running
    sessions_ended(sql, "pgsched worker")  # an outcome committed as it died is not 'running'
    killed_running = running_nodes()
    start("worker", "--poll-interval", "0.2", "--heartbeat-interval", "0.5", "--concurrency", "5")
    run = finished_run(sql, run_id, timeout=120)
    assert run["state"] == "succeeded"
    states = {n: r["state"] for n, r in nodes_of(sql, run_id).items()}
    assert states == {n["id"]: "succeeded" for n in nodes}
    # each node: one execution, ended succeeded, with exactly one successful attempt
    per_node = sql.execute(
        """
        SELECT h.id, h.state,
               (SELECT count(*) FROM pgsched.execution_attempt a WHERE a.execution_id = h.id
                  AND a.state = 'lost') AS lost_attempts,
               (SELECT count(*) FROM pgsched.execution_attempt a WHERE a.execution_id = h.id
                  AND a.state = 'succeeded') AS succeeded_attempts
          FROM pgsched.execution_history h WHERE h.dag_run_id = %s""",
        [run_id],
    ).fetchall()
    assert len(per_node) == 50
    assert all(r["state"] == "succeeded" and r["succeeded_attempts"] == 1 for r in per_node)
    lost = {
        r["id"] for r in per_node if r["lost_attempts"] == 1
    }  # its first loss: recorded, not counted
    assert killed_running and lost >= set(killed_running)
    # killed commands may have written their line before the kill; all others exactly once
    lines = ran.read_text().split()
    assert sorted(set(lines)) == sorted(n["id"] for n in nodes)
    twice = {name for name in lines if lines.count(name) > 1}
    assert len(twice) <= len(killed_running)


def test_results_too_big_for_the_environment_reach_a_command_in_a_file(dsn, sql, start, tmp_path):
    """Three 60 KB results make 180 KB of params: more than Linux allows in one variable."""
    big = "python3 -c \"import json; print(json.dumps({'part': '%s', 'pad': 'x' * 60000}))\""
    nodes = [{"id": p, "command": big % p} for p in ("a", "b", "c")]
    nodes.append(
        {
            "id": "join",
            "depends_on": ["a", "b", "c"],
            "command": 'test -z "$PGSCHED_PARAMS" && python3 -c "import json, os; '
            "p = json.load(open(os.environ['PGSCHED_PARAMS_FILE'])); "
            "print(json.dumps(sorted(r['part'] for r in p['upstream'].values())))\"",
        }
    )
    (tmp_path / "wide.json").write_text(json.dumps({"name": "wide", "nodes": nodes}))
    cli(dsn, "dag", "apply", str(tmp_path / "wide.json"))
    start("worker", "--poll-interval", "0.5", "--concurrency", "3")
    run_id = trigger(dsn, "wide")
    assert finished_run(sql, run_id)["state"] == "succeeded"
    join = nodes_of(sql, run_id)["join"]
    assert join["result"] == ["a", "b", "c"]
    leftover = [p for p in os.listdir(tempfile.gettempdir()) if p.startswith("pgsched-params-")]
    assert leftover == []  # the file is removed when the command ends


def test_under_continue_a_one_success_node_downstream_of_failed_nodes_runs(
    dsn, sql, start, tmp_path
):
    """Both upstream nodes of ``report`` (one_success) fail; under ``continue`` a failure
    counts as a success, so ``report`` runs (as soon as the first failure, as the rule is
    eager) and so does the node after it. ``slow`` fails last, after report has started."""
    definition = {
        "name": "cont",
        "failure_policy": "continue",
        "nodes": [
            {"id": "quick", "command": "exit 3"},
            {"id": "slow", "command": "sleep 5; exit 4"},
            {
                "id": "report",
                "command": "echo reported",
                "depends_on": ["quick", "slow"],
                "trigger_rule": "one_success",
            },
            {"id": "after", "command": "echo after", "depends_on": ["report"]},
        ],
    }
    (tmp_path / "cont.json").write_text(json.dumps(definition))
    cli(dsn, "dag", "apply", str(tmp_path / "cont.json"))
    start("worker", "--poll-interval", "0.5", "--concurrency", "3")
    run_id = trigger(dsn, "cont")
    assert finished_run(sql, run_id)["state"] == "partially_succeeded"
    nodes = nodes_of(sql, run_id)
    assert {n: r["state"] for n, r in nodes.items()} == {
        "quick": "failed",
        "slow": "failed",
        "report": "succeeded",
        "after": "succeeded",
    }
    assert (nodes["report"]["result"], nodes["after"]["result"]) == ("reported", "after")
    report_started = nodes["report"]["started_at"]
    assert nodes["quick"]["finished_at"] <= report_started < nodes["slow"]["finished_at"]
    # a failed node passes no result: report's upstream holds nothing
    assert (
        sql.execute(
            "SELECT params FROM pgsched.execution_history WHERE id = %s",
            [nodes["report"]["execution_id"]],
        ).fetchone()["params"]["upstream"]
        == {}
    )
