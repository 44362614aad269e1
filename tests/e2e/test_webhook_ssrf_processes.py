"""A real scheduler's webhook sender and the SSRF guard: without ``--webhook-allow`` a
delivery to a loopback receiver is given up at once with its reason and the receiver sees
nothing; the same scheduler started with ``--webhook-allow 127.0.0.1/32`` (or
``$PGSCHED_WEBHOOK_ALLOW``) delivers it."""

from __future__ import annotations

import pytest

from ..db.test_alerts import Receiver
from ..helpers import wait_until

pytestmark = pytest.mark.e2e

QUEUE = (
    "INSERT INTO pgsched.webhook_delivery (tenant, event, url, payload) "
    "VALUES ('default', 'quota', %s, '{\"event\": \"quota\"}') RETURNING id"
)


def _outcome(sql, ident: int) -> dict | None:
    row = sql.execute(
        "SELECT attempts, delivered_at, gave_up_at, last_error FROM pgsched.webhook_delivery "
        "WHERE id = %s",
        [ident],
    ).fetchone()
    return row if row["delivered_at"] or row["gave_up_at"] else None


@pytest.mark.parametrize("allow", ["flag", "env"])
def test_a_real_scheduler_refuses_loopback_unless_the_operator_allows_it(
    sql, start, allow: str
) -> None:
    receiver = Receiver()
    try:
        refused = sql.execute(QUEUE, [receiver.url + "/refused"]).fetchone()["id"]
        first = start("scheduler", "--max-sleep", "0.5")
        row = wait_until(lambda: _outcome(sql, refused), timeout=30, message="the first try")
        assert row["gave_up_at"] is not None and row["attempts"] == 1, row
        assert row["last_error"].startswith("Refused:") and "loopback" in row["last_error"]
        assert receiver.received == []
        assert first.stop() == 0
        if allow == "flag":
            start("--webhook-allow", "127.0.0.1/32", "scheduler", "--max-sleep", "0.5")
        else:
            start("scheduler", "--max-sleep", "0.5", env={"PGSCHED_WEBHOOK_ALLOW": "127.0.0.1"})
        allowed = sql.execute(QUEUE, [receiver.url + "/allowed"]).fetchone()["id"]
        row = wait_until(lambda: _outcome(sql, allowed), timeout=30, message="the delivery")
        assert row["delivered_at"] is not None, row
        assert [r["path"] for r in receiver.received] == ["/allowed"]
    finally:
        receiver.close()
