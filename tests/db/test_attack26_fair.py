"""Attacks on the fair share of migration 0026 (execution_claim_v1's virtual time per
tenant, tenant_usage.vtime). Each test asserts the safe behaviour: it fails while the
attack works."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from pgsched.stores import tasks
from pgsched.worker.claims import TaskDefinitions

from ..factories import T0
from .test_claim_tenants import claim, register
from .test_fair_share import backlog, no_quotas

pytestmark = pytest.mark.rolled_back


def test_attack26_a_trickle_does_not_bank_credit_for_a_later_flood(db, sql):
    """a has a backlog; b enqueues one run at a time (a cron every few seconds, or a
    hostile trickle), each claimed at once. b is never backlogged, so it is owed nothing
    (docs/limits.md: "A tenant that had no work ... is not owed the starts it missed").
    But b's charge raises it only to the least vtime of the tenants served in the last
    10 s, and b, served a moment ago, is that least itself: its vtime grows by one per
    run while a's grows by every other start. When b then floods, every start goes to b
    until it has caught a up (here 90 claims; an hour of trickle against a busy tenant:
    an hour of a starved). Safe: from b's flood on the two share, about half each."""
    backlog(db, "a", 200)
    backlog(db, "b", 0)
    no_quotas(sql)
    worker = register(db, None)
    got: Counter = Counter()
    for i in range(100):
        if i % 10 == 0:  # b's trickle: one run, claimed at once
            tasks.trigger(db, "job", tenant="b", run_at=T0 - timedelta(minutes=5))
        got.update(r["tenant"] for r in claim(db, worker, None, limit=1))
    assert got == {"a": 90, "b": 10}, got
    backlog(db, "b", 100, new=False)
    after: Counter = Counter(r["tenant"] for _ in range(40) for r in claim(db, worker, None, 1))
    vt = {
        r["tenant"]: r["vtime"]
        for r in sql.execute("SELECT tenant, vtime FROM pgsched.tenant_usage")
    }
    assert after["a"] >= 15, f"a got {after['a']} of the 40 starts after b's flood; vtimes {vt}"


def test_attack26_after_a_quiet_spell_the_idle_tenant_does_not_take_every_start(db, sql):
    """a is busy all day (60 starts here), b idle. Then a quiet spell: nothing claimed by
    anyone for more than 10 s (a night, a deploy). Then both get work at once. No tenant
    was served in the last 10 s, so the claim's floor (the least vtime of those) is none
    and b is raised to nothing: b's tags start at 1, a's at 61, and b takes every start
    until it has caught a's whole day up. docs/limits.md: "a tenant back from idle delays
    the others by at most one claim". Safe: over the 40 claims of one after the spell,
    a gets about half."""
    backlog(db, "a", 100)
    backlog(db, "b", 0)
    no_quotas(sql)
    worker = register(db, None)
    assert Counter(r["tenant"] for _ in range(60) for r in claim(db, worker, None, 1)) == {"a": 60}
    backlog(db, "b", 60, new=False)
    later = T0 + timedelta(minutes=1)  # the quiet spell: a minute with no claim
    got: Counter = Counter(
        r["tenant"]
        for _ in range(40)
        for r in TaskDefinitions().claim(db, queues=["q"], limit=1, worker_id=worker, now=later)
    )
    assert got["a"] >= 15, f"a got {got['a']} of the 40 starts after the quiet spell: {got}"


def test_attack26_tenants_held_at_a_limit_do_not_use_up_the_claims_rounds(db, sql):
    """Four tenants have work due that a limit holds: c1 and c2 at max_running 0, c3 and
    c4 with queue q paused. A tenant held back is not charged, so its vtime stays below
    every tenant that runs, and it is the first candidate of every claim. A claim of one
    looks at one candidate a round (as many as it wants rows), that one takes nothing
    and is done, and the claim ends after four rounds: it returns nothing although a has
    200 runs due. A worker at capacity claims one at a time: with four tenants waiting
    at their caps (the usual state of a busy fleet) it starts nothing more for anyone.
    Safe: the claim of one returns a's next run."""
    backlog(db, "a", 200)
    no_quotas(sql)
    worker = register(db, None)
    assert Counter(r["tenant"] for _ in range(5) for r in claim(db, worker, None, 1)) == {"a": 5}
    for tenant in ("c1", "c2", "c3", "c4"):
        backlog(db, tenant, 10)
    sql.execute("UPDATE pgsched.tenant SET max_running = 0 WHERE name IN ('c1', 'c2')")
    sql.execute(
        "INSERT INTO pgsched.queue (tenant, name, paused_at) VALUES ('c3', 'q', now()),"
        " ('c4', 'q', now()) ON CONFLICT (tenant, name) DO UPDATE SET paused_at = now()"
    )
    got = [r["tenant"] for r in claim(db, worker, None, 1)]
    assert got == ["a"], f"a claim of one returned {got}, a's 195 due runs behind four held tenants"
