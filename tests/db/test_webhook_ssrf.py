"""The SSRF guard on webhooks (:mod:`pgsched.webhook_targets`), against real HTTP receivers
on loopback: a target on a loopback, private or link-local address is refused when set
(a literal address) and when sent to (any name that resolves to one), is never sent a
request, and its delivery is given up at once with the reason; a redirect is not
followed; an operator's ``--webhook-allow`` lets it through."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner

from pgsched import alerts, webhook_targets, webhooks
from pgsched.cli import main
from pgsched.db import Database
from pgsched.errors import ValidationError
from pgsched.scheduler.usage import measure
from pgsched.stores import tasks, tenants
from pgsched.taskspec import TaskSpec

from .test_alerts import Receiver, deliveries, fail_to_dead
from .test_tenant_alert_webhook import SET, _reach_max_running


@pytest.fixture
def allowing() -> Iterator[Callable[[list[str]], None]]:
    """Set the operator's allowed networks for the test (:func:`webhook_targets.allow`);
    back to the default (none) after it."""
    try:
        yield webhook_targets.allow
    finally:
        webhook_targets.allow(None)


@pytest.fixture
def loopback() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1, nothing allowed."""
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def _refused_and_given_up(sql: psycopg.Connection, rows: list, reason: str) -> None:
    assert rows, "nothing was due"
    for row in rows:
        assert row["error"].startswith("Refused:") and reason in row["error"], row["error"]
        assert "--webhook-allow" in row["error"] and row["retry_at"] is None
    for d in deliveries(sql):
        assert d["gave_up_at"] is not None and d["delivered_at"] is None, d
        assert d["attempts"] == 1 and d["last_error"].startswith("Refused:")


def test_a_tenant_webhook_to_loopback_is_refused_when_set_and_never_sent(
    db: Database, sql: psycopg.Connection, loopback: Receiver
) -> None:
    _reach_max_running(db, sql, "t1")
    url = loopback.url + "/quota"
    with pytest.raises(ValidationError, match=r"alert_webhook: 'http://127\.0\.0\.1.*loopback"):
        tenants.set_alert_webhook(db, "t1", url)
    assert tenants.alert_webhook(db, "t1")["alert_webhook"] is None
    sql.execute(SET, ["t1", url])  # the database's function checks its form only
    assert [c["change"] for c in measure(db)] == ["opened"]
    rows = webhooks.send_due(db)
    _refused_and_given_up(sql, rows, "127.0.0.1 is a loopback address")
    assert webhooks.send_due(db, now=db.now() + timedelta(days=1)) == []  # not tried again
    assert loopback.received == []


def test_a_name_that_resolves_to_loopback_is_refused_when_sent(
    db: Database, sql: psycopg.Connection, loopback: Receiver
) -> None:
    tasks.create(db, TaskSpec(name="etl", command="false"))
    # a name is not looked up when set (its answer may change): the send decides
    alerts.configure(db, "etl", on_failure=f"http://localhost:{loopback.port}/fail")
    fail_to_dead(db, "etl")
    rows = webhooks.send_due(db)
    _refused_and_given_up(sql, rows, "'localhost' resolves to 127.0.0.1 is a loopback address")
    assert loopback.received == []


def test_a_redirect_to_a_private_address_is_not_followed(
    db: Database, sql: psycopg.Connection, allowing: Callable[[list[str]], None]
) -> None:
    allowing(["127.0.0.1/32"])  # the receiver; not 127.0.0.2, where it points
    inner, outer = Receiver("127.0.0.2"), Receiver()
    try:
        outer.status, outer.location = 307, inner.url + "/latest/meta-data/"  # POST kept
        tasks.create(db, TaskSpec(name="etl", command="false"))
        alerts.configure(db, "etl", on_failure=outer.url + "/hook")
        fail_to_dead(db, "etl")
        [row] = webhooks.send_due(db)
        assert row["error"].startswith("HTTP 307") and "not followed" in row["error"]
        assert [r["path"] for r in outer.received] == ["/hook"]
        assert inner.received == []
    finally:
        inner.close()
        outer.close()


def test_with_loopback_allowed_by_the_operator_it_is_delivered(
    db: Database,
    sql: psycopg.Connection,
    loopback: Receiver,
    allowing: Callable[[list[str]], None],
) -> None:
    allowing(["127.0.0.0/8", "::1/128"])
    tasks.create(db, TaskSpec(name="etl", command="false"))
    alerts.configure(db, "etl", on_failure=f"http://localhost:{loopback.port}/fail")
    fail_to_dead(db, "etl")
    [row] = webhooks.send_due(db)
    assert row["error"] is None
    assert [(r["path"], r["event"]) for r in loopback.received] == [("/fail", "failure")]


def test_the_address_checked_is_the_one_connected_to(
    allowing: Callable[[list[str]], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: a name that answers an allowed address to the check and a refused
    one to a second lookup gets no second lookup."""
    allowing(["127.0.0.1/32"])
    checked, rebound = Receiver(), Receiver("127.0.0.2")
    real, asked = socket.getaddrinfo, []

    def answer(host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host != "rebind.example":
            return real(host, port, *args, **kwargs)
        asked.append(host)
        return real("127.0.0.1" if len(asked) == 1 else "127.0.0.2", port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", answer)
    try:
        url = f"http://rebind.example:{checked.port}/hook"
        assert webhooks.post(url, {"event": "failure"}, timeout=5.0) is None
        assert len(asked) == 1 and len(checked.received) == 1 and rebound.received == []
    finally:
        checked.close()
        rebound.close()


def test_the_cli_flag_allows_a_network_and_a_bad_one_is_named(dsn: str) -> None:
    run = CliRunner().invoke
    hook = ["tenant", "webhook", "set", "acme", "http://10.1.2.3/hook"]
    try:
        assert run(main, ["--dsn", dsn, "tenant", "create", "acme"]).exit_code == 0
        out = run(main, ["--dsn", dsn, *hook])
        assert out.exit_code != 0 and "alert_webhook" in out.output
        assert "10.1.2.3 is a private address" in out.output
        out = run(main, ["--dsn", dsn, "--webhook-allow", "10.0.0.0/8", *hook])
        assert out.exit_code == 0 and "alerts to http://10.1.2.3/hook" in out.output, out.output
        out = run(main, ["--dsn", dsn, "--webhook-allow", "10.0.0.1/8", *hook])
        assert out.exit_code != 0 and "webhook_allow: '10.0.0.1/8'" in out.output, out.output
    finally:
        webhook_targets.allow(None)
