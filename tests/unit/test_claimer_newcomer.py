"""The claimer claims at once for a tenant it holds nothing of (pgsched/worker/claimer.py,
``_claim_now``): a notification naming another tenant than the buffer's brings a claim of
one even with the buffer full, so that tenant's run waits for a slot, not for the flood's
prefetch to drain (the fairness benchmark); a notification of the buffer's own tenant, or
an anonymous one, claims only when the buffer has room."""

from __future__ import annotations

from datetime import UTC, datetime

from pgsched.worker.claimer import Claimer
from pgsched.worker.config import WorkerConfig
from pgsched.worker.holdings import Holdings

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def full_of(tenant: str, n: int = 40) -> Claimer:
    config = WorkerConfig(tenants=None, concurrency=4, prefetch=20)
    holdings = Holdings(config)
    holdings.avg_run = 0.001  # short handlers: the prefetch at its cap
    holdings.running = 4
    holdings.add([{"id": i, "priority": 5, "run_at": T0, "tenant": tenant} for i in range(n)])
    claimer = Claimer(None, config, holdings, None, lambda: 1)  # type: ignore[arg-type]
    claimer._maybe_more = False
    return claimer


def test_a_full_buffer_claims_nothing_more_for_its_own_tenant():
    claimer = full_of("a")
    claimer._notified("pgsched_execution", "a")
    assert claimer._claim_now() == 0
    claimer._notified("pgsched_execution", "")  # a retry, a hand-back: anyone's
    assert claimer._claim_now() == 0


def test_a_tenant_the_buffer_holds_nothing_of_is_claimed_for_at_once_once():
    claimer = full_of("a")
    claimer._notified("pgsched_execution", "b")
    assert claimer._claim_now() == 1
    assert claimer._claim_now() == 0  # one claim per notification, not a claim per turn


def test_a_worker_that_does_not_serve_the_tenant_ignores_it():
    claimer = full_of("a")
    claimer.config.tenants = ("a",)
    claimer._notified("pgsched_execution", "b")
    assert claimer._claim_now() == 0
