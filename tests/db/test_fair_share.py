"""The fair share across tenants over time (migration 0026: a virtual time per tenant,
weighted fair queueing): claim after claim, each tenant with ready work gets its weight's
share of the starts, a claim of one included; a tenant coming back from idle, or from a
limit, shares from then on and is not owed what it missed; a claim's rows left by one
tenant go to another. (A claim of one among 200 tenants: test_attack18_claim.py.)"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from pgsched.stores import tasks

from ..factories import T0, make_task
from .test_claim_tenants import claim, register

pytestmark = pytest.mark.rolled_back


def backlog(db, tenant: str, n: int, minutes_ago: int = 5, new: bool = True) -> None:
    """``n`` ready executions of task 'job' on queue 'q' of ``tenant`` (made if ``new``)."""
    if new:
        make_task(db, "job", tenant=tenant, queue="q", now=T0)
    for _ in range(n):
        tasks.trigger(db, "job", tenant=tenant, run_at=T0 - timedelta(minutes=minutes_ago))


def no_quotas(sql, **weights: int) -> None:
    sql.execute("UPDATE pgsched.tenant SET max_running = NULL, max_starts_per_hour = NULL")
    for tenant, weight in weights.items():
        sql.execute("UPDATE pgsched.tenant SET weight = %s WHERE name = %s", [weight, tenant])


def claims_of(db, worker: int, times: int, limit: int = 1) -> Counter:
    got: Counter = Counter()
    for _ in range(times):
        got.update(r["tenant"] for r in claim(db, worker, None, limit=limit))
    return got


def test_claims_of_one_share_the_starts_by_weight(db, sql):
    """Weights 1, 2 and 3, every tenant with a backlog, 60 claims of one (a worker at
    capacity takes one at a time): 10, 20 and 30 starts, give or take one. 0021 gave
    every one of them to the heaviest tenant (the attack's finding 8)."""
    for tenant in ("a", "b", "c"):
        backlog(db, tenant, 40)
    no_quotas(sql, a=1, b=2, c=3)
    worker = register(db, None)
    got = claims_of(db, worker, 60)
    assert abs(got["a"] - 10) <= 1 and abs(got["b"] - 20) <= 1 and abs(got["c"] - 30) <= 1, got


def test_a_claim_of_many_is_shared_and_what_one_tenant_lacks_goes_to_another(db, sql):
    """A claim of 10 between two tenants of weight 1 takes 5 of each; with only 2 of a's
    ready, it takes those and 8 of b's (a second round of the same claim), in the order of
    their tags: a's two first among b's."""
    backlog(db, "a", 20)
    backlog(db, "b", 20)
    no_quotas(sql)
    worker = register(db, None)
    assert Counter(r["tenant"] for r in claim(db, worker, None, limit=10)) == {"a": 5, "b": 5}
    sql.execute(
        "DELETE FROM pgsched.execution WHERE tenant = 'a' AND state = 'pending' AND id NOT IN "
        "(SELECT id FROM pgsched.execution WHERE tenant = 'a' AND state = 'pending' "
        "ORDER BY id LIMIT 2)"
    )
    rows = claim(db, worker, None, limit=10)
    assert Counter(r["tenant"] for r in rows) == {"a": 2, "b": 8}
    assert [r["tenant"] for r in rows[:4]].count("a") == 2, [r["tenant"] for r in rows]


def test_a_tenant_back_from_idle_shares_from_then_on(db, sql):
    """b alone takes 40 starts; a, idle all that time, then enqueues 40. a is not owed
    b's 40: over the next 20 claims of one, a gets about half (not all 20, as it would if
    it had to catch up b's virtual time first)."""
    backlog(db, "b", 80)
    make_task(db, "job", tenant="a", queue="q", now=T0)
    no_quotas(sql)
    worker = register(db, None)
    assert claims_of(db, worker, 40) == {"b": 40}
    backlog(db, "a", 40, new=False)
    got = claims_of(db, worker, 20)
    assert 9 <= got["a"] <= 11, got


def test_a_tenant_held_at_a_limit_is_not_owed_the_starts_it_missed(db, sql):
    """a waits at max_running 0 (its work pending) while b takes 30 starts; when a's
    limit lifts, the two share the next 20 claims of one, about half each."""
    backlog(db, "a", 40)
    backlog(db, "b", 80)
    no_quotas(sql)
    sql.execute("UPDATE pgsched.tenant SET max_running = 0 WHERE name = 'a'")
    worker = register(db, None)
    assert claims_of(db, worker, 30) == {"b": 30}
    sql.execute("UPDATE pgsched.tenant SET max_running = NULL WHERE name = 'a'")
    got = claims_of(db, worker, 20)
    assert 9 <= got["a"] <= 11, got
