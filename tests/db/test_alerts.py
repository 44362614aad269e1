"""Alerts and webhooks end to end against a real database and a real HTTP receiver on
127.0.0.1: events queue deliveries in their own transaction, the sender POSTs them,
retries with backoff, and gives up."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import pytest

from pgsched import alerts, webhooks
from pgsched.db import Database
from pgsched.errors import ValidationError
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec
from pgsched.worker.claims import TaskDefinitions
from tests.db.test_stats import seed
from tests.factories import make_execution
from tests.helpers import cli, wait_until

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back


class Receiver:
    """An HTTP server on an ephemeral port of ``host`` that records POSTs and answers
    ``status`` (a redirect to ``location`` when it is set)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.location: str | None = None
        self.status = 200
        self.received: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.received.append(
                    {
                        "path": self.path,
                        "body": json.loads(body),
                        "event": self.headers["X-Pgsched-Event"],
                        "delivery": self.headers["X-Pgsched-Delivery"],
                    }
                )
                self.send_response(owner.status)
                if owner.location:
                    self.send_header("Location", owner.location)
                self.end_headers()
                self.wfile.write(b"nope" if owner.status >= 300 else b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(allow_loopback: None) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1, loopback allowed as webhook targets (``allow_loopback``)."""
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def deliveries(sql: psycopg.Connection) -> list[dict]:
    return sql.execute("SELECT * FROM pgsched.webhook_delivery ORDER BY id").fetchall()


def fail_to_dead(db: Database, task: str) -> int:
    """Run one execution of ``task`` through the worker's own claim and finish queries,
    ending it dead (its attempts used up)."""
    execution_id = tasks.trigger(db, task)
    queues = [tasks.get(db, task)["queue"]]
    worker = db.one(
        "worker_register",
        name="w",
        hostname="h",
        pid=1,
        queues=queues,
        tenants=None,
        concurrency=1,
        heartbeat_interval=5,
        host_time=None,
        round_trip=None,
    )
    assert worker is not None
    [row] = TaskDefinitions().claim(db, queues=queues, limit=1, worker_id=worker["id"])
    assert row["id"] == execution_id
    db.exec(
        "execution_finish",
        id=row["id"],
        lease_id=row["lease_id"],
        state="dead",
        finished_at=row["started_at"],
        exit_code=3,
        error="boom",
        result=None,
    )
    return execution_id


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_failure_and_dlq_webhooks_are_queued_with_the_failure_and_delivered(
    db: Database, sql: psycopg.Connection, receiver: Receiver
) -> None:
    tasks.create(db, TaskSpec(name="etl", command="false"))
    tasks.create(db, TaskSpec(name="quiet", command="false"))  # no webhooks: nothing queued
    alerts.configure(db, "etl", on_failure=receiver.url + "/fail", on_dlq=receiver.url + "/dlq")

    dead_id = fail_to_dead(db, "etl")
    fail_to_dead(db, "quiet")

    rows = deliveries(sql)
    assert [(r["event"], r["url"]) for r in rows] == [
        ("failure", receiver.url + "/fail"),
        ("dlq", receiver.url + "/dlq"),
    ]
    sent = webhooks.send_due(db)
    assert [s["error"] for s in sent] == [None, None]
    by_path = {r["path"]: r for r in receiver.received}
    assert set(by_path) == {"/fail", "/dlq"}
    body = by_path["/dlq"]["body"]
    assert body["event"] == "dlq" and body["task"] == "etl" and body["execution_id"] == dead_id
    assert body["state"] == "dead" and body["error"] == "boom" and body["exit_code"] == 3
    assert by_path["/fail"]["body"]["event"] == "failure"
    assert all(r["delivered_at"] is not None and r["attempts"] == 1 for r in deliveries(sql))
    assert webhooks.send_due(db) == []  # delivered rows are not sent again


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_a_failing_receiver_is_retried_with_backoff_then_given_up(
    db: Database, sql: psycopg.Connection, receiver: Receiver
) -> None:
    tasks.create(db, TaskSpec(name="etl", command="false"))
    alerts.configure(db, "etl", on_failure=receiver.url + "/hook")
    fail_to_dead(db, "etl")
    receiver.status = 500
    policy = webhooks.Policy(max_attempts=3, base=10.0, cap=15.0, timeout=5.0)
    now = sql.execute("SELECT now() AS now").fetchone()["now"]  # type: ignore[index]

    def after(row: dict, start: timedelta, delay: float) -> bool:
        """Retried ``delay`` seconds after its POST ended (a POST here takes well under 2 s)."""
        return (
            timedelta(0)
            <= row["retry_at"] - (now + start + timedelta(seconds=delay))
            < timedelta(seconds=2)
        )

    [first] = webhooks.send_due(db, now=now, policy=policy)
    assert first["error"].startswith("HTTP 500") and after(first, timedelta(0), 10)
    assert webhooks.send_due(db, now=now + timedelta(seconds=9), policy=policy) == []  # not yet due
    [second] = webhooks.send_due(db, now=first["retry_at"], policy=policy)
    assert after(second, first["retry_at"] - now, 15)  # 20 s (doubled) capped at 15
    [third] = webhooks.send_due(db, now=second["retry_at"], policy=policy)
    assert third["retry_at"] is None
    [row] = deliveries(sql)
    assert row["attempts"] == 3 and row["gave_up_at"] is not None and row["delivered_at"] is None
    assert row["last_error"].startswith("HTTP 500")
    assert len(receiver.received) == 3
    assert webhooks.send_due(db, now=now + timedelta(days=1), policy=policy) == []


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_a_receiver_that_recovers_gets_the_delivery(
    db: Database, sql: psycopg.Connection, receiver: Receiver
) -> None:
    tasks.create(db, TaskSpec(name="etl", command="false"))
    alerts.configure(db, "etl", on_failure=receiver.url)
    fail_to_dead(db, "etl")
    receiver.status = 503
    now = sql.execute("SELECT now() AS now").fetchone()["now"]  # type: ignore[index]
    policy = webhooks.Policy(max_attempts=5, base=1.0, cap=60.0, timeout=5.0)
    webhooks.send_due(db, now=now, policy=policy)
    receiver.status = 204
    [ok] = webhooks.send_due(db, now=now + timedelta(seconds=3), policy=policy)
    assert ok["error"] is None
    [row] = deliveries(sql)
    assert row["attempts"] == 2 and row["delivered_at"] is not None and row["last_error"] is None
    assert [r["delivery"] for r in receiver.received] == [
        str(row["id"])
    ] * 2  # receivers can dedupe


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_unreachable_receiver_is_an_error_not_a_crash(
    allow_loopback: None, db: Database, sql: psycopg.Connection
) -> None:
    tasks.create(db, TaskSpec(name="etl", command="false"))
    alerts.configure(db, "etl", on_failure="http://127.0.0.1:9/")  # discard port: refused
    fail_to_dead(db, "etl")
    [row] = webhooks.send_due(db, policy=webhooks.Policy(timeout=2.0))
    assert row["error"] and row["retry_at"] is not None


def test_missed_schedule_opens_once_sends_on_missed_and_resolves(
    db: Database, sql: psycopg.Connection, receiver: Receiver
) -> None:
    tasks.create(
        db, TaskSpec(name="tick", command="true", schedule_kind="cron", schedule="* * * * *")
    )
    tasks.create(
        db, TaskSpec(name="fine", command="true", schedule_kind="cron", schedule="* * * * *")
    )
    alerts.configure(db, "tick", on_missed=receiver.url + "/missed")
    sql.execute(
        "UPDATE pgsched.task SET next_fire_at = now() - interval '5 minutes' WHERE name = 'tick'"
    )
    sql.execute(
        "UPDATE pgsched.task SET next_fire_at = now() - interval '30 seconds' WHERE name = 'fine'"
    )

    changes = alerts.detect(db)
    assert [(c["change"], c["kind"], c["details"]["task"]) for c in changes] == [
        ("opened", "missed_schedule", "tick")
    ]
    assert changes[0]["details"]["reasons"][0]["reason"] == "overdue"
    assert alerts.detect(db) == []  # still missed: the open alert stays the only one
    [open_alert] = alerts.active(db)
    assert open_alert["task_name"] == "tick" and open_alert["resolved_at"] is None

    [sent] = webhooks.send_due(db)
    assert sent["error"] is None
    [got] = receiver.received
    assert got["path"] == "/missed" and got["body"]["event"] == "missed_schedule"
    assert got["body"]["task"] == "tick" and got["body"]["alert_id"] == open_alert["id"]

    # The scheduler catches up: the fire starts on time and the next one is ahead.
    task_id = tasks.get(db, "tick")["id"]
    sql.execute(
        "UPDATE pgsched.task SET next_fire_at = now() + interval '1 minute' WHERE id = %(t)s",
        {"t": task_id},
    )
    sql.execute(
        """INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state, trigger,
                       priority, queue, params, attempt, max_attempts, created_at, started_at, finished_at)
                   VALUES (nextval('pgsched.execution_id_seq'), 'default', %(t)s, now(), now(), 'succeeded',
                           'schedule', 5, 'default', '{}', 1, 1, now(), now() + interval '1 second',
                           now() + interval '2 seconds')""",
        {"t": task_id},
    )
    resolved = alerts.detect(db)
    assert [(c["change"], c["id"]) for c in resolved] == [("resolved", open_alert["id"])]
    assert alerts.active(db) == []


def test_waiting_and_misfired_fires_count_as_missed(db: Database, sql: psycopg.Connection) -> None:
    tasks.create(
        db, TaskSpec(name="queued", command="true", schedule_kind="cron", schedule="0 * * * *")
    )
    tasks.create(
        db, TaskSpec(name="skipped", command="true", schedule_kind="cron", schedule="0 * * * *")
    )
    alerts.configure(db, "queued", missed_after_seconds=600)
    queued = tasks.get(db, "queued")["id"]
    make_execution(sql, queued, scheduled_at=-timedelta(minutes=5), trigger="schedule")
    sql.execute("UPDATE pgsched.task SET missed_fires = 3 WHERE name = 'skipped'")

    changes = alerts.detect(db)
    assert [c["details"]["task"] for c in changes] == [
        "skipped"
    ]  # queued's own threshold is 10 min
    assert changes[0]["details"]["reasons"] == [{"reason": "misfired", "fires_not_run": 3}]
    alerts.configure(db, "queued", missed_after_seconds=None)  # back to the global 60 s
    [again] = alerts.detect(db)
    assert (
        again["details"]["task"] == "queued"
        and again["details"]["reasons"][0]["reason"] == "waiting"
    )


def test_failure_rate_alert_opens_over_threshold_and_resolves(
    db: Database, sql: psycopg.Connection, receiver: Receiver
) -> None:
    row = tasks.create(db, TaskSpec(name="flaky", command="true"))
    assert row is not None
    alerts.configure(db, "flaky", on_failure=receiver.url + "/rate", failure_min_executions=4)
    sql.execute(
        "INSERT INTO pgsched.setting (name, value) VALUES ('alert_failure_rate', '0.3') "
        "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
    )
    seed(sql, row["id"], 3, ago_from=60, ago_to=600)  # seed's states: 2 succeeded, 1 failed
    assert alerts.detect(db) == []  # 3 executions: under the minimum of 4
    seed(
        sql, row["id"], 7, ago_from=60, ago_to=600
    )  # 1-7: 3 succeeded, failed, timed_out, dead, cancelled
    judged = sql.execute(
        "SELECT count(*) FILTER (WHERE state IN ('failed','timed_out','dead')) AS bad, "
        "count(*) FILTER (WHERE state <> 'cancelled') AS n FROM pgsched.execution_history"
    ).fetchone()
    assert judged is not None and judged["bad"] / judged["n"] > 0.3

    [opened] = alerts.detect(db)
    assert opened["kind"] == "failure_rate" and opened["details"]["failures"] == judged["bad"]
    assert opened["details"]["executions"] == judged["n"]
    webhooks.send_due(db)
    events = [r["body"]["event"] for r in receiver.received if r["path"] == "/rate"]
    # each failed execution sent its own failure webhook (the trigger); the alert one more
    assert sorted(events) == ["failure"] * judged["bad"] + ["failure_rate"]

    sql.execute("UPDATE pgsched.execution_history SET state = 'succeeded'")
    [resolved] = alerts.detect(db)
    assert resolved["change"] == "resolved" and resolved["id"] == opened["id"]


def test_configure_validates_and_clears(db: Database) -> None:
    tasks.create(db, TaskSpec(name="etl", command="true"))
    with pytest.raises(ValidationError, match="on_failure"):
        alerts.configure(db, "etl", on_failure="ftp://example.com/x")
    for malformed in (
        "http://[::1",
        "http://example.com:99999/x",
    ):  # urllib raises ValueError on these
        with pytest.raises(ValidationError, match=r"on_failure: .* is not a URL"):
            alerts.configure(db, "etl", on_failure=malformed)
    with pytest.raises(ValidationError, match="failure_rate"):
        alerts.configure(db, "etl", failure_rate=1.5)
    alerts.configure(db, "etl", on_dlq="https://example.com/dlq", failure_rate=0.2)
    assert alerts.configure(db, "etl", on_dlq="").on_dlq is None
    assert alerts.alerting_of(db, "etl").failure_rate == 0.2


@pytest.mark.clone("enqueues at clock_timestamp() and claims at now(): now() must pass the enqueue")
def test_the_leader_rolls_up_detects_and_sends_on_its_own(
    db: Database, sql: psycopg.Connection, receiver: Receiver
) -> None:
    from pgsched.scheduler import Scheduler, SchedulerConfig

    tasks.create(db, TaskSpec(name="etl", command="false", queue="nobody"))
    alerts.configure(
        db, "etl", on_failure=receiver.url + "/fail", on_missed=receiver.url + "/missed"
    )
    fail_to_dead(db, "etl")
    make_execution(
        sql,
        tasks.get(db, "etl")["id"],
        scheduled_at=-timedelta(minutes=5),
        trigger="schedule",
        queue="nobody",
    )
    stop = threading.Event()
    scheduler = Scheduler(
        db, SchedulerConfig(observe_interval=0.2, max_sleep=0.2, name="leader-under-test")
    )
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(
            lambda: {r["path"] for r in receiver.received} == {"/fail", "/missed"},
            message="both webhooks delivered by the leader",
        )
        wait_until(
            lambda: sql.execute("SELECT rolled_at FROM pgsched.stats_rollup_state").fetchone(),
            message="a roll-up",
        )
    finally:
        stop.set()
        thread.join(15)
    assert not thread.is_alive()
    assert [a["kind"] for a in alerts.active(db)] == ["missed_schedule"]
    assert all(r["delivered_at"] is not None for r in deliveries(sql))


def test_cli_sets_and_clears_webhooks(db: Database, dsn: str) -> None:
    cli(
        dsn,
        "task",
        "create",
        "hooked",
        "--command",
        "true",
        "--on-failure",
        "https://hooks.example/f",
        "--missed-after",
        "30",
    )
    assert alerts.alerting_of(db, "hooked") == alerts.Alerting(
        on_failure="https://hooks.example/f", missed_after_seconds=30.0
    )
    cli(dsn, "task", "update", "hooked", "--on-failure", "", "--on-dlq", "http://hooks.example/d")
    assert alerts.alerting_of(db, "hooked") == alerts.Alerting(
        on_dlq="http://hooks.example/d", missed_after_seconds=30.0
    )
    bad = cli(
        dsn,
        "task",
        "create",
        "other",
        "--command",
        "true",
        "--on-missed",
        "mailto:x@y",
        check=False,
    )
    assert bad.returncode != 0 and "on_missed" in bad.stderr
    assert db.one("task_get", name="other", tenant="default") is None  # nothing half-made
    shown = cli(dsn, "task", "show", "hooked")
    assert "http://hooks.example/d" in shown.stdout


def pyjob() -> None:
    """A Python task (module level, so that a worker could import it)."""


def test_python_tasks_declare_their_webhooks(db: Database) -> None:
    from pgsched.app import App

    app = App()
    app.task(name="pyjob", on_failure="https://hooks.example/f", on_dlq="https://hooks.example/d")(
        pyjob
    )
    with pytest.raises(ValidationError, match="on_missed"):
        app.task(name="bad", on_missed="hooks.example")
    assert app.sync(db) == ["pyjob"]
    assert alerts.alerting_of(db, "pyjob") == alerts.Alerting(
        on_failure="https://hooks.example/f", on_dlq="https://hooks.example/d"
    )


def test_a_failure_rate_hovering_at_the_threshold_does_not_flap(
    allow_loopback: None, db: Database, sql: psycopg.Connection
) -> None:
    row = tasks.create(db, TaskSpec(name="flaky", command="true"))
    assert row is not None
    alerts.configure(
        db, "flaky", on_failure="http://127.0.0.1:9/", failure_rate=0.5, failure_min_executions=4
    )
    seed(sql, row["id"], 6, ago_from=60, ago_to=600, unstarted_every=100)

    def failures(n: int) -> None:
        """The first ``n`` of the six executions failed, the others succeeded."""
        sql.execute(
            "UPDATE pgsched.execution_history h SET state = CASE WHEN r.k <= %s THEN 'failed' "
            "ELSE 'succeeded' END FROM (SELECT id, row_number() OVER (ORDER BY id) AS k "
            "FROM pgsched.execution_history) r WHERE r.id = h.id",
            [n],
        )

    failures(4)  # 0.67 > 0.5
    [opened] = alerts.detect(db)
    assert opened["change"] == "opened"
    failures(3)  # 0.5: no longer above the threshold, but not clearly below it either
    assert alerts.detect(db) == []
    failures(4)
    assert alerts.detect(db) == []  # the same alert is still open: no second one, no second webhook
    assert sql.execute(
        "SELECT count(*) AS n FROM pgsched.webhook_delivery WHERE event = 'failure_rate'"
    ).fetchone() == {"n": 1}
    failures(2)  # 0.33: at most RESOLVE_FRACTION of the threshold
    [resolved] = alerts.detect(db)
    assert resolved["change"] == "resolved" and resolved["id"] == opened["id"]
