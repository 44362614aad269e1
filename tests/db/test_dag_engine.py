"""The DAG engine of migration 0003 on a real database: runs, trigger rules, failure
policies, conditions, data between nodes, cancel, rerun, scheduled runs, rescue and
apply. Node executions are claimed and finished through the worker's own queries
(execution_claim, execution_finish), so the engine is driven exactly as workers drive it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pgsched import App, scheduler
from pgsched import dag as dag_module
from pgsched.app import resolve
from pgsched.errors import PgschedError, ValidationError
from pgsched.stores import dagruns, dags, tasks
from pgsched.taskspec import TaskSpec
from pgsched.worker.claims import TaskDefinitions

from ..helpers import wait_until
from .test_claim import register

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)

ETL = {
    "name": "etl",
    "nodes": [
        {"id": "extract_a", "command": "true"},
        {"id": "extract_b", "command": "true"},
        {"id": "merge", "command": "true", "depends_on": ["extract_a", "extract_b"]},
        {"id": "train", "command": "true", "depends_on": ["merge"]},
        {"id": "deploy", "command": "true", "depends_on": ["train"]},
    ],
}


def apply(db, data, **kw):
    return dags.apply(db, dag_module.parse(data), **kw)


class Driver:
    """Plays the workers: claims node executions and finishes them with chosen outcomes."""

    def __init__(self, db, sql, claim=None):
        """``claim(worker_id, now)``: how to claim the ready executions (rows with ``id``
        and ``lease_id``), when not by today's claim on ``db`` (test_sql_privileges at 0016:
        today's claim calls a function of migration 0021)."""
        self.db, self.sql, self.claim = db, sql, claim
        # a plain row, not worker_register: test_sql_privileges drives a database migrated
        # only to 0016 too, which lacks worker.tenants (0020)
        self.worker = sql.execute(
            "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency) "
            "VALUES ('driver', 'testhost', 4242, '{default}', 4) RETURNING id"
        ).fetchone()["id"]
        self.claimed: dict[int, dict] = {}

    def nodes(self, run_id):
        return {
            r["node_id"]: r
            for r in self.sql.execute(
                "SELECT * FROM pgsched.dag_node_run WHERE run_id = %s", [run_id]
            )
        }

    def states(self, run_id):
        return {n: r["state"] for n, r in self.nodes(run_id).items()}

    def run_state(self, run_id):
        return self.sql.execute(
            "SELECT state FROM pgsched.dag_run WHERE id = %s", [run_id]
        ).fetchone()["state"]

    def claim_all(self):
        # At the server's clock_timestamp(), which node executions are stamped with when
        # queued: the claim's default, now(), stands still in the rolled-back tier.
        now = self.sql.execute("SELECT clock_timestamp() AS now").fetchone()["now"]
        rows = (
            self.claim(self.worker, now)
            if self.claim
            else TaskDefinitions().claim(
                self.db, queues=["default"], limit=1000, worker_id=self.worker, now=now
            )
        )
        for row in rows:
            self.claimed[row["id"]] = row
        return self.claimed

    def execution(self, run_id, node):
        ident = self.nodes(run_id)[node]["execution_id"]
        assert ident is not None, f"{node} has no execution"
        return ident

    def finish(self, run_id, node, state="succeeded", result=None, error=None):
        """End the node's execution as a worker would: 'succeeded', or 'dead' (a failure
        whose attempts are used up), 'cancelled', 'timed_out'."""
        ident = self.execution(run_id, node)
        if ident not in self.claimed:
            self.claim_all()
        row = self.claimed.pop(ident)
        done = self.db.exec(
            "execution_finish",
            id=ident,
            lease_id=row["lease_id"],
            state=state,
            finished_at=datetime.now(UTC),
            exit_code=0 if state == "succeeded" else 1,
            error=error,
            result=Jsonb(result) if result is not None else None,
        )
        assert done == 1
        return row

    def params(self, run_id, node):
        ident = self.execution(run_id, node)
        return self.sql.execute(
            "SELECT params FROM pgsched.execution_all WHERE id = %s", [ident]
        ).fetchone()["params"]


@pytest.fixture
def drive(db, sql):
    return Driver(db, sql)


# --- runs, order and data -------------------------------------------------------------


def test_etl_runs_extracts_in_parallel_then_merge_train_deploy_with_results_passed(db, sql, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl", params={"day": "2025-01-15"})
    assert drive.states(run) == {
        "extract_a": "queued",
        "extract_b": "queued",
        "merge": "waiting",
        "train": "waiting",
        "deploy": "waiting",
    }
    drive.finish(run, "extract_a", result={"rows": 120})
    assert drive.states(run)["merge"] == "waiting"  # one extract is not enough
    drive.finish(run, "extract_b", result={"rows": 80})
    assert drive.states(run)["merge"] == "queued"
    assert drive.params(run, "merge") == {
        "day": "2025-01-15",
        "upstream": {"extract_a": {"rows": 120}, "extract_b": {"rows": 80}},
    }
    assert drive.params(run, "extract_a") == {"day": "2025-01-15"}  # roots get no "upstream"
    drive.finish(run, "merge", result="merged")
    assert drive.params(run, "train")["upstream"] == {"merge": "merged"}
    drive.finish(run, "train")
    assert drive.run_state(run) == "running"
    drive.finish(run, "deploy")
    assert set(drive.states(run).values()) == {"succeeded"}
    r = sql.execute("SELECT * FROM pgsched.dag_run WHERE id = %s", [run]).fetchone()
    assert (r["state"], r["remaining"], r["nodes"]) == ("succeeded", 0, 5)
    assert r["finished_at"] is not None
    nodes = drive.nodes(run)
    assert nodes["extract_a"]["result"] == {"rows": 120}
    # merge was queued only after both extracts had finished
    assert nodes["merge"]["queued_at"] >= max(
        nodes["extract_a"]["finished_at"], nodes["extract_b"]["finished_at"]
    )
    # node executions are ordinary executions of the node tasks, marked with the run
    hist = sql.execute(
        "SELECT t.name, h.trigger, h.dag_run_id FROM pgsched.execution_history h "
        "JOIN pgsched.task t ON t.id = h.task_id ORDER BY h.id"
    ).fetchall()
    assert [(h["name"], h["trigger"], h["dag_run_id"]) for h in hist][:2] == [
        ("etl.extract_a", "dag", run),
        ("etl.extract_b", "dag", run),
    ]


def test_the_run_closes_and_notifies_in_the_transaction_of_the_last_node(db, sql, drive, dsn):
    apply(db, {"name": "one", "nodes": [{"id": "only", "command": "true"}]})
    run = dagruns.trigger(db, "one")
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_dag")
        drive.finish(run, "only")
        note = next(listener.notifies(timeout=5, stop_after=1))
    assert note.payload == f"{run} succeeded"


# --- failure policies -----------------------------------------------------------------


def test_skip_downstream_skips_what_depends_on_a_failure_and_finishes_the_rest(db, drive):
    apply(
        db,
        ETL
        | {
            "nodes": ETL["nodes"]
            + [{"id": "report", "command": "true", "depends_on": ["extract_b"]}]
        },
    )
    run = dagruns.trigger(db, "etl")
    drive.finish(run, "extract_a", "dead", error="boom")
    assert drive.states(run) == {
        "extract_a": "failed",
        "extract_b": "queued",
        "merge": "upstream_failed",
        "train": "upstream_failed",
        "deploy": "upstream_failed",
        "report": "waiting",
    }
    assert drive.run_state(run) == "running"
    drive.finish(run, "extract_b")
    drive.finish(run, "report")
    assert drive.states(run)["report"] == "succeeded"
    assert drive.run_state(run) == "partially_succeeded"
    assert drive.nodes(run)["extract_a"]["error"] == "boom"


def test_fail_all_cancels_pending_and_running_nodes_and_fails_the_run(db, sql, drive):
    apply(
        db,
        ETL
        | {
            "failure_policy": "fail_all",
            "nodes": ETL["nodes"] + [{"id": "extract_c", "command": "true"}],
        },
    )
    run = dagruns.trigger(db, "etl")
    drive.claim_all()  # all three extracts running
    b = drive.execution(run, "extract_b")
    sql.execute(
        "UPDATE pgsched.execution SET state = 'pending', worker_id = NULL WHERE id = %s", [b]
    )  # not started
    drive.claimed.pop(b)
    drive.finish(run, "extract_a", "timed_out")
    states = drive.states(run)
    assert states == {
        "extract_a": "failed",
        "extract_b": "cancelled",
        "extract_c": "queued",
        "merge": "cancelled",
        "train": "cancelled",
        "deploy": "cancelled",
    }
    assert drive.run_state(run) == "failing"  # extract_c is still running
    c = drive.execution(run, "extract_c")
    assert (
        sql.execute(
            "SELECT cancel_requested_at FROM pgsched.execution WHERE id = %s", [c]
        ).fetchone()["cancel_requested_at"]
        is not None
    )
    assert (
        sql.execute("SELECT state FROM pgsched.execution_history WHERE id = %s", [b]).fetchone()[
            "state"
        ]
        == "cancelled"
    )
    drive.finish(run, "extract_c", "cancelled")  # its worker killed it
    assert drive.states(run)["extract_c"] == "cancelled"
    r = sql.execute(
        "SELECT state, error, remaining FROM pgsched.dag_run WHERE id = %s", [run]
    ).fetchone()
    assert (r["state"], r["remaining"]) == ("failed", 0)
    assert "extract_a timed" not in r["error"] and "node extract_a failed" in r["error"]


def test_continue_runs_downstream_of_a_failure(db, drive):
    apply(db, ETL | {"failure_policy": "continue"})
    run = dagruns.trigger(db, "etl")
    drive.finish(run, "extract_a", "dead")
    drive.finish(run, "extract_b", result=2)
    assert drive.states(run)["merge"] == "queued"
    assert drive.params(run, "merge")["upstream"] == {
        "extract_b": 2
    }  # only results of nodes that succeeded
    for node in ("merge", "train", "deploy"):
        drive.finish(run, node)
    assert drive.states(run) == {
        "extract_a": "failed",
        "extract_b": "succeeded",
        "merge": "succeeded",
        "train": "succeeded",
        "deploy": "succeeded",
    }
    assert drive.run_state(run) == "partially_succeeded"


def test_a_run_where_nothing_succeeds_is_failed(db, drive):
    apply(
        db,
        {
            "name": "solo",
            "nodes": [
                {"id": "a", "command": "false"},
                {"id": "b", "command": "true", "depends_on": ["a"]},
            ],
        },
    )
    run = dagruns.trigger(db, "solo")
    drive.finish(run, "a", "dead")
    assert drive.states(run) == {"a": "failed", "b": "upstream_failed"}
    assert drive.run_state(run) == "failed"


# --- trigger rules ----------------------------------------------------------------------
# One graph per rule: root r succeeds with {"kind": "x"}; from it, ok succeeds, bad fails,
# skip is skipped (its condition is false). Targets join two of them with the rule; each
# target has a follower (all_success) to show what propagates.

PAIRS = {
    "t_ok_ok": ["ok", "ok2"],
    "t_ok_bad": ["ok", "bad"],
    "t_ok_skip": ["ok", "skip"],
    "t_bad_bad": ["bad", "bad2"],
    "t_bad_skip": ["bad", "skip"],
    "t_skip_skip": ["skip", "skip2"],
}

# Expected target states per rule, written out by hand from Airflow's TriggerRule docs
# (skip_downstream policy). 'run' means it ran (and succeeded here).
EXPECTED = {
    # t_bad_skip: skip settles (with r) before bad fails, and all_success decides at once
    "all_success": {
        "t_ok_ok": "succeeded",
        "t_ok_bad": "upstream_failed",
        "t_ok_skip": "skipped",
        "t_bad_bad": "upstream_failed",
        "t_bad_skip": "skipped",
        "t_skip_skip": "skipped",
    },
    "all_done": {
        "t_ok_ok": "succeeded",
        "t_ok_bad": "succeeded",
        "t_ok_skip": "succeeded",
        "t_bad_bad": "succeeded",
        "t_bad_skip": "succeeded",
        "t_skip_skip": "succeeded",
    },
    "all_failed": {
        "t_ok_ok": "skipped",
        "t_ok_bad": "skipped",
        "t_ok_skip": "skipped",
        "t_bad_bad": "succeeded",
        "t_bad_skip": "skipped",
        "t_skip_skip": "skipped",
    },
    "one_success": {
        "t_ok_ok": "succeeded",
        "t_ok_bad": "succeeded",
        "t_ok_skip": "succeeded",
        "t_bad_bad": "upstream_failed",
        "t_bad_skip": "upstream_failed",
        "t_skip_skip": "skipped",
    },
    "one_failed": {
        "t_ok_ok": "skipped",
        "t_ok_bad": "succeeded",
        "t_ok_skip": "skipped",
        "t_bad_bad": "succeeded",
        "t_bad_skip": "succeeded",
        "t_skip_skip": "skipped",
    },
    "none_failed": {
        "t_ok_ok": "succeeded",
        "t_ok_bad": "upstream_failed",
        "t_ok_skip": "succeeded",
        "t_bad_bad": "upstream_failed",
        "t_bad_skip": "upstream_failed",
        "t_skip_skip": "succeeded",
    },
    "none_failed_min_one_success": {
        "t_ok_ok": "succeeded",
        "t_ok_bad": "upstream_failed",
        "t_ok_skip": "succeeded",
        "t_bad_bad": "upstream_failed",
        "t_bad_skip": "upstream_failed",
        "t_skip_skip": "skipped",
    },
}
# What a follower (all_success) of each target ends as.
FOLLOWER = {"succeeded": "succeeded", "skipped": "skipped", "upstream_failed": "upstream_failed"}


def rule_graph(rule: str, policy: str = "skip_downstream") -> dict:
    nodes = [
        {"id": "r", "command": "true"},
        {"id": "ok", "command": "true", "depends_on": ["r"]},
        {"id": "ok2", "command": "true", "depends_on": ["r"]},
        {"id": "bad", "command": "false", "depends_on": ["r"]},
        {"id": "bad2", "command": "false", "depends_on": ["r"]},
    ]
    for s in ("skip", "skip2"):
        nodes.append(
            {
                "id": s,
                "command": "true",
                "depends_on": ["r"],
                "condition": {"field": "r.result.kind", "equals": "y"},
            }
        )
    for target, ups in PAIRS.items():
        nodes.append({"id": target, "command": "true", "depends_on": ups, "trigger_rule": rule})
        nodes.append({"id": "after_" + target, "command": "true", "depends_on": [target]})
    return {"name": f"rules-{rule}", "failure_policy": policy, "nodes": nodes}


def play(drive, run, fails=("bad", "bad2")):
    """Finish every queued node until the run ends: nodes in ``fails`` fail, r returns
    {"kind": "x"}, the rest succeed."""
    for _ in range(100):
        queued = [n for n, s in drive.states(run).items() if s == "queued"]
        if not queued:
            return
        for node in queued:
            drive.finish(
                run,
                node,
                "dead" if node in fails else "succeeded",
                result={"kind": "x"} if node == "r" else None,
            )
    raise AssertionError("the run did not end")


@pytest.mark.parametrize("rule", list(EXPECTED))
def test_trigger_rule_over_every_pair_of_upstream_outcomes(db, drive, rule):
    apply(db, rule_graph(rule))
    run = dagruns.trigger(db, f"rules-{rule}")
    play(drive, run)
    states = drive.states(run)
    assert {n: states[n] for n in ("r", "ok", "ok2", "bad", "bad2", "skip", "skip2")} == {
        "r": "succeeded",
        "ok": "succeeded",
        "ok2": "succeeded",
        "bad": "failed",
        "bad2": "failed",
        "skip": "skipped",
        "skip2": "skipped",
    }
    assert {t: states[t] for t in PAIRS} == EXPECTED[rule]
    assert {t: states["after_" + t] for t in PAIRS} == {
        t: FOLLOWER[s] for t, s in EXPECTED[rule].items()
    }
    assert drive.run_state(run) == "partially_succeeded"  # bad and bad2 failed, others succeeded
    assert drive.nodes(run)["skip"]["error"].startswith("condition not met")


@pytest.mark.parametrize("rule", list(EXPECTED))
def test_continue_policy_runs_every_rule_that_wants_success_once_upstream_is_done(db, drive, rule):
    apply(db, rule_graph(rule, "continue"))
    run = dagruns.trigger(db, f"rules-{rule}")
    play(drive, run)
    states = drive.states(run)
    expected = dict(EXPECTED[rule])
    if rule == "all_success":  # failures count as successes; skips still skip
        expected = {t: "skipped" if "skip" in t else "succeeded" for t in PAIRS}
    elif rule == "none_failed":
        expected = dict.fromkeys(PAIRS, "succeeded")
    elif rule in ("one_success", "none_failed_min_one_success"):  # a failure is a success
        expected = {t: "skipped" if t == "t_skip_skip" else "succeeded" for t in PAIRS}
    else:  # all_done, all_failed, one_failed do not wait for success: unchanged
        assert rule not in dag_module.SUCCESS_RULES
    assert {t: states[t] for t in PAIRS} == expected
    # under continue, followers (all_success) of a failed or skipped target: failures let
    # them run, a skipped target skips them
    assert {t: states["after_" + t] for t in PAIRS} == {
        t: "skipped" if s == "skipped" else "succeeded" for t, s in expected.items()
    }


def test_sql_trigger_rules_equal_the_python_reference_on_every_count(sql):
    """pgsched_internal.dag_decide_v1 against pgsched.dag.decide for every rule, policy and split of
    up to four upstream nodes across the four final states and 'not done yet'."""
    cases = []
    for total in range(5):
        for split in itertools.product(range(total + 1), repeat=4):
            if sum(split) <= total:
                cases.append((total, *split))
    rows = []
    for rule in dag_module.TRIGGER_RULES:
        for policy in dag_module.FAILURE_POLICIES:
            for case in cases:
                rows.append((rule, policy, *case))
    got = sql.execute(
        """SELECT pgsched_internal.dag_decide_v1(u.rule, u.policy, u.total, u.s, u.f, u.k, u.uf) AS d
                           FROM unnest(%s::text[], %s::text[], %s::int[], %s::int[], %s::int[], %s::int[], %s::int[])
                                WITH ORDINALITY AS u(rule, policy, total, s, f, k, uf, i) ORDER BY i""",
        [list(c) for c in zip(*rows, strict=True)],
    ).fetchall()
    expected = [
        dag_module.decide(r, dag_module.Upstream(t, s, f, k, uf), p)
        for r, p, t, s, f, k, uf in rows
    ]
    assert len(got) == len(rows) > 2500
    mismatches = [
        (row, g["d"], e) for row, g, e in zip(rows, got, expected, strict=True) if g["d"] != e
    ]
    assert mismatches == []


@pytest.mark.parametrize(
    "upstream, decision",
    [
        # (succeeded, failed, skipped, upstream_failed) of 3 upstream nodes
        ((0, 1, 0, 0), "run"),  # one failure counts as a success: runs at once
        ((0, 0, 0, 1), "run"),  # so does a node skipped for a failure further up
        ((0, 0, 1, 0), "wait"),  # a skip is not a success
        ((0, 0, 3, 0), "skipped"),  # all skipped: a branch not taken stays not taken
        ((0, 2, 1, 0), "run"),
    ],
)
def test_continue_makes_a_failure_count_as_a_success_for_one_success_in_sql_and_python(
    sql, upstream, decision
):
    s, f, k, uf = upstream
    got = sql.execute(
        "SELECT pgsched_internal.dag_decide_v1('one_success', 'continue', 3, %s, %s, %s, %s) AS d",
        [s, f, k, uf],
    ).fetchone()["d"]
    reference = dag_module.decide("one_success", dag_module.Upstream(3, s, f, k, uf), "continue")
    assert (got, reference) == (decision, decision)


def test_the_rules_that_wait_for_success_are_airflows():
    """Every rule but those that wait for failures (all_failed, one_failed) or for anything
    (all_done) waits for success, and so counts a failure as a success under continue."""
    not_for_success = {"all_failed", "one_failed", "all_done"}
    assert set(dag_module.SUCCESS_RULES) == set(dag_module.TRIGGER_RULES) - not_for_success


def test_an_unknown_trigger_rule_is_refused_by_name_in_sql(sql):
    with pytest.raises(
        psycopg.errors.InvalidParameterValue, match="trigger_rule: 'always' is not a trigger rule"
    ):
        sql.execute("SELECT pgsched_internal.dag_decide_v1('always', 'continue', 1, 0, 0, 0, 0)")


# --- conditions ---------------------------------------------------------------------------

DOCUMENTS = {
    "name": "documents",
    "nodes": [
        {"id": "classify", "command": "true"},
        {
            "id": "invoice",
            "command": "true",
            "depends_on": ["classify"],
            "condition": {"field": "classify.result.type", "equals": "invoice"},
        },
        {
            "id": "receipt",
            "command": "true",
            "depends_on": ["classify"],
            "condition": {"field": "classify.result.type", "in": ["receipt", "ticket"]},
        },
        {
            "id": "archive",
            "command": "true",
            "depends_on": ["invoice", "receipt"],
            "trigger_rule": "none_failed_min_one_success",
        },
    ],
}


@pytest.mark.parametrize(
    "kind, invoice, receipt, archive",
    [
        ("invoice", "succeeded", "skipped", "succeeded"),
        ("ticket", "skipped", "succeeded", "succeeded"),
        ("poem", "skipped", "skipped", "skipped"),
    ],
)
def test_a_condition_on_an_upstream_result_picks_the_branch(
    db, drive, kind, invoice, receipt, archive
):
    apply(db, DOCUMENTS)
    run = dagruns.trigger(db, "documents")
    drive.finish(run, "classify", result={"type": kind, "pages": 2})
    play(drive, run, fails=())
    assert drive.states(run) == {
        "classify": "succeeded",
        "invoice": invoice,
        "receipt": receipt,
        "archive": archive,
    }
    assert drive.run_state(run) == "succeeded"  # a branch not taken is not a failure
    if invoice == "succeeded":
        assert drive.params(run, "invoice")["upstream"] == {
            "classify": {"type": "invoice", "pages": 2}
        }


@pytest.mark.parametrize(
    "condition, result, holds",
    [
        ({"field": "a.result.x", "equals": 1}, {"x": 1}, True),
        ({"field": "a.result.x", "equals": 1}, {"x": 1.0}, True),
        ({"field": "a.result.x", "equals": "1"}, {"x": 1}, False),
        ({"field": "a.result.x", "equals": None}, {"x": None}, True),
        ({"field": "a.result.x", "equals": 1}, None, False),
        ({"field": "a.result.x.y", "equals": [1, 2]}, {"x": {"y": [1, 2]}}, True),
        ({"field": "a.result", "equals": "done"}, "done", True),
        ({"field": "a.result.x", "not_equals": 1}, {"x": 2}, True),
        ({"field": "a.result.x", "not_equals": 1}, {}, True),
        ({"field": "a.result.x", "not_equals": 1}, {"x": 1}, False),
        ({"field": "a.result.x", "in": [1, "b"]}, {"x": "b"}, True),
        ({"field": "a.result.x", "in": [{"k": 1}]}, {"x": {"k": 1, "j": 2}}, False),
        ({"field": "a.result.x", "in": [1]}, {}, False),
        ({"field": "a.result.x", "exists": True}, {"x": 0}, True),
        ({"field": "a.result.x", "exists": True}, {"x": None}, False),
        ({"field": "a.result.x", "exists": False}, {"y": 1}, True),
        ({"field": "a.result.x", "exists": False}, None, True),
    ],
)
def test_condition_tests(sql, condition, result, holds):
    row = sql.execute(
        "SELECT pgsched_internal.dag_condition_v1(%s, %s) AS ok",
        [Jsonb(condition), Jsonb(result) if result is not None else None],
    ).fetchone()
    assert row["ok"] is holds


# --- cancel and rerun -----------------------------------------------------------------------


def test_cancel_stops_a_run_and_it_ends_cancelled_when_the_last_node_stops(db, sql, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    drive.finish(run, "extract_a")
    drive.claim_all()  # extract_b running
    assert dagruns.cancel(db, run) == "cancelling"
    assert drive.states(run) == {
        "extract_a": "succeeded",
        "extract_b": "queued",
        "merge": "cancelled",
        "train": "cancelled",
        "deploy": "cancelled",
    }
    drive.finish(run, "extract_b", "cancelled")
    assert drive.run_state(run) == "cancelled"
    assert dagruns.cancel(db, run) == "finished"


def test_cancel_of_a_run_with_only_pending_nodes_ends_it_at_once(db, sql, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    assert dagruns.cancel(db, run) == "cancelled"
    assert set(drive.states(run).values()) == {"cancelled"}
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


@pytest.mark.clone("the leader opens connections of its own (db.dsn)")
def test_a_stopping_run_s_executions_that_a_worker_held_are_swept_by_the_leader(db, sql, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    a = drive.execution(run, "extract_a")
    with psycopg.connect(
        db.dsn, autocommit=False
    ) as holder:  # a worker in mid-retry holds extract_a
        holder.execute("SELECT 1 FROM pgsched.execution WHERE id = %s FOR UPDATE", [a])
        assert dagruns.cancel(db, run) == "cancelling"
        assert drive.states(run)["extract_a"] == "queued"
    assert scheduler.rescue(db) == []  # the sweep runs with rescue
    assert drive.states(run)["extract_a"] == "cancelled"
    assert drive.run_state(run) == "cancelled"


def test_rerun_failed_only_keeps_what_succeeded_and_passes_its_results(db, sql, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl", params={"day": 1})
    drive.finish(run, "extract_a", result={"rows": 1})
    drive.finish(run, "extract_b", "dead")
    assert drive.run_state(run) == "partially_succeeded"
    again = dagruns.rerun(db, run, failed_only=True)
    assert drive.states(again) == {
        "extract_a": "succeeded",
        "extract_b": "queued",
        "merge": "waiting",
        "train": "waiting",
        "deploy": "waiting",
    }
    kept = drive.nodes(again)["extract_a"]
    assert kept["kept"] and kept["execution_id"] == drive.nodes(run)["extract_a"]["execution_id"]
    drive.finish(again, "extract_b", result={"rows": 2})
    assert drive.params(again, "merge") == {
        "day": 1,
        "upstream": {"extract_a": {"rows": 1}, "extract_b": {"rows": 2}},
    }
    play(drive, again, fails=())
    assert drive.run_state(again) == "succeeded"
    r = sql.execute(
        "SELECT trigger, rerun_of, nodes FROM pgsched.dag_run WHERE id = %s", [again]
    ).fetchone()
    assert (r["trigger"], r["rerun_of"], r["nodes"]) == ("rerun", run, 5)
    with pytest.raises(PgschedError, match="nothing to re-run"):
        dagruns.rerun(db, again, failed_only=True)


def test_rerun_from_a_node_runs_it_and_its_downstream_only(db, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    play(drive, run, fails=())
    again = dagruns.rerun(db, run, from_node="train")
    assert drive.states(again) == {
        "extract_a": "succeeded",
        "extract_b": "succeeded",
        "merge": "succeeded",
        "train": "queued",
        "deploy": "waiting",
    }
    play(drive, again, fails=())
    assert drive.run_state(again) == "succeeded"
    with pytest.raises(PgschedError, match="from: 'nope' is not a node"):
        dagruns.rerun(db, run, from_node="nope")
    other = dagruns.trigger(db, "etl")
    with pytest.raises(PgschedError, match="still running"):
        dagruns.rerun(db, other)


# --- schedules, rescue, the DLQ and the SQL API -----------------------------------------


def test_a_scheduled_dag_fires_one_run_per_fire_time(db, sql, drive):
    apply(db, ETL | {"schedule": {"cron": "0 * * * *"}}, now=T0)
    dag_row = dags.get(db, "etl")
    assert dag_row["next_fire_at"] == T0 + timedelta(hours=1)
    assert scheduler.tick(db, epoch=7, now=T0 + timedelta(hours=1)) == 1
    assert scheduler.tick(db, epoch=7, now=T0 + timedelta(hours=1, seconds=1)) == 0
    runs = sql.execute("SELECT * FROM pgsched.dag_run").fetchall()
    assert [(r["trigger"], r["scheduled_at"], r["leader_epoch"]) for r in runs] == [
        ("schedule", T0 + timedelta(hours=1), 7)
    ]
    # the fire made a run, not an execution of the DAG's own task
    assert {
        r["name"]
        for r in sql.execute(
            "SELECT t.name FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id"
        )
    } == {"etl.extract_a", "etl.extract_b"}
    # a second scheduler inserting the same fire starts nothing
    again = sql.execute(
        "SELECT pgsched_internal.dag_start_v1(%s, 'schedule', %s, NULL) AS r",
        [dag_row["id"], T0 + timedelta(hours=1)],
    ).fetchone()
    assert again["r"] is None
    dags.pause(db, "etl")
    assert scheduler.tick(db, epoch=7, now=T0 + timedelta(hours=5)) == 0
    assert len(sql.execute("SELECT id FROM pgsched.dag_run").fetchall()) == 1


def test_a_node_lost_with_its_worker_is_requeued_and_the_run_goes_on(db, sql, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    drive.claim_all()
    sql.execute("UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '1 minute'")
    rescued = scheduler.rescue(db)
    assert sorted(r["outcome"] for r in rescued) == ["requeued", "requeued"]
    assert drive.states(run)["extract_a"] == "queued"
    drive.worker = register(db, "w2")
    drive.claimed.clear()
    play(drive, run, fails=())
    assert drive.run_state(run) == "succeeded"


def replace_extract_a(db) -> None:
    """Apply ETL with extract_a changed: the node gets a new task, and the old one, which
    runs in flight still use, is deleted."""
    apply(db, ETL | {"nodes": [dict(ETL["nodes"][0], command="echo v2")] + ETL["nodes"][1:]})


def pending(sql, ident) -> bool:
    row = sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [ident]).fetchone()
    return row is not None and row["state"] == "pending"


def test_a_node_execution_handed_back_after_its_task_was_replaced_still_runs_for_its_run(
    db, sql, drive
):
    """A worker stopping hands back what it buffered (execution_unclaim), which drops an
    execution of a deleted task: not a node's, whose run in flight still needs it."""
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    held = drive.claim_all()
    replace_extract_a(db)
    db.many("execution_unclaim", id=list(held), lease_id=[r["lease_id"] for r in held.values()])
    assert pending(sql, drive.execution(run, "extract_a"))
    drive.claimed.clear()
    play(drive, run, fails=())
    assert drive.run_state(run) == "succeeded"


def test_a_node_execution_rescued_unstarted_after_its_task_was_replaced_still_runs_for_its_run(
    db, sql, drive
):
    """The rescue's counterpart (outcome 'unclaimed'): an execution of a deleted task is
    dropped, not a node's."""
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    drive.claim_all()
    sql.execute("UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '1 minute'")
    assert sorted(r["outcome"] for r in scheduler.rescue(db)) == [
        "requeued",
        "requeued",
    ]  # start unknown
    drive.worker, drive.claimed = register(db, "w2"), {}
    drive.claim_all()  # both again, now asked to record their start; never started
    replace_extract_a(db)
    sql.execute("UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '1 minute'")
    assert sorted(r["outcome"] for r in scheduler.rescue(db)) == ["unclaimed", "unclaimed"]
    assert pending(sql, drive.execution(run, "extract_a"))
    drive.worker, drive.claimed = register(db, "w3"), {}
    play(drive, run, fails=())
    assert drive.run_state(run) == "succeeded"


def test_node_tasks_cannot_be_retried_from_the_dlq_or_the_dag_task_enqueued(db, sql, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    drive.finish(run, "extract_a", "dead")
    dead = drive.execution(run, "extract_a")
    with pytest.raises(
        psycopg.errors.InvalidParameterValue,
        match=f"node of DAG run {run}.*dag rerun {run} --failed",
    ):
        sql.execute("SELECT pgsched.dlq_retry_v1(%s)", [dead])
    assert sql.execute("SELECT pgsched.dlq_retry_all_v1() AS n").fetchone()["n"] == 0
    with pytest.raises(PgschedError, match="task: 'etl' is a DAG"):
        tasks.trigger(db, "etl")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="is a DAG"):
        sql.execute("INSERT INTO pgsched.run_request (task) VALUES ('etl')")


def test_sql_api_triggers_and_cancels(db, sql, drive):
    apply(db, ETL)
    run = sql.execute("SELECT pgsched.dag_trigger_v1('etl', '{\"x\": 1}') AS r").fetchone()["r"]
    assert drive.params(run, "extract_a") == {"x": 1}
    assert (
        sql.execute("SELECT pgsched.dag_cancel_v1(%s) AS o", [run]).fetchone()["o"] == "cancelled"
    )
    with pytest.raises(psycopg.errors.NoDataFound, match="no DAG named 'nope'"):
        sql.execute("SELECT pgsched.dag_trigger_v1('nope')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="params"):
        sql.execute("SELECT pgsched.dag_trigger_v1('etl', '[1]')")


# --- apply ----------------------------------------------------------------------------------


def test_apply_is_idempotent_and_reports_changes_node_by_node(db, sql):
    first = apply(db, ETL, source="etl.yaml")
    assert (first.dag, first.created) == (
        "created",
        ["extract_a", "extract_b", "merge", "train", "deploy"],
    )
    again = apply(db, ETL, source="etl.yaml")
    assert (again.dag, again.created, again.updated, again.removed) == ("unchanged", [], [], [])
    assert len(again.unchanged) == 5
    changed = dict(ETL, nodes=[dict(ETL["nodes"][0], command="echo a")] + ETL["nodes"][1:4])
    report = apply(db, changed, source="etl.yaml")
    assert (report.dag, report.updated, report.removed) == ("updated", ["extract_a"], ["deploy"])
    assert tasks.get(db, "etl.extract_a")["command"] == "echo a"
    with pytest.raises(Exception, match=r"no task named 'etl\.deploy'"):
        tasks.get(db, "etl.deploy")
    assert sql.execute("SELECT version FROM pgsched.dag").fetchone()["version"] == 2
    dry = apply(db, ETL, dry_run=True)
    assert (dry.dry_run, dry.created) == (True, ["deploy"])
    assert (
        sql.execute("SELECT count(*) AS n FROM pgsched.dag_node").fetchone()["n"] == 4
    )  # nothing written


def test_apply_refuses_names_held_by_other_tasks_and_writes_nothing(db, sql):
    tasks.create(db, TaskSpec(name="etl.merge", command="true"))
    with pytest.raises(ValidationError, match=r"nodes\[merge\].id.*'etl.merge'"):
        apply(db, ETL)
    assert sql.execute("SELECT count(*) AS n FROM pgsched.dag").fetchone()["n"] == 0
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 1
    tasks.create(db, TaskSpec(name="etl", command="true"))
    with pytest.raises(ValidationError, match="name: 'etl' is the name of an existing task"):
        apply(db, ETL | {"nodes": ETL["nodes"][:2]})


def test_a_run_in_flight_keeps_the_graph_it_started_with(db, drive):
    apply(db, ETL)
    run = dagruns.trigger(db, "etl")
    apply(db, ETL | {"nodes": ETL["nodes"][:2]})  # merge, train, deploy removed
    play(drive, run, fails=())
    assert drive.run_state(run) == "succeeded" and len(drive.states(run)) == 5
    fresh = dagruns.trigger(db, "etl")
    assert set(drive.states(fresh)) == {"extract_a", "extract_b"}


def test_delete_removes_the_dag_and_its_tasks(db, sql):
    apply(db, ETL)
    dags.delete(db, "etl")
    assert (
        sql.execute("SELECT count(*) AS n FROM pgsched.task WHERE deleted_at IS NULL").fetchone()[
            "n"
        ]
        == 0
    )
    first = apply(db, ETL)  # the name is free again
    assert first.dag == "created"


# --- from Python ------------------------------------------------------------------------------

app = App()


@app.node()
def double(n: int, upstream: dict | None = None) -> int:
    return 2 * n


def test_a_dag_declared_in_python_is_applied_by_sync(db, drive):
    declared = app.dag(
        {
            "name": "py",
            "params": {"n": 2},
            "nodes": [
                {"id": "first", "python": double},
                {"id": "second", "python": double, "depends_on": ["first"]},
            ],
        }
    )
    assert declared.order == ["first", "second"]
    assert app.sync(db) == ["DAG py"]
    assert app.sync(db) == []  # unchanged
    assert tasks.get(db, "py.first")["python_target"] == "tests.db.test_dag_engine:double"
    assert resolve("tests.db.test_dag_engine:double") is double  # a worker may run it
    with pytest.raises(Exception, match="no task named 'double'"):
        tasks.get(db, "double")  # @app.node makes no task of its own
    with pytest.raises(dag_module.DagErrors, match=r"nodes\[x\].depends_on: 'nope' is not a node"):
        app.dag({"name": "bad", "nodes": [{"id": "x", "python": double, "depends_on": ["nope"]}]})


# --- versions, races and reruns (found by trying to break it) -----------------------------


@pytest.mark.clone("a second session applies while this one waits (db.dsn)")
def test_a_run_starting_while_an_apply_is_uncommitted_waits_and_copies_one_whole_version(
    db, sql, drive
):
    import threading

    apply(db, ETL)
    dag_id = dags.get(db, "etl")["id"]
    with psycopg.connect(db.dsn, autocommit=False) as editor:  # an apply half-way: deploy removed
        editor.execute("SELECT 1 FROM pgsched.dag WHERE id = %s FOR UPDATE", [dag_id])
        editor.execute(
            "DELETE FROM pgsched.dag_node WHERE dag_id = %s AND node_id = 'deploy'", [dag_id]
        )
        editor.execute(
            "UPDATE pgsched.dag_node SET downstream = '{}' WHERE dag_id = %s AND node_id = 'train'",
            [dag_id],
        )
        started: list[int] = []
        starter = threading.Thread(target=lambda: started.append(dagruns.trigger(db, "etl")))
        starter.start()
        starter.join(0.5)
        assert starter.is_alive()  # waits for the apply
        editor.commit()
    starter.join(10)
    run = started[0]
    r = sql.execute("SELECT nodes, remaining FROM pgsched.dag_run WHERE id = %s", [run]).fetchone()
    assert (r["nodes"], r["remaining"]) == (4, 4) and set(drive.states(run)) == {
        "extract_a",
        "extract_b",
        "merge",
        "train",
    }
    play(drive, run, fails=())
    assert drive.run_state(run) == "succeeded"


def test_a_changed_node_gets_a_new_task_so_a_run_in_flight_runs_the_old_version(db, sql, drive):
    apply(db, ETL | {"params": {"ver": 1}})
    old_run = dagruns.trigger(db, "etl")
    changed = ETL | {
        "params": {"ver": 2},
        "nodes": ETL["nodes"][:2] + [dict(ETL["nodes"][2], command="echo v2")] + ETL["nodes"][3:],
    }
    report = apply(db, changed)
    assert set(report.updated) == {
        "extract_a",
        "extract_b",
        "merge",
        "train",
        "deploy",
    }  # params changed all
    new_run = dagruns.trigger(db, "etl")
    play(drive, old_run, fails=())
    play(drive, new_run, fails=())

    def merge_of(run):
        ident = drive.execution(run, "merge")
        return sql.execute(
            "SELECT h.params, t.command, t.deleted_at IS NOT NULL AS old FROM pgsched.execution_history h "
            "JOIN pgsched.task t ON t.id = h.task_id WHERE h.id = %s",
            [ident],
        ).fetchone()

    before, after = merge_of(old_run), merge_of(new_run)
    assert (before["params"]["ver"], before["command"], before["old"]) == (1, "true", True)
    assert (after["params"]["ver"], after["command"], after["old"]) == (2, "echo v2", False)
    assert [
        r["name"]
        for r in sql.execute(
            "SELECT name FROM pgsched.task WHERE name = 'etl.merge' AND deleted_at IS NULL"
        )
    ] == ["etl.merge"]


def test_rerun_failed_only_also_reruns_what_succeeded_downstream_of_a_failure_with_the_current_definition(
    db, sql, drive
):
    graph = {
        "name": "g",
        "failure_policy": "continue",
        "nodes": [
            {"id": "a", "command": "false"},
            {"id": "b", "command": "true", "depends_on": ["a"]},
            {"id": "c", "command": "true"},
        ],
    }
    apply(db, graph)
    run = dagruns.trigger(db, "g")
    play(drive, run, fails=("a",))
    assert drive.states(run) == {"a": "failed", "b": "succeeded", "c": "succeeded"}
    apply(
        db, graph | {"nodes": [dict(graph["nodes"][0], command="echo fixed")] + graph["nodes"][1:]}
    )
    again = dagruns.rerun(db, run, failed_only=True)
    assert drive.states(again) == {
        "a": "queued",
        "b": "waiting",
        "c": "succeeded",
    }  # b ran on a failed input
    a_task = sql.execute(
        "SELECT t.command FROM pgsched.dag_node_run n JOIN pgsched.task t ON t.id = n.task_id "
        "WHERE n.run_id = %s AND n.node_id = 'a'",
        [again],
    ).fetchone()["command"]
    assert a_task == "echo fixed"  # the node runs its current definition
    play(drive, again, fails=())
    assert drive.run_state(again) == "succeeded"
    assert (
        sql.execute("SELECT pgsched.dag_rerun_v1(%s, NULL, NULL) AS r", [again]).fetchone()["r"]
        > again
    )


def test_a_condition_waits_for_its_node_when_an_eager_rule_would_run_first(db, drive):
    apply(
        db,
        {
            "name": "eager",
            "nodes": [
                {"id": "a", "command": "true"},
                {"id": "b", "command": "true"},
                {
                    "id": "x",
                    "command": "true",
                    "depends_on": ["a", "b"],
                    "trigger_rule": "one_success",
                    "condition": {"field": "a.result.go", "equals": True},
                },
            ],
        },
    )
    run = dagruns.trigger(db, "eager")
    drive.finish(run, "b")
    assert drive.states(run)["x"] == "waiting"  # one_success says run, but a has not ended
    drive.finish(run, "a", result={"go": True})
    assert drive.states(run)["x"] == "queued"


def test_cancel_of_a_run_that_fail_all_is_stopping_still_ends_it_failed(db, drive):
    apply(db, ETL | {"failure_policy": "fail_all"})
    run = dagruns.trigger(db, "etl")
    drive.claim_all()
    drive.finish(run, "extract_a", "dead")
    assert drive.run_state(run) == "failing"
    assert dagruns.cancel(db, run) == "failing"
    drive.finish(run, "extract_b", "cancelled")
    assert drive.run_state(run) == "failed"


def test_apply_all_applies_every_dag_or_none(db, sql):
    tasks.create(db, TaskSpec(name="second.x", command="true"))
    first = dag_module.parse({"name": "first", "nodes": [{"id": "x", "command": "true"}]})
    second = dag_module.parse({"name": "second", "nodes": [{"id": "x", "command": "true"}]})
    with pytest.raises(ValidationError, match=r"second\.x"):
        dags.apply_all(db, [(first, "a.yaml"), (second, "b.yaml")])
    assert sql.execute("SELECT count(*) AS n FROM pgsched.dag").fetchone()["n"] == 0
    with pytest.raises(ValidationError, match=r"'first' is defined twice \(a.yaml and c.yaml\)"):
        dags.apply_all(db, [(first, "a.yaml"), (first, "c.yaml")])


@pytest.mark.parametrize("change", ["apply", "delete"])
def test_an_apply_or_delete_of_a_dag_racing_a_tick_that_fires_it_does_not_deadlock(
    db, sql, dsn, change
):
    """A tick holds the DAG's schedule task (its due query) and then starts a run (the dag
    row FOR SHARE); an apply or a delete of the DAG meanwhile locked the dag row, then the
    task: a deadlock. Both now lock the task first, so one waits for the other."""
    import threading

    from pgsched.db import Session, connect

    data = {**ETL, "schedule": {"cron": "0 * * * *"}, "description": "v1"}
    apply(db, data)
    sql.execute(
        "UPDATE pgsched.task SET next_fire_at = date_trunc('second', now()) - interval '1 s' "
        "WHERE name = 'etl'"
    )
    tick = connect(dsn, autocommit=False)
    try:
        session = Session(tick)
        [group] = session.many(
            "scheduler_due_groups", now=session.now(), limit=1000, names=20
        )  # holds the task
        result: dict = {}

        def other() -> None:
            try:
                result[change] = (
                    apply(db, {**data, "description": "v2"})
                    if change == "apply"
                    else dags.delete(db, "etl")
                )
            except Exception as exc:  # the deadlock, if it comes, is the other side's error
                result[change] = exc

        thread = threading.Thread(target=other)
        thread.start()
        wait_until(
            lambda: (
                sql.execute(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()["n"]
                == 1
            ),
            message=f"the {change} to wait for the tick",
        )
        runs = session.many(
            "scheduler_fire_dags",
            ids=[int(group["ids"].strip("{}"))],
            fire_at=[group["next_fire_at"]],
            epoch=1,
        )
        tick.commit()
        thread.join(30)
        assert [r["run_id"] is not None for r in runs] == [True]
        assert not isinstance(result.get(change), Exception), result
    finally:
        tick.close()
